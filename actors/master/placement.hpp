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
};

/// Picks the owner for a value of `size` bytes among `up` (sorted by id).
/// local_first: `preferred` when it is up and has room, otherwise like
/// random. random: uniformly among the up owners with room. Returns
/// nothing when no up owner has room.
std::optional<node_id> choose_owner(placement_policy policy, node_id preferred,
                                    const std::vector<placement_candidate>& up,
                                    std::uint64_t size, rng& random);

}  // namespace sluice::master
