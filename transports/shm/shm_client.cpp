#include "transports/shm/shm_client.hpp"

#include <fmt/format.h>

#include "transports/shm/client_link.hpp"
#include "transports/shm/frame_copy.hpp"

namespace sluice::transport {
namespace {

/// Records delivered per wake-up before the reader looks at the socket.
constexpr int records_per_turn = 256;

}  // namespace

using shm::flush_releases;
using shm::resolve_in;
using shm::take_greeting;
using shm::write_locked;

shm_client::shm_client(std::uint16_t tag, link_sink& sink, transport_limits limits,
                       shm_client_options options)
    : tag_(tag), sink_(sink), limits_(limits), options_(options), log_(get_logger("shm")) {}

shm_client::~shm_client() { shutdown(); }

result<std::string> shm_client::listen(std::string_view address) {
  return fail(errc::invalid_argument,
              "a client does not accept shm links ('" + std::string{address} + "')");
}

result<link_id> shm_client::connect(std::string_view address) {
  auto s = shm::unix_socket::connect(address);
  if (!s) {
    return fail(s.code(), "cannot reach an owner's shm socket at " + std::string{address} + ": " +
                              s.error().message());
  }
  auto c = std::make_shared<connection>(std::move(*s));
  c->address = std::string{address};
  std::lock_guard guard{mutex_};
  if (stopping_) return fail(errc::unavailable, "the shm transport is shut down");
  if (current_) return fail(errc::conflict, "this client already has an shm link to its owner");
  c->id = make_link_id(tag_, next_sequence_++);
  current_ = c;
  if (reader_.joinable()) reader_.join();  // a previous link's reader has finished
  reader_ = std::thread([this, c] { read_loop(c); });
  return c->id;
}

void shm_client::read_loop(std::shared_ptr<connection> c) {
  if (auto ok = take_greeting(*c); !ok) {
    log_->warn("shm link to {} failed at the greeting: {}", c->address, ok.error().to_string());
    finish(*c, ok.error());
    return;
  }
  bool flushed = true;
  {
    std::lock_guard guard{c->send_mutex};
    c->up = true;
    for (auto& frame : c->early) flushed = flushed && write_locked(*c, frame);
    if (c->early_bytes != 0) shm::notify_poller(*c->requests, c->doorbell.get());
    c->early.clear();
    c->early_bytes = 0;
  }
  if (!flushed) {
    return finish(*c, error{errc::overloaded, "frames sent while connecting do not fit the shm ring"});
  }
  sink_.on_link_up(c->id, c->address);
  shm::waiter w{options_.waiter};
  auto last_adopted_flush = std::chrono::steady_clock::now();
  while (!stopping_ && !c->close_requested) {
    auto state = w.wait_readable(*c->responses, std::chrono::steady_clock::now() + options_.waiter.nap_us);
    if (state == shm::wait_result::broken) return finish(*c, error{errc::protocol, "the owner's response ring is corrupt"});
    if (state == shm::wait_result::closed) return finish(*c, error{errc::unavailable, "the owner closed the link"});
    if (state == shm::wait_result::timed_out) {
      if (c->socket.peer_closed()) return finish(*c, error{errc::unavailable, "the owner process went away"});
      flush_releases(*c);
      flush_adopted();
      last_adopted_flush = std::chrono::steady_clock::now();
      continue;
    }
    for (int n = 0; n < records_per_turn; ++n) {
      auto record = c->responses->peek();
      if (!record) break;
      auto frame = shm::take_record(c, *record, limits_.frame);
      c->responses->pop();
      if (!frame) return finish(*c, frame.error());
      if (auto taken = sink_.on_frame(c->id, std::move(*frame)); !taken) return finish(*c, taken.error());
    }
    shm::notify_producer(*c->responses);
    flush_releases(*c);
    // A reader that never goes idle still flushes adopted links each nap.
    if (auto now = std::chrono::steady_clock::now(); now - last_adopted_flush >= options_.waiter.nap_us) {
      flush_adopted();
      last_adopted_flush = now;
    }
  }
  finish(*c, error{errc::aborted, "closed locally"});
}

bool shm_client::adopt(std::weak_ptr<shm::client_link> link) {
  std::lock_guard guard{adopted_mutex_};
  std::erase_if(adopted_, [](const auto& l) { return l.expired(); });
  if (adopted_.size() >= adopted_links_max) return false;
  adopted_.push_back(std::move(link));
  return true;
}

void shm_client::flush_adopted() {
  std::vector<std::shared_ptr<connection>> live;
  {
    std::lock_guard guard{adopted_mutex_};
    if (adopted_.empty()) return;
    std::erase_if(adopted_, [&](const auto& l) {
      auto c = l.lock();
      if (!c) return true;
      live.push_back(std::move(c));
      return false;
    });
  }
  // Outside the list's lock: flushing takes each link's send lock, which
  // its thread holds while it writes a request.
  for (auto& c : live) flush_releases(*c);
}

void shm_client::finish(connection& c, const error& reason) {
  {
    std::lock_guard guard{c.send_mutex};
    if (c.closed) return;
    c.closed = true;
    if (c.requests) shm::close_and_wake(*c.requests);
  }
  {
    std::lock_guard guard{mutex_};
    if (current_.get() == &c) current_.reset();
  }
  if (!stopping_) sink_.on_link_down(c.id, reason);
}

result<void> shm_client::send(link_id link, wire::outbound_frame frame) {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{mutex_};
    c = current_;
  }
  if (!c || c->id != link) return fail(errc::unavailable, fmt::format("shm link {:#x} is not open", link));
  std::lock_guard guard{c->send_mutex};
  if (c->closed) return fail(errc::unavailable, fmt::format("shm link {:#x} is closed", link));
  if (!c->up) {
    if (c->early_bytes + frame.size() > limits_.max_queued_bytes) {
      return fail(errc::overloaded, "too many frames wait for the shm link to come up");
    }
    c->early_bytes += frame.size();
    c->early.push_back(std::move(frame));
    return {};
  }
  if (auto ok = shm::check_outbound(frame, c->requests->record_bytes_max() - 64); !ok) return ok;
  if (!write_locked(*c, frame)) {
    return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
  }
  shm::notify_poller(*c->requests, c->doorbell.get());
  return {};
}

void shm_client::close(link_id link) {
  std::lock_guard guard{mutex_};
  if (current_ && current_->id == link) current_->close_requested = true;
}

void shm_client::shutdown() {
  std::call_once(shutdown_once_, [this] {
    stopping_ = true;
    {
      std::lock_guard guard{mutex_};
      if (current_) current_->close_requested = true;
    }
    if (reader_.joinable()) reader_.join();
  });
}

std::optional<shm_client::mapped_region> shm_client::map_region(const region& r) const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return std::nullopt;
  auto bytes = resolve_in(*c, r);
  if (!bytes) return std::nullopt;
  return mapped_region{c, *bytes};
}

std::shared_ptr<const shm::segment_list> shm_client::segments() const {
  std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
  return current_ ? current_->segments : nullptr;
}

bool shm_client::connected() const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return false;
  std::lock_guard guard{c->send_mutex};
  return c->up && !c->closed;
}

std::optional<std::span<std::byte>> shm_client::resolve(const region& r) const {
  std::shared_ptr<connection> c;
  {
    std::lock_guard guard{const_cast<std::mutex&>(mutex_)};
    c = current_;
  }
  if (!c) return std::nullopt;
  return resolve_in(*c, r);
}

}  // namespace sluice::transport
