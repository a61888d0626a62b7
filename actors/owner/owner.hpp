// The owner role: contributes memory for values, serves the clients of its
// host, fetches values from other owners for remote gets, and keeps the
// master informed (registration, heartbeats, commits).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>

#include "actors/common/endpoint.hpp"
#include "actors/common/node_actor.hpp"
#include "actors/owner/fast_path.hpp"
#include "actors/owner/object_store.hpp"
#include "actors/owner/rpc_routes.hpp"
#include "runtime/config/node_config.hpp"
#include "transports/rdma_path.hpp"

namespace sluice::gpu {
class device;
}  // namespace sluice::gpu

namespace sluice {

/// One GPU pool of an owner, as it reports it.
struct gpu_pool_report {
  std::uint32_t device = 0;  ///< CUDA ordinal
  std::string name{};
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;
  bool ipc = false;  ///< the device can share it with local clients
};

/// The owner's answer to (gpu_atom): its pools, or why it has none.
struct gpu_report {
  std::vector<gpu_pool_report> pools{};
  /// Not empty when the owner runs without GPU pools: why (the reason its
  /// log gave at start, e.g. "no CUDA driver").
  std::string unavailable{};
};

using owner_actor = node_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<reconnect_atom>,
                                       caf::reacts_to<commits_atom>, caf::reacts_to<report_atom>,
                                       caf::reacts_to<rdma_atom, std::uint64_t, bool, std::string>,
                                       caf::reacts_to<rdma_atom, std::uint64_t>,
                                       caf::replies_to<gpu_atom>::with<gpu_report>>;

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
  /// The GPU runtime the owner opens its [owner.gpu] pools on (null: it
  /// has none, and says so when [owner.gpu] asks for pools). REQUIRES:
  /// outlives the actor.
  gpu::device* gpu = nullptr;
};

owner_actor spawn_owner(caf::actor_system& sys, owner_deps deps);

}  // namespace sluice

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(sluice::gpu_report)
