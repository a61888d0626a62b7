#include <chrono>
#include <unordered_map>
#include <variant>

#include "api/src/client_impl.hpp"
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
  e.calls.close(*id);
  if (!msg) return result<wire::message>{std::move(msg).error()};
  if (auto* err = std::get_if<wire::error_reply>(&msg->env.body)) {
    return result<wire::message>{error{err->code, err->message}};
  }
  return result<wire::message>{std::move(*msg)};
}

}  // namespace sluice
