// placement: which owner receives a new version. Pure and deterministic
// given the master's rng.
#pragma once

#include <optional>
#include <vector>

#include "runtime/config/node_config.hpp"
#include "runtime/node_id.hpp"
#include "runtime/rng.hpp"

namespace sluice::master {

struct placement_candidate {
  node_id id;
  std::uint64_t free_bytes = 0;  ///< capacity minus committed bytes
  std::uint64_t capacity_bytes = 0;
  /// The owner evicts to make room: when no owner has room free, one that
  /// evicts and is large enough still takes the value.
  bool evicts = false;
};

/// Picks the owner for a value of `size` bytes among `up` (sorted by id),
/// among the owners with room free — or, when none has, among the owners
/// that evict and could hold it.
/// local_first: `preferred` when it qualifies, otherwise like random.
/// random: uniformly. most_free: the most free bytes (the lowest id on a
/// tie). Returns nothing when no up owner qualifies.
std::optional<node_id> choose_owner(placement_policy policy, node_id preferred,
                                    const std::vector<placement_candidate>& up,
                                    std::uint64_t size, rng& random);

}  // namespace sluice::master
