// How a library thread's request leaves it (calls.hpp): on the thread's
// own direct shm channel to the owner, or handed to the client node's
// actor; and the synchronous request built on the two.
#include "api/src/calls.hpp"

#include <caf/send.hpp>

#include <unordered_map>
#include <variant>
#include <utility>

#include "actors/client/client.hpp"
#include "actors/client/request_table.hpp"
#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"
#include "sluice/interrupt.hpp"
#include "transports/shm/client_link.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/waiter.hpp"

namespace sluice {
namespace {

namespace shm = transport::shm;

/// One thread's direct channel to one client's owner: a client link of
/// its own, whose request ring this thread writes and whose response ring
/// it reads itself, spinning briefly, then sleeping on the ring's futex.
/// With the owner's poller spinning too, a round trip is two cache-line
/// transfers each way: no system call, no wake-up, no other thread. To the
/// owner it is one more link of the client: it greets like any, and the
/// leases of what it read go when it closes.
struct direct_entry {
  std::weak_ptr<int> client_alive;
  std::shared_ptr<shm::client_link> link;
  transport::transport_limits limits;
  shm::waiter waiter{shm::waiter_config{}};
  /// False once the owner went away or the channel broke.
  bool usable = false;
  /// The thread's call in flight: one at a time, as the channel allows
  /// (a thread waits for each answer before it asks again).
  request_table<std::monostate> calls{1};
  bool failed = false;  // opening failed: this thread goes the usual way

  direct_entry() = default;
  direct_entry(const direct_entry&) = delete;
  direct_entry& operator=(const direct_entry&) = delete;
  ~direct_entry() { close(); }

  /// Values read through the link may still hold leases (and keep the
  /// mapping): closing its request ring tells the owner to let go of them.
  void close() {
    if (!link) return;
    std::lock_guard guard{link->send_mutex};
    link->closed = true;
    if (link->requests) shm::close_and_wake(*link->requests);
  }

  error broken(errc code, std::string why) {
    usable = false;
    return error{code, std::move(why)};
  }

  /// Writes `request` and waits for the answer to `request_id`.
  result<wire::message> round_trip(const wire::outbound_frame& request, std::uint64_t request_id,
                                   request_clock::time_point deadline) {
    // Whether the owner's poller slept: then its answer is a wake-up away,
    // and the first wait spins (if at all) as long as a wake-up takes.
    bool woke_owner = false;
    {
      std::lock_guard guard{link->send_mutex};
      if (link->closed) return broken(errc::unavailable, "the direct shm channel is closed");
      if (!shm::write_locked(*link, request)) {
        return fail(errc::overloaded, "the owner is not keeping up: the shm request ring is full");
      }
      woke_owner = shm::notify_poller(*link->requests, link->doorbell.get());
    }
    auto& responses = *link->responses;
    // An interrupt scope is asked once the wait has lasted its `every`.
    const auto* scope = interrupt_scope::current();
    auto ask_scope_at = scope != nullptr ? request_clock::now() + scope->every() : request_clock::time_point::max();
    while (true) {
      // A nap at most, so a vanished owner is noticed while we wait.
      auto until = std::min(deadline, request_clock::now() + waiter.config().nap_us);
      auto state = waiter.wait_readable(responses, until, std::exchange(woke_owner, false));
      if (state == shm::wait_result::broken) return broken(errc::protocol, "the owner's response ring is corrupt");
      if (state == shm::wait_result::closed) return broken(errc::unavailable, "the owner closed the link");
      if (state == shm::wait_result::timed_out) {
        if (link->socket.peer_closed()) return broken(errc::unavailable, "the owner process went away");
        auto now = request_clock::now();
        if (now >= deadline) return fail(errc::timeout, "no reply before the deadline");
        if (now >= ask_scope_at) {
          // The answer, when it comes, is skipped as a late one is.
          if (scope->interrupted()) return fail(errc::cancelled, "interrupted while waiting for the owner's answer");
          ask_scope_at = now + scope->every();
        }
        continue;
      }
      auto record = responses.peek();
      if (!record) continue;
      auto frame = shm::take_record(link, *record, limits.frame);
      responses.pop();
      shm::notify_producer(responses);
      if (!frame) return broken(frame.code(), frame.error().message());
      auto msg = wire::decode(std::move(*frame));
      if (!msg) return broken(msg.code(), msg.error().message());
      // The owner's hello and answers to calls that timed out are skipped.
      if (msg->env.reply_to == request_id) return msg;
    }
  }
};

/// Channels of this thread, by client (its `alive` token's address).
thread_local std::unordered_map<const void*, direct_entry> channels;

direct_entry& entry_for(client::impl& c) {
  // Forget channels of clients that are gone (their tokens expired).
  std::erase_if(channels, [](const auto& e) { return e.second.client_alive.expired(); });
  auto [it, inserted] = channels.try_emplace(c.alive.get());
  if (inserted) it->second.client_alive = c.alive;
  return it->second;
}

}  // namespace

wire::outbound_frame client_hello(const client::impl& c) {
  wire::envelope env;
  env.source = c.host->id();
  env.body = wire::hello{role::client, wire::protocol_version, c.options.name, ""};
  return wire::encode(env);
}

std::optional<result<wire::message>> direct_call(client::impl& c, const wire::body& request,
                                                 const shared_bytes& payload, std::chrono::milliseconds timeout) {
  if (c.shm_address.empty() || c.host->shm() == nullptr || !c.host->shm()->connected()) return std::nullopt;
  auto& e = entry_for(c);
  if (e.failed) return std::nullopt;
  if (!e.link || !e.usable) {
    e.close();
    auto opened = shm::open_client_link(c.shm_address, client_hello(c), c.host->shm()->segments());
    if (!opened) {
      e.failed = true;
      return std::nullopt;
    }
    e.link = std::move(*opened);
    e.usable = true;
    // No thread reads this link between the thread's calls: the node's
    // shm reader tells the owner of the leases it lets go meanwhile.
    c.host->shm()->adopt(e.link);
  }
  // One call at a time per thread and client: the thread waits for each
  // answer before it asks again (a handler calling back in on the same
  // thread would have to go the usual way).
  SLUICE_ASSERT(e.calls.size() == 0);
  auto deadline = request_clock::now() + timeout;
  auto id = e.calls.open(deadline, {});
  SLUICE_ASSERT(id.ok());
  wire::envelope env;
  env.request_id = *id;
  env.source = c.host->id();
  env.deadline_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(timeout).count());
  env.body = request;
  auto msg = e.round_trip(wire::encode(env, payload), env.request_id, deadline);
  // Answered, timed out or broken: the call is over either way, and an
  // answer that comes late is skipped by the channel.
  auto closed = e.calls.close(*id);
  SLUICE_ASSERT(closed.has_value());
  if (!msg) return result<wire::message>{std::move(msg).error()};
  if (auto* err = std::get_if<wire::error_reply>(&msg->env.body)) {
    return result<wire::message>{error{err->code, err->message}};
  }
  return result<wire::message>{std::move(*msg)};
}

// --- through the client node ----------------------------------------------------


void through_node(client::impl& c, wire::body request, shared_bytes payload, std::chrono::milliseconds timeout,
                  callback<wire::message> done) {
  api_call msg;
  msg.request = std::move(request);
  msg.payload = std::move(payload);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  msg.done = std::move(done);
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

void tell_node(client::impl& c, wire::body notice) {
  api_call msg;
  msg.request = std::move(notice);
  msg.notify = true;
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

result<wire::message> ask(client::impl& c, const wire::body& request, const shared_bytes& payload,
                          std::chrono::milliseconds timeout) {
  if (auto direct = direct_call(c, request, payload, timeout)) return std::move(*direct);
  auto [done, future] = promise_callback<wire::message>();
  through_node(c, request, payload, timeout, std::move(done));
  return wait_for(std::move(future), timeout);
}

}  // namespace sluice
