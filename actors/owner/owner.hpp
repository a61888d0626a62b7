// The owner role: contributes memory for values, serves the clients of its
// host, fetches values from other owners for remote gets, and keeps the
// master informed (registration, heartbeats, commits).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <caf/fwd.hpp>

#include "actors/common/endpoint.hpp"
#include "actors/common/node_actor.hpp"
#include "actors/owner/fast_path.hpp"
#include "actors/owner/object_store.hpp"
#include "actors/owner/rpc_routes.hpp"
#include "runtime/config/node_config.hpp"
#include "transports/rdma_path.hpp"

namespace sluice {

using owner_actor = node_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<reconnect_atom>,
                                       caf::reacts_to<commits_atom>, caf::reacts_to<report_atom>,
                                       caf::reacts_to<rdma_atom, std::uint64_t, bool, std::string>,
                                       caf::reacts_to<rdma_atom, std::uint64_t>>;

struct owner_deps {
  /// identity.listen_address is where other owners reach this one.
  endpoint::identity identity;
  owner_section config;
  /// How this owner reaches other owners (its link manager).
  links_section links;
  /// The node's transports. REQUIRES: outlives the actor.
  transport::transport* net = nullptr;
  /// Fault sites; only the simulator sets them. REQUIRES: outlives the actor.
  fault_sites* faults = nullptr;
  std::shared_ptr<object_store> store;
  /// Drawn at random per start of the owner (see wire::register_owner).
  std::uint64_t incarnation = 0;
  /// What this owner may answer without its actor (see fast_path.hpp);
  /// null: no fast path. Whoever runs the fast path sends the actor a
  /// commits_atom when serve_fast says commits are waiting.
  std::shared_ptr<fast_index> index;
  /// RPC instances and calls, shared with the shm poller's relay (see
  /// rpc_routes.hpp); null: a table of the actor's own.
  std::shared_ptr<rpc_routes> routes;
  /// One-sided reads of other owners' pools (null: none; the rdma path
  /// is never used). Its completions reach the actor as (rdma_atom, work
  /// id, ok, error). REQUIRES: outlives the actor.
  transport::rdma_path* rdma = nullptr;
};

owner_actor spawn_owner(caf::actor_system& sys, owner_deps deps);

}  // namespace sluice
