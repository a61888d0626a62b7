#include "transports/shm/shm_direct.hpp"

#include "runtime/wire/codec.hpp"

namespace sluice::transport {

result<std::unique_ptr<shm_direct>> shm_direct::open(std::string_view address, wire::outbound_frame hello,
                                                     std::shared_ptr<const shm::segment_list> mapped,
                                                     transport_limits limits, shm::waiter_config waiter) {
  auto link = shm::open_client_link(address, hello, std::move(mapped));
  if (!link) return link.error();
  return std::unique_ptr<shm_direct>{new shm_direct{std::move(*link), limits, waiter}};
}

shm_direct::~shm_direct() {
  // Values read through this channel may still hold leases (and keep the
  // mapping): closing the socket tells the owner to let go of them all.
  std::lock_guard guard{link_->send_mutex};
  link_->closed = true;
  if (link_->requests) shm::close_and_wake(*link_->requests);
}

error shm_direct::broken(errc code, std::string why) {
  usable_ = false;
  return error{code, std::move(why)};
}

result<wire::message> shm_direct::call(const wire::outbound_frame& request, std::uint64_t request_id,
                                       std::chrono::steady_clock::time_point deadline) {
  if (!usable_) return fail(errc::unavailable, "the direct shm channel is closed");
  {
    std::lock_guard guard{link_->send_mutex};
    if (link_->closed) return broken(errc::unavailable, "the direct shm channel is closed");
    if (!shm::write_locked(*link_, request)) {
      return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
    }
    shm::notify_poller(*link_->requests, link_->doorbell.get());
  }
  return wait_for(request_id, deadline);
}

result<wire::message> shm_direct::wait_for(std::uint64_t request_id,
                                           std::chrono::steady_clock::time_point deadline) {
  auto& responses = *link_->responses;
  while (true) {
    // A nap at most, so a vanished owner is noticed while we wait.
    auto until = std::min(deadline, std::chrono::steady_clock::now() + waiter_.config().nap_us);
    auto state = waiter_.wait_readable(responses, until);
    if (state == shm::wait_result::broken) return broken(errc::protocol, "the owner's response ring is corrupt");
    if (state == shm::wait_result::closed) return broken(errc::unavailable, "the owner closed the link");
    if (state == shm::wait_result::timed_out) {
      if (link_->socket.peer_closed()) return broken(errc::unavailable, "the owner process went away");
      if (std::chrono::steady_clock::now() >= deadline) return fail(errc::timeout, "no reply before the deadline");
      continue;
    }
    auto record = responses.peek();
    if (!record) continue;
    auto frame = shm::take_record(link_, *record, limits_.frame);
    responses.pop();
    shm::notify_producer(responses);
    if (!frame) return broken(frame.code(), frame.error().message());
    auto msg = wire::decode(std::move(*frame));
    if (!msg) return broken(msg.code(), msg.error().message());
    // The owner's hello and answers to calls that timed out are skipped.
    if (msg->env.reply_to == request_id) return msg;
  }
}

}  // namespace sluice::transport
