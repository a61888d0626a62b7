// world: a whole Sluice cluster in one process on one thread — one master,
// K owners and M clients, each its own CAF actor system on the
// deterministic test scheduler, running the production role actors over
// the simulated network, on one virtual clock. A seeded rng picks which
// node and which actor runs next; separate streams derived from the root
// seed drive scheduling, the network, faults and the workload.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/client/client_rpc.hpp"
#include "actors/owner/object_store.hpp"
#include "runtime/config/node_config.hpp"
#include "runtime/rng.hpp"
#include "sim/fault_plan.hpp"
#include "sim/network.hpp"
#include "sim/sim_faults.hpp"
#include "sim/sim_storage.hpp"
#include "sim/trace.hpp"

namespace sluice::gpu {
class fake_device;
}  // namespace sluice::gpu

namespace sluice::sim {

class rdma_fabric;

/// Makes the object store of an owner incarnation (tests swap in broken
/// stores to prove the checker catches them).
using store_factory = std::function<std::shared_ptr<object_store>(std::uint64_t capacity_bytes)>;

struct world_config {
  std::uint64_t seed = 1;
  int owners = 3;
  int clients = 4;
  placement_policy placement = placement_policy::local_first;
  fault_plan faults;
  /// Keep a description of every trace event (for --check-determinism).
  bool keep_trace = false;
  store_factory make_store;  ///< empty: memory_store
  /// A broken master that keeps nothing across restarts (for tests of the
  /// checker itself).
  bool master_forgets = false;
  /// A broken owner relay for tests of the RPC checks: it hands the calls
  /// it relays back to their callers instead of their instances.
  bool rpc_relay_misroutes = false;
  /// A broken master for tests of the MQ checks: it forgets the acks of a
  /// partition above its committed offset when the partition moves.
  bool mq_forgets_acks = false;
  /// A broken master for tests of the MQ memory check: it never frees the
  /// payloads of messages every group consumed.
  bool mq_leaks_payloads = false;
  /// A broken master for tests of the MQ read check: it frees a recalled
  /// delivery's payload as soon as its message is consumed.
  bool mq_frees_recalled = false;
  /// The master's [master] mq_orphan_grace: short, so that payloads no
  /// message names (a producer lost between its put and its append) are
  /// freed within a run and the memory check can demand that nothing is
  /// left.
  std::chrono::microseconds mq_orphan_grace{4'000'000};
  /// Each owner's pool; 0: 256 MiB (never full). Small pools make owners evict.
  std::uint64_t owner_capacity = 0;
  /// How long owners gather their own commits before reporting them: long
  /// delays make every reader that does not wait for them see stale data.
  std::chrono::microseconds commit_report_delay{0};
  /// The owner each client talks to, by client index; empty: drawn at
  /// random (tests that stage a scenario pin them).
  std::vector<int> client_owners;
  /// Owners keep their values in pools and read each other's over the
  /// simulated rdma path (sim_rdma.hpp); each read fails with
  /// rdma_fail_pm per mille.
  bool rdma = false;
  std::uint32_t rdma_fail_pm = 0;
  /// Owners get [owner.gpu] pools of gpu_capacity on each of this many
  /// fake devices (runtime/gpu/fake_device.hpp); 0: owners have no GPU.
  std::uint32_t gpu_devices = 0;
  std::uint64_t gpu_capacity = 4ULL << 20;
  /// Called when the master takes a key out on its own (evicted, expired,
  /// lost), with the virtual time.
  std::function<void(const std::string& key, sim_time at)> on_forgotten;
  /// Called when an owner evicted one of several copies of a key.
  std::function<void(const std::string& key, sim_time at)> on_copy_evicted;
  /// Called when the master marks an owner down (missed heartbeats, link
  /// lost), with the owner's node index (-1 for an incarnation that is no
  /// longer running) and the virtual time.
  std::function<void(int node, const std::string& why, sim_time at)> on_member_down;
  /// Owners may not relay ([links] order without "relay"): an owner cut
  /// off from the master has no other way to it (for tests of the relay
  /// check).
  bool no_relays = false;
  /// A broken master for tests of the durability check: it never makes a
  /// repair copy.
  bool no_repair = false;
  /// Owners keep a copy of values they read from other owners ([owner]
  /// cache_remote): more copies than a put asked for.
  bool cache_remote = true;
  /// The master's [master] repair_after: copies on an owner down this long
  /// stop counting and are made again elsewhere. Short, so that runs with
  /// crashes make repair copies too.
  std::chrono::microseconds repair_after{2'000'000};
};

enum class node_kind { master, owner, client };

class world {
 public:
  explicit world(world_config config);
  ~world();
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  // --- time and running -------------------------------------------------

  sim_time now() const noexcept { return now_; }
  /// Runs until virtual time `until`: every runnable job, then the next
  /// due event (network, timers, scheduled callbacks), and so on.
  void run_until(sim_time until);
  /// Calls `action` at virtual time `at` from the world's loop.
  void at(sim_time when, std::function<void()> action);

  // --- nodes --------------------------------------------------------------

  int master_index() const noexcept { return 0; }
  int owner_index(int i) const noexcept { return 1 + i; }
  int client_index(int i) const noexcept { return 1 + config_.owners + i; }
  int node_count() const noexcept { return static_cast<int>(nodes_.size()); }
  node_kind kind_of(int node) const;
  bool alive(int node) const;
  /// How many times the node started (1 after the first start).
  std::uint64_t incarnation(int node) const;
  /// The node's role actor (null while it is down).
  caf::actor actor_of(int node) const;
  const std::string& name_of(int node) const;
  /// The node's id (of its current, or last, incarnation).
  node_id id_of(int node) const;
  /// Where a client node's actor hands the RPC calls served on its link
  /// (the same slot for every incarnation of the node).
  rpc_served_slot& served_slot(int node);

  void crash(int node);
  void restart(int node, bool wipe_storage);
  /// Changes each time the master may have lost state it held in memory
  /// only: it crashed, or threw away what it could not persist and
  /// reloaded its durable state. Never decreases.
  std::uint64_t master_epoch() const;
  /// Times the master restarted with a wiped disk: its durable state too
  /// is gone (MQ topics, offsets and groups start over).
  std::uint64_t master_wipes() const noexcept { return master_wipes_; }

  // --- faults -------------------------------------------------------------

  network& net() noexcept { return *network_; }
  sim_fault_sites& fault_sites() noexcept { return *faults_; }
  /// Ends partitions and clogs, stops frame-level faults and fault sites.
  void heal();

  rng& workload_rng() noexcept { return workload_rng_; }
  rng& fault_rng() noexcept { return fault_rng_; }
  trace& events() noexcept { return trace_; }
  /// An owner's fake GPU (null without world_config::gpu_devices). It
  /// outlives the owner's incarnations, as a device outlives a process.
  const gpu::fake_device* gpu_of(int node) const;
  /// Reads over the simulated rdma path that completed, and that failed.
  std::pair<std::uint64_t, std::uint64_t> rdma_reads() const noexcept;
  /// Repair copies the master made, and those that failed, over every
  /// incarnation of the master.
  std::pair<std::uint64_t, std::uint64_t> repair_copies() const noexcept {
    return {repair_copies_, repair_copies_failed_};
  }
  const world_config& config() const noexcept { return config_; }
  std::uint64_t steps() const noexcept { return steps_; }

 private:
  struct node;
  void start(int index);
  node_config config_for(node_kind kind) const;
  /// A pool for owner `n` (node `index`), registered with the rdma fabric.
  std::shared_ptr<object_store> pool_for(node& n, int index, std::uint64_t capacity_bytes);
  bool run_one_job();
  std::optional<sim_time> next_due() const;
  void advance_to(sim_time t);

  world_config config_;
  rng sched_rng_;
  rng net_rng_;
  rng fault_rng_;
  rng workload_rng_;
  rng identity_rng_;
  trace trace_;
  std::unique_ptr<network> network_;
  std::unique_ptr<rdma_fabric> rdma_;  // null: owners have no rdma path
  std::unique_ptr<sim_fault_sites> faults_;
  std::vector<std::unique_ptr<node>> nodes_;
  std::multimap<std::pair<sim_time, std::uint64_t>, std::function<void()>> timers_;
  std::uint64_t next_timer_ = 1;
  sim_time now_{};
  std::uint64_t steps_ = 0;
  std::uint64_t master_wipes_ = 0;
  std::uint64_t repair_copies_ = 0;
  std::uint64_t repair_copies_failed_ = 0;
};

}  // namespace sluice::sim
