// The client role: the business process's view of the cluster. It keeps
// one link to its owner and carries requests from the embedding API to it.
// It contributes no capacity and holds no data of its own.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/client/client_rpc.hpp"
#include "actors/common/endpoint.hpp"
#include "actors/common/node_actor.hpp"

namespace sluice {

/// A request from the embedding API. `done` runs exactly once, on a
/// Sluice thread, with the owner's reply or the error that ended the call.
struct api_call {
  wire::body request;
  shared_bytes payload;
  std::chrono::microseconds timeout{0};
  std::function<void(result<wire::message>)> done;
  /// One-way: sent without waiting for a reply; `done` may be empty.
  bool notify = false;
};

using client_actor = node_actor::extend<caf::reacts_to<api_atom, api_call>, caf::reacts_to<tick_atom>,
                                        caf::reacts_to<rpc_answer_atom, served_answer>>;

struct client_deps {
  endpoint::identity identity;
  /// Where the owner is, best first (e.g. its shm socket, then its TCP
  /// address): each (re)connect takes the first that accepts a link.
  std::vector<std::string> owner_addresses;
  /// The node's transports. REQUIRES: outlives the actor.
  transport::transport* net = nullptr;
  /// Fault sites; only the simulator sets them. REQUIRES: outlives the actor.
  fault_sites* faults = nullptr;
  /// How often to tell the owner this client is alive; zero: never.
  clock_duration keepalive = std::chrono::seconds{2};
  /// What serves RPC calls arriving on this client's link (see
  /// client_rpc.hpp); null: none are.
  std::shared_ptr<rpc_served_slot> served = nullptr;
};

client_actor spawn_client(caf::actor_system& sys, client_deps deps);

}  // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::api_call)
