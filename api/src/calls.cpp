// How a library thread's request leaves it (calls.hpp): on the thread's
// own direct shm channel to the owner, or handed to the client node's
// actor; and the synchronous request built on the two.
#include "api/src/calls.hpp"

#include <caf/send.hpp>

#include <unordered_map>
#include <variant>

#include "actors/client/client.hpp"
#include "actors/client/request_table.hpp"
#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/shm_direct.hpp"

namespace sluice {
namespace {

/// One thread's direct channel to one client's owner.
struct direct_entry {
  std::weak_ptr<int> client_alive;
  std::unique_ptr<transport::shm_direct> channel;
  /// The thread's call in flight: one at a time, as the channel allows
  /// (a thread waits for each answer before it asks again).
  request_table<std::monostate> calls{1};
  bool failed = false;  // opening failed: this thread goes the usual way
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
  if (!e.channel || !e.channel->usable()) {
    auto opened = transport::shm_direct::open(c.shm_address, client_hello(c), c.host->shm()->segments());
    if (!opened) {
      e.failed = true;
      return std::nullopt;
    }
    e.channel = std::move(*opened);
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
  auto msg = e.channel->call(wire::encode(env, payload), env.request_id, deadline);
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
