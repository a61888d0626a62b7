#include <chrono>
#include <unordered_map>

#include "api/src/client_impl.hpp"
#include "actors/common/endpoint.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/shm/shm_client.hpp"
#include "transports/shm/shm_direct.hpp"

namespace sluice {
namespace {

/// One thread's direct channel to one client's owner.
struct direct_entry {
  std::weak_ptr<int> client_alive;
  std::unique_ptr<transport::shm_direct> channel;
  std::uint64_t next_request = 1;
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
  wire::envelope env;
  env.request_id = e.next_request++;
  env.source = c.host->id();
  env.deadline_us = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(timeout).count());
  env.body = request;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto msg = e.channel->call(wire::encode(env, payload), env.request_id, deadline);
  if (!msg) return result<wire::message>{std::move(msg).error()};
  if (auto* err = std::get_if<wire::error_reply>(&msg->env.body)) {
    return result<wire::message>{error{err->code, err->message}};
  }
  return result<wire::message>{std::move(*msg)};
}

}  // namespace sluice
