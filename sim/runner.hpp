// runner: one simulated run from a seed — build the world, run the
// workload under the fault plan, heal, check liveness — and sweeps over
// many seeds. What `sluice sim` runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/checker.hpp"
#include "sim/fault_plan.hpp"
#include "sim/trace.hpp"
#include "sim/workload.hpp"
#include "sim/world.hpp"

namespace sluice::sim {

struct run_options {
  std::uint64_t seed = 1;
  int owners = 3;
  int clients = 4;
  sim_duration duration = 20s;
  fault_level faults = fault_level::heavy;
  /// Keep every trace event's description (for determinism checks).
  bool keep_trace = false;
  /// Broken owner stores for tests of the checker itself.
  store_factory make_store;
  /// A broken master that forgets its directory when it restarts.
  bool master_forgets = false;
  /// Each owner's pool; 0: 256 MiB. Small pools make owners evict.
  std::uint64_t owner_capacity = 0;
  /// A broken checker hookup for tests of the checker itself: evictions
  /// are not reported, so every read they explain looks like a lost value.
  bool hide_evictions = false;
  /// Clients also serve names and call each other (rpc_workload.hpp).
  bool rpc = false;
  /// A broken owner relay for tests of the RPC checks (world_config).
  bool rpc_relay_misroutes = false;
  /// A broken stream server for tests of the stream checks: a pull that
  /// outruns its writer gets the item delivered last again
  /// (stream_server_options::plant_repeat_after_credit_race).
  bool rpc_stream_repeats_item = false;
  /// Owners read each other's pools over the simulated rdma path, whose
  /// reads fail now and then when the run has faults (world_config).
  bool rdma = false;
  /// Clients also produce to MQ topics and consume them in two groups
  /// (mq_workload.hpp).
  bool mq = false;
  /// A broken master for tests of the MQ checks: when a partition moves
  /// to another member, the acks above its committed offset are forgotten
  /// and those messages go out again (mq_groups::plant_forget_acks_on_move).
  bool mq_forgets_acks = false;
  /// A broken master for tests of the MQ memory check: the payloads of
  /// consumed messages are never freed (master_deps::plant_mq_keep_consumed_payloads).
  bool mq_leaks_payloads = false;
  /// Owners may not relay (world_config::no_relays): for tests of the
  /// relay check.
  bool no_relays = false;
  /// A broken master that never repairs (master_deps::plant_no_repair), for
  /// tests of the durability check.
  bool no_repair = false;
  /// The master's [master] repair_after (world_config::repair_after).
  std::chrono::microseconds repair_after{2'000'000};
  /// Mean pause between two KV operations of one client
  /// (workload_options::think): shorter pauses, a denser workload.
  sim_duration think = workload_options{}.think;
};

struct run_report {
  std::uint64_t seed = 0;
  int owners = 0;
  int clients = 0;
  placement_policy placement = placement_policy::local_first;
  std::string plan;
  std::vector<std::string> violations;
  std::uint64_t trace_hash = 0;
  std::uint64_t trace_events = 0;
  std::uint64_t steps = 0;
  std::uint64_t operations = 0;
  std::uint64_t rpc_calls = 0;  ///< with run_options::rpc
  std::uint64_t rpc_calls_refused = 0;  ///< answered overloaded by their serving client
  std::uint64_t rpc_streams = 0;       ///< streams opened, with run_options::rpc
  std::uint64_t rpc_stream_items = 0;  ///< items read in them
  std::uint64_t rdma_reads = 0;         ///< with run_options::rdma: completed
  std::uint64_t rdma_reads_failed = 0;  ///< and failed (faults, crashed holders)
  std::uint64_t repair_copies = 0;         ///< made by repair after owners were lost
  std::uint64_t repair_copies_failed = 0;  ///< and failed (each is tried again)
  /// Keys put with two copies that nothing could have lost, read back at
  /// the end (kv_workload::check_durable).
  std::uint64_t durable_keys = 0;
  /// Cuts between the master and an owner in a run whose plan the relay
  /// check judges (no frame loss, fault sites or slow links): where another
  /// owner reached both, the owner had to stay up through each.
  std::uint64_t relay_cuts = 0;
  /// With run_options::mq: produces acknowledged (not duplicates),
  /// deliveries, of them redeliveries, and acks the master confirmed.
  std::uint64_t mq_produced = 0;
  std::uint64_t mq_delivered = 0;
  std::uint64_t mq_redelivered = 0;
  std::uint64_t mq_acked = 0;
  /// ack_upto calls confirmed, and produces refused because a topic was
  /// full (its policy reject).
  std::uint64_t mq_acked_upto = 0;
  std::uint64_t mq_refused_full = 0;
  /// Seeks confirmed, and acked messages delivered again after them.
  std::uint64_t mq_seeks = 0;
  std::uint64_t mq_replayed = 0;
  /// The most payloads the master held under `~mq/` at one count.
  std::uint64_t mq_payloads_peak = 0;
  checker::counts counts;
  double simulated_s = 0;
  double real_s = 0;
  std::vector<trace::event> events;  ///< when kept
  std::string fault_sites;           ///< sites that fired, "file:line×n, ..."

  bool passed() const noexcept { return violations.empty(); }
};

run_report run_seed(const run_options& options);

/// The command line that replays `options` exactly.
std::string replay_command(const run_options& options);

/// Runs `options` twice; returns an empty string when both runs agree,
/// else a description of the first event where they differ.
std::string check_determinism(run_options options);

}  // namespace sluice::sim
