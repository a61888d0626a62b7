// fault_plan: which faults a run injects and how often. "none", "light"
// and "heavy" are fixed mixes; "swarm" draws a mix per seed (and the
// cluster's shape too), so a sweep explores many combinations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "runtime/rng.hpp"
#include "sim/time.hpp"
#include "sluice/result.hpp"

namespace sluice::sim {

/// none, light and heavy are fixed mixes; cuts only cuts paths between
/// pairs of nodes (owners and the master), on a quick network, so that
/// every cut between the master and an owner must be bridged by a relay;
/// swarm draws a mix per seed (a sixth of its seeds are cuts runs).
enum class fault_level { none, light, heavy, swarm, cuts };

result<fault_level> parse_fault_level(std::string_view text);
std::string_view to_string(fault_level level) noexcept;

/// Rates and switches of one run. Probabilities are per mille (‰).
struct fault_plan {
  // Network, per frame or per link.
  sim_duration latency_min = 50us;
  sim_duration latency_max = 500us;
  sim_duration jitter_max = 100us;
  std::uint32_t drop_pm = 0;       ///< frame silently lost
  std::uint32_t duplicate_pm = 0;  ///< frame delivered twice
  std::uint32_t reorder_pm = 0;    ///< frame may overtake earlier ones on its link

  // Events drawn over the run: the mean time between two of each kind;
  // zero switches the kind off.
  sim_duration link_reset_every{0};
  sim_duration clog_every{0};
  sim_duration partition_every{0};
  sim_duration owner_crash_every{0};
  sim_duration client_crash_every{0};
  sim_duration master_crash_every{0};
  /// Faults of the path between two nodes (owners or the master), each
  /// lasting a while: cut both ways (a third owner may relay), slowed
  /// down, or losing packets (frames arrive after a retransmission).
  sim_duration pair_cut_every{0};
  sim_duration pair_slow_every{0};
  sim_duration pair_loss_every{0};

  /// Chance (‰) that a restart also wipes the node's storage.
  std::uint32_t wipe_on_restart_pm = 300;
  /// Fault sites in role code (SLUICE_BUGGIFY) may fire.
  bool buggify = false;
  /// Nothing but pair cuts on a quick network: the relay check judges every
  /// owner the master marks down (runner.cpp).
  bool cuts_only = false;

  /// The plan of `level`; swarm draws from `random`.
  static fault_plan make(fault_level level, rng& random);
  /// One line listing what is switched on.
  std::string describe() const;
};

}  // namespace sluice::sim
