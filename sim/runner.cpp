#include "sim/runner.hpp"

#include <chrono>
#include <tuple>
#include <optional>

#include <fmt/format.h>

#include "sim/mq_workload.hpp"
#include "sim/rpc_workload.hpp"
#include "sim/trace.hpp"
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
/// After the KV liveness check: every key put with two copies that no
/// crash pair could have lost must read back by then.
constexpr sim_duration durable_window = 10s;

sim_duration draw_gap(rng& random, sim_duration mean) {
  return sim_duration{static_cast<sim_duration::rep>(
      random.uniform(2 * static_cast<std::uint64_t>(mean.count()) + 1))};
}

sim_duration draw_between(rng& random, sim_duration lo, sim_duration hi) {
  return lo + sim_duration{static_cast<sim_duration::rep>(
                  random.uniform(static_cast<std::uint64_t>((hi - lo).count()) + 1))};
}

/// A fault the driver injected, for the relay check: a crash of node `a`
/// (until it came back), a pair fault between `a` and `b` (cut or not), or
/// a fault of no particular nodes (a partition, a clog, a link reset).
struct fault_record {
  enum class kind { crash, cut, pair, other } what = kind::other;
  int a = -1;
  int b = -1;
  sim_time from{};
  sim_time to{};
};

/// An owner the master marked down.
struct down_record {
  int node = -1;
  std::string why;
  sim_time at{};
};

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
    world_.crash(node);
    auto back = world_.now() + draw_between(world_.fault_rng(), 100ms, down_max);
    log_.push_back(fault_record{fault_record::kind::crash, node, -1, world_.now(), back});
    world_.at(back, [this, node, wipe, kind] {
      if (world_.alive(node)) return;
      world_.restart(node, wipe);
      // A master that lost its disk forgets from its restart on: owners
      // may go on committing under the leases the old one gave until then.
      if (kind == node_kind::master) checker_.master_crashed(world_.now(), wipe);
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
    log_.push_back(fault_record{kind == 0 ? fault_record::kind::cut : fault_record::kind::pair, a, b, world_.now(),
                                world_.now() + lasts});
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
    auto lasts = draw_between(random, 200ms, 5s);
    other(lasts);
    world_.at(world_.now() + lasts, [this, handle] { world_.net().heal(handle); });
  }

  /// A fault of no particular nodes that lasts `lasts`.
  void other(sim_duration lasts) {
    log_.push_back(fault_record{fault_record::kind::other, -1, -1, world_.now(), world_.now() + lasts});
  }

  const std::vector<fault_record>& log() const noexcept { return log_; }

 private:
  world& world_;
  checker& checker_;
  sim_time stop_;
  std::vector<fault_record> log_;
};

/// Before a down it judges, the relay check wants this long without a
/// fault of no particular nodes (heartbeat timeout, 3 s, and the time a
/// heartbeat takes to fail over, with room) ...
constexpr sim_duration relay_quiet = 6s;
/// ... and this long without a crash of the owner, the relay or the master
/// (registrations settle; the owner has learnt its relays).
constexpr sim_duration relay_settled = 15s;
/// Downs in a run's first moments are not judged: owners learn their
/// relays with their first heartbeats.
constexpr sim_duration relay_learnt = 2s;

bool overlaps(const fault_record& f, sim_time from, sim_time to) { return f.from <= to && f.to >= from; }

/// Whether `f` touches the path between nodes x and y.
bool on_path(const fault_record& f, int x, int y) {
  return (f.a == x && f.b == y) || (f.a == y && f.b == x);
}

/// The relay check: an owner the master marked down although, for the
/// whole time that decided it, another owner reached both it and the
/// master — only cuts of other paths were in the way, on a quick network
/// — breaks "an owner is down only when no path to it works". Judged in
/// runs whose plan allows it (no frame loss, fault sites or slow links);
/// returns the violations and counts the cuts it judged.
std::vector<std::string> relay_violations(world& w, const std::vector<fault_record>& faults,
                                          const std::vector<down_record>& downs, std::uint64_t& judged) {
  std::vector<std::string> out;
  auto& plan = w.config().faults;
  if (plan.drop_pm > 0 || plan.buggify || plan.latency_max + plan.jitter_max > 50ms) return out;
  int master = w.master_index();
  auto crashed = [&](int node, sim_time from, sim_time to) {
    for (auto& f : faults) {
      if (f.what == fault_record::kind::crash && f.a == node && overlaps(f, from, to)) return true;
    }
    return false;
  };
  auto went_down = [&](int node, sim_time from, sim_time to) {
    for (auto& d : downs) {
      if (d.node == node && d.at >= from && d.at <= to) return true;
    }
    return false;
  };
  auto impaired = [&](int x, int y, sim_time from, sim_time to) {
    for (auto& f : faults) {
      if ((f.what == fault_record::kind::cut || f.what == fault_record::kind::pair) && on_path(f, x, y) &&
          overlaps(f, from, to)) {
        return true;
      }
    }
    return false;
  };
  // Cuts between the master and an owner in a run the check judges.
  for (auto& f : faults) {
    if (f.what == fault_record::kind::cut && (f.a == master || f.b == master)) judged += 1;
  }
  for (auto& d : downs) {
    // Owners learn their relays from the master's first heartbeat answers.
    if (d.node < 0 || d.at - sim_time{} < relay_learnt) continue;
    auto quiet_from = d.at - relay_quiet;
    auto settled_from = d.at - relay_settled;
    bool noisy = false;
    for (auto& f : faults) {
      noisy |= (f.what == fault_record::kind::other || (f.what == fault_record::kind::pair)) && overlaps(f, quiet_from, d.at);
    }
    if (noisy || crashed(d.node, settled_from, d.at) || crashed(master, settled_from, d.at)) continue;
    for (int i = 0; i < w.config().owners; ++i) {
      int relay = w.owner_index(i);
      if (relay == d.node || crashed(relay, settled_from, d.at) || went_down(relay, settled_from, d.at)) continue;
      if (impaired(relay, d.node, quiet_from, d.at) || impaired(relay, master, quiet_from, d.at)) continue;
      std::string cuts;
      for (auto& f : faults) {
        if (f.what != fault_record::kind::cut || !overlaps(f, quiet_from, d.at)) continue;
        cuts += fmt::format("{}{}-{} {}..{}", cuts.empty() ? "" : ", ", w.name_of(f.a), w.name_of(f.b),
                            format_time(f.from), format_time(f.to));
      }
      out.push_back(fmt::format("relay: {} was marked down at {} ({}) although {} reached both it and the master "
                                "all along (cuts: {})",
                                w.name_of(d.node), format_time(d.at), d.why, w.name_of(relay), cuts));
      break;
    }
  }
  return out;
}

void schedule_faults(world& w, checker& c, fault_driver& d) {
  const auto& plan = w.config().faults;
  auto& random = w.fault_rng();
  d.every(plan.link_reset_every, [&w, &d] {
    w.net().reset_random_link();
    d.other(1s);  // its owners notice and dial again
  });
  d.every(plan.clog_every, [&w, &d, &random] {
    auto lasts = draw_between(random, 50ms, 2s);
    w.net().clog_random_link(lasts);
    d.other(lasts);
  });
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
  cfg.no_relays = options.no_relays;
  cfg.repair_after = options.repair_after;
  cfg.no_repair = options.no_repair;
  std::vector<down_record> downs;
  cfg.on_member_down = [&downs](int node, const std::string& why, sim_time at) {
    downs.push_back(down_record{node, why, at});
  };
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
    cfg.on_copy_evicted = [&check](const std::string& key, sim_time at) { check.copy_evicted(key, at); };
  }
  world w{cfg};
  kv_workload work{w, check, workload_options{.think = options.think}};
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
  work.check_durable(durable_window);
  std::uint64_t relay_cuts = 0;
  for (auto& v : relay_violations(w, driver.log(), downs, relay_cuts)) check.violation(v);
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
  report.durable_keys = work.durable_checked();
  report.relay_cuts = relay_cuts;
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
  if (o.repair_after != std::chrono::seconds{2}) {
    auto after_ms = std::chrono::duration_cast<std::chrono::milliseconds>(o.repair_after).count();
    rpc += after_ms % 1000 == 0 ? fmt::format(" --repair-after {}s", after_ms / 1000)
                                : fmt::format(" --repair-after {}ms", after_ms);
  }
  if (o.think != workload_options{}.think) {
    rpc += fmt::format(" --think {}us", std::chrono::duration_cast<std::chrono::microseconds>(o.think).count());
  }
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
