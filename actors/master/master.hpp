// The master role: membership and failure detection, the object
// directory, placement. It never touches payload bytes.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include <caf/fwd.hpp>

#include "actors/common/endpoint.hpp"
#include "actors/common/node_actor.hpp"
#include "runtime/config/node_config.hpp"
#include "runtime/storage/durable_store.hpp"

namespace sluice {

using master_actor = node_actor::extend<caf::reacts_to<tick_atom>, caf::reacts_to<resume_atom, std::uint64_t>,
                                        caf::reacts_to<sync_atom>>;

struct master_deps {
  endpoint::identity identity;
  master_section config;
  /// The node's transports. REQUIRES: outlives the actor.
  transport::transport* net = nullptr;
  /// Fault sites; only the simulator sets them. REQUIRES: outlives the actor.
  fault_sites* faults = nullptr;
  /// Where the directory and membership persist; null: nowhere (a
  /// restart forgets the cluster). REQUIRES: outlives the actor.
  durable_store* store = nullptr;
  std::uint64_t seed = 1;
  /// Wall time in milliseconds since the Unix epoch, which TTLs are kept
  /// in: the system clock in a node, virtual time in the simulator.
  /// Required: role code reads no clock of its own.
  std::function<std::int64_t()> wall_ms = {};
  /// Told of every key the master takes out on its own — evicted, expired,
  /// lost by its last holder — (the simulator's checker listens); may be
  /// empty.
  std::function<void(const std::string& key)> on_forgotten = {};
  /// Told of every copy of a key with several that an owner evicted on
  /// purpose (the key keeps its other copies, and a copy target lowered
  /// by one); may be empty.
  std::function<void(const std::string& key)> on_copy_evicted = {};
  /// Told of every repair copy that ended: made or not (the simulator
  /// counts them); may be empty.
  std::function<void(bool made)> on_repair = {};
  /// Told of every owner the master marks down for missing heartbeats or
  /// a lost link, with that reason (the simulator's checker listens); may
  /// be empty.
  std::function<void(node_id owner, const std::string& why)> on_member_down = {};
  /// A planted bug, for the simulator's tests of its own checks only
  /// (mq_groups::plant_forget_acks_on_move).
  bool plant_mq_forget_acks_on_move = false;
  /// A planted bug, for the simulator's tests of its own checks only: the
  /// payloads of messages every group consumed are never freed.
  bool plant_mq_keep_consumed_payloads = false;
  /// A planted bug, for the simulator's tests of its own checks only: a
  /// payload recalled by a move is freed as soon as its message goes, while
  /// the member it was recalled from may still be reading it.
  bool plant_mq_free_recalled_at_once = false;
  /// A planted bug, for the simulator's tests of its own checks only: the
  /// master counts objects short of copies but never makes a copy.
  bool plant_no_repair = false;
};

/// What the master recovered from its store when it started.
struct master_recovery {
  std::uint64_t objects = 0;
  std::uint64_t members = 0;
};

/// Reads the master's durable state (when deps.store is set) and spawns
/// it. Errors: the store's, or `internal` for a corrupt record.
result<master_actor> spawn_master(caf::actor_system& sys, master_deps deps,
                                  master_recovery* recovered = nullptr);

}  // namespace sluice
