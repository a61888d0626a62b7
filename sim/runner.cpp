#include "sim/runner.hpp"

#include <chrono>
#include <tuple>
#include <optional>

#include <fmt/format.h>

#include "sim/mq_workload.hpp"
#include "sim/rpc_workload.hpp"
#include "sim/workload.hpp"

namespace sluice::sim {
namespace {

/// Faults stop this long before the workload does, so the last
/// operations run on a cluster that is settling.
constexpr sim_duration liveness_settle = 5s;
constexpr sim_duration liveness_window = 30s;
/// After the KV liveness check: calls to every served name get through.
constexpr sim_duration rpc_liveness_window = 10s;
/// After those: the members drain what is left, then every acknowledged
/// message must have reached every group (they drained all along since
/// the faults healed; this is the last stretch).
constexpr sim_duration mq_drain_window = 5s;

sim_duration draw_gap(rng& random, sim_duration mean) {
  return sim_duration{static_cast<sim_duration::rep>(
      random.uniform(2 * static_cast<std::uint64_t>(mean.count()) + 1))};
}

sim_duration draw_between(rng& random, sim_duration lo, sim_duration hi) {
  return lo + sim_duration{static_cast<sim_duration::rep>(
                  random.uniform(static_cast<std::uint64_t>((hi - lo).count()) + 1))};
}

/// Schedules faults of one kind at random gaps until `stop`.
class fault_driver {
 public:
  fault_driver(world& w, checker& c, sim_time stop) : world_(w), checker_(c), stop_(stop) {}

  void every(sim_duration mean, std::function<void()> action) {
    if (mean.count() == 0) return;
    auto when = world_.now() + draw_gap(world_.fault_rng(), mean);
    if (when >= stop_) return;
    world_.at(when, [this, mean, action] {
      action();
      every(mean, action);
    });
  }

  void crash_and_restart(int node, sim_duration down_max) {
    if (!world_.alive(node)) return;
    auto kind = world_.kind_of(node);
    auto wipe = world_.fault_rng().chance(world_.config().faults.wipe_on_restart_pm, 1000);
    if (kind == node_kind::owner) checker_.owner_crashed(world_.now());
    if (kind == node_kind::master) checker_.master_crashed(world_.now(), wipe);
    world_.crash(node);
    auto back = world_.now() + draw_between(world_.fault_rng(), 100ms, down_max);
    world_.at(back, [this, node, wipe] {
      if (!world_.alive(node)) world_.restart(node, wipe);
    });
  }

  /// Two distinct nodes among the master and the owners: the paths that
  /// relays and fallbacks exist for.
  std::pair<int, int> random_pair() {
    auto& random = world_.fault_rng();
    auto span = static_cast<std::uint64_t>(world_.config().owners + 1);
    int a = static_cast<int>(random.uniform(span));
    int b = static_cast<int>((static_cast<std::uint64_t>(a) + 1 + random.uniform(span - 1)) % span);
    return {a, b};  // node indices: 0 is the master, 1.. the owners
  }

  /// kind 0: cut the pair's path; 1: slow it down; 2: make it lose packets.
  void pair_fault(int kind) {
    auto [a, b] = random_pair();
    auto& random = world_.fault_rng();
    auto& net = world_.net();
    auto lasts = draw_between(random, 200ms, 4s);
    if (kind == 0) {
      auto handle = net.cut_pair(a, b);
      world_.at(world_.now() + lasts, [this, handle] { world_.net().heal(handle); });
      return;
    }
    auto handle = kind == 1 ? net.slow_pair(a, b, draw_between(random, 5ms, 400ms))
                            : net.lossy_pair(a, b, static_cast<std::uint32_t>(10 + random.uniform(290)));
    world_.at(world_.now() + lasts, [this, handle] { world_.net().heal_pair(handle); });
  }

  void partition() {
    std::set<int> side;
    auto& random = world_.fault_rng();
    for (int i = 0; i < world_.node_count(); ++i) {
      if (random.chance(1, 3)) side.insert(i);
    }
    if (side.empty() || static_cast<int>(side.size()) == world_.node_count()) return;
    auto handle = world_.net().partition(side, random.chance(2, 3));
    world_.at(world_.now() + draw_between(random, 200ms, 5s), [this, handle] { world_.net().heal(handle); });
  }

 private:
  world& world_;
  checker& checker_;
  sim_time stop_;
};

void schedule_faults(world& w, checker& c, fault_driver& d) {
  const auto& plan = w.config().faults;
  auto& random = w.fault_rng();
  d.every(plan.link_reset_every, [&w] { w.net().reset_random_link(); });
  d.every(plan.clog_every, [&w, &random] { w.net().clog_random_link(draw_between(random, 50ms, 2s)); });
  d.every(plan.partition_every, [&d] { d.partition(); });
  d.every(plan.owner_crash_every, [&w, &d, &random] {
    d.crash_and_restart(w.owner_index(static_cast<int>(random.uniform(static_cast<std::uint64_t>(w.config().owners)))), 5s);
  });
  d.every(plan.client_crash_every, [&w, &d, &random] {
    d.crash_and_restart(w.client_index(static_cast<int>(random.uniform(static_cast<std::uint64_t>(w.config().clients)))), 5s);
  });
  d.every(plan.master_crash_every, [&w, &d] { d.crash_and_restart(w.master_index(), 3s); });
  d.every(plan.pair_cut_every, [&d] { d.pair_fault(0); });
  d.every(plan.pair_slow_every, [&d] { d.pair_fault(1); });
  d.every(plan.pair_loss_every, [&d] { d.pair_fault(2); });
  (void)c;
}

std::string fired_sites(const sim_fault_sites& sites) {
  std::string out;
  for (auto& [site, state] : sites.sites()) {
    if (state.fired == 0) continue;
    auto slash = site.rfind('/');
    if (!out.empty()) out += ", ";
    out += fmt::format("{}×{}", slash == std::string::npos ? site : site.substr(slash + 1), state.fired);
  }
  return out;
}

}  // namespace

run_report run_seed(const run_options& options) {
  auto wall_start = std::chrono::steady_clock::now();
  rng shape{mix_seed(options.seed) ^ 0x5a5a};
  world_config cfg;
  cfg.seed = options.seed;
  cfg.owners = options.owners;
  cfg.clients = options.clients;
  cfg.faults = fault_plan::make(options.faults, shape);
  cfg.keep_trace = options.keep_trace;
  cfg.make_store = options.make_store;
  cfg.master_forgets = options.master_forgets;
  cfg.owner_capacity = options.owner_capacity;
  cfg.rpc_relay_misroutes = options.rpc_relay_misroutes;
  cfg.rdma = options.rdma;
  cfg.mq_forgets_acks = options.mq_forgets_acks;
  cfg.mq_leaks_payloads = options.mq_leaks_payloads;
  // With faults, one read in fifty fails: enough that every run demotes
  // rdma paths and falls back to tcp many times.
  if (options.faults != fault_level::none) cfg.rdma_fail_pm = 20;
  if (options.faults == fault_level::swarm) {
    // Swarm: each seed also draws the cluster's shape.
    cfg.owners = 1 + static_cast<int>(shape.uniform(8));
    cfg.clients = 1 + static_cast<int>(shape.uniform(16));
    cfg.placement = shape.chance(1, 2) ? placement_policy::random : placement_policy::local_first;
    // A third of the swarm runs with pools so small that owners evict.
    if (cfg.owner_capacity == 0 && shape.chance(1, 3)) cfg.owner_capacity = 256 << 10;
  }
  // Owners report the puts they commit themselves at once or up to 100ms
  // later: a reader that does not wait for those reports reads stale values.
  constexpr std::chrono::microseconds report_delays[] = {0us, 2ms, 20ms, 100ms};
  cfg.commit_report_delay = report_delays[shape.uniform(std::size(report_delays))];

  checker check;
  if (!options.hide_evictions) {
    // MQ payloads are freed by the master once consumed: not the KV
    // workload's keys, and no eviction.
    cfg.on_forgotten = [&check](const std::string& key, sim_time at) {
      if (!key.starts_with("~mq/")) check.forgotten(key, at);
    };
  }
  world w{cfg};
  kv_workload work{w, check};
  std::optional<rpc_workload> rpc;
  if (options.rpc) rpc.emplace(w, check, rpc_workload_options{.stream_repeats_item = options.rpc_stream_repeats_item});
  std::optional<mq_workload> mq;
  if (options.mq) mq.emplace(w, check);
  fault_driver driver{w, check, w.now() + options.duration};
  schedule_faults(w, check, driver);
  if (rpc) rpc->start(w.now() + options.duration);
  if (mq) mq->start(w.now() + options.duration);
  work.run_until(w.now() + options.duration);
  auto stuck = work.check_liveness(liveness_settle, liveness_window);
  for (int c : stuck) {
    check.violation(fmt::format("liveness: client-{} could not put and get a key within {:.0f}s "
                                "after the faults healed",
                                c, seconds(liveness_window)));
  }
  if (rpc) {
    rpc->check_liveness(rpc_liveness_window);
    rpc->check_answered();
  }
  if (mq) mq->check_drained(mq_drain_window);

  run_report report;
  report.seed = options.seed;
  report.owners = cfg.owners;
  report.clients = cfg.clients;
  report.placement = cfg.placement;
  report.plan = cfg.faults.describe();
  report.violations = check.violations();
  report.trace_hash = w.events().hash();
  report.trace_events = w.events().count();
  report.steps = w.steps();
  report.operations = work.operations();
  report.rpc_calls = rpc ? rpc->calls() : 0;
  report.rpc_calls_refused = rpc ? rpc->calls_refused() : 0;
  report.rpc_streams = rpc ? rpc->streams() : 0;
  report.rpc_stream_items = rpc ? rpc->stream_items() : 0;
  std::tie(report.rdma_reads, report.rdma_reads_failed) = w.rdma_reads();
  std::tie(report.repair_copies, report.repair_copies_failed) = w.repair_copies();
  if (mq) {
    auto& m = mq->stats();
    report.mq_produced = m.produced;
    report.mq_delivered = m.delivered;
    report.mq_redelivered = m.redelivered;
    report.mq_acked = m.acked;
    report.mq_payloads_peak = m.payloads_peak;
    report.mq_acked_upto = m.acked_upto;
    report.mq_refused_full = m.refused_full;
    report.mq_seeks = m.seeks;
    report.mq_replayed = m.replayed;
  }
  report.counts = check.stats();
  report.simulated_s = seconds(w.now().time_since_epoch());
  report.events = w.events().events();
  report.fault_sites = fired_sites(w.fault_sites());
  report.real_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
  return report;
}

std::string replay_command(const run_options& o) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(o.duration).count();
  std::string duration = ms % 1000 == 0 ? fmt::format("{}s", ms / 1000) : fmt::format("{}ms", ms);
  auto rpc = std::string{o.rpc ? " --rpc" : ""} + (o.rdma ? " --rdma" : "") + (o.mq ? " --mq" : "");
  // Swarm draws the cluster's shape from the seed: no shape flags then.
  if (o.faults == fault_level::swarm) {
    return fmt::format("sluice sim --seed {} --duration {} --faults swarm{}", o.seed, duration, rpc);
  }
  return fmt::format("sluice sim --seed {} --owners {} --clients {} --duration {} --faults {}{}", o.seed,
                     o.owners, o.clients, duration, to_string(o.faults), rpc);
}

std::string check_determinism(run_options options) {
  options.keep_trace = true;
  auto first = run_seed(options);
  auto second = run_seed(options);
  auto& a = first.events;
  auto& b = second.events;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (a[i].hash_after == b[i].hash_after) continue;
    return fmt::format("the runs diverge at event {}:\n  first:  {}\n  second: {}", i, a[i].text, b[i].text);
  }
  if (a.size() != b.size()) {
    return fmt::format("the runs agree for {} events, then one has {} and the other {}",
                       std::min(a.size(), b.size()), a.size(), b.size());
  }
  if (first.trace_hash != second.trace_hash) return "the trace hashes differ";
  return {};
}

}  // namespace sluice::sim
