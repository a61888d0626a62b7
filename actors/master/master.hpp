// The master role: membership and failure detection, the object
// directory, placement. It never touches payload bytes.
#pragma once

#include <cstdint>

#include <caf/fwd.hpp>

#include "actors/common/endpoint.hpp"
#include "actors/common/node_actor.hpp"
#include "runtime/config/node_config.hpp"

namespace sluice {

using master_actor =
    node_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<resume_atom, std::uint64_t>>;

struct master_deps {
  endpoint::identity identity;
  master_section config;
  /// The node's transports. REQUIRES: outlives the actor.
  transport::transport* net = nullptr;
  /// Fault sites; only the simulator sets them. REQUIRES: outlives the actor.
  fault_sites* faults = nullptr;
  std::uint64_t seed = 1;
};

master_actor spawn_master(caf::actor_system& sys, master_deps deps);

}  // namespace sluice
