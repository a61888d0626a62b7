// sluice sim: the deterministic simulator, from one seed or a sweep.

#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "api/cli/cli.hpp"
#include "runtime/log.hpp"
#include "sim/sim_log.hpp"
#include "runtime/units.hpp"
#include "sim/runner.hpp"

namespace sluice::cli {
namespace {

struct sim_flags {
  std::uint64_t seed = 1;
  std::string seeds;  // "A..B"
  int owners = 3;
  int clients = 4;
  std::string duration = "20s";
  std::string faults = "heavy";
  std::string capacity;  // each owner's pool: "" = 256 MiB
  std::string repair_after = "2s";
  std::string think = "50ms";  // mean pause between two KV operations of a client
  bool check_determinism = false;
  bool verbose = false;
  bool trace = false;
  bool rpc = false;  // the RPC workload too
  bool rdma = false;  // owners read each other over the simulated rdma path
  bool mq = false;    // the MQ workload too
};

struct seed_range {
  std::uint64_t first = 1;
  std::uint64_t last = 1;
};

result<seed_range> parse_seeds(const sim_flags& f) {
  if (f.seeds.empty()) return seed_range{f.seed, f.seed};
  auto dots = f.seeds.find("..");
  try {
    if (dots == std::string::npos) throw std::invalid_argument{"no .."};
    seed_range r{std::stoull(f.seeds.substr(0, dots)), std::stoull(f.seeds.substr(dots + 2))};
    if (r.last < r.first) throw std::invalid_argument{"empty"};
    return r;
  } catch (const std::exception&) {
    return fail(errc::invalid_argument, "--seeds takes a range A..B with A <= B, e.g. 1..100");
  }
}

const char* signal_name(int signal) { return signal == SIGINT ? "SIGINT" : "SIGTERM"; }

std::string summary(const sim::run_report& r) {
  auto& c = r.counts;
  auto rpc = r.rpc_calls == 0 ? std::string{}
                              : fmt::format(", {} rpc calls ({} refused overloaded), {} streams ({} items read)",
                                            r.rpc_calls, r.rpc_calls_refused, r.rpc_streams, r.rpc_stream_items);
  if (r.mq_produced + r.mq_delivered > 0) {
    rpc += fmt::format(", mq {} produced, {} delivered ({} redelivered), {} acked, at most {} payloads held",
                       r.mq_produced, r.mq_delivered, r.mq_redelivered, r.mq_acked, r.mq_payloads_peak);
  }
  if (r.rdma_reads + r.rdma_reads_failed > 0) {
    rpc += fmt::format(", rdma reads {} ok/{} failed", r.rdma_reads, r.rdma_reads_failed);
  }
  if (r.repair_copies + r.repair_copies_failed > 0) {
    rpc += fmt::format(", repair copies {} made/{} failed", r.repair_copies, r.repair_copies_failed);
  }
  if (r.durable_keys > 0) rpc += fmt::format(", {} two-copy keys read back at the end", r.durable_keys);
  if (r.relay_cuts > 0) rpc += fmt::format(", {} master-owner cuts judged by the relay check", r.relay_cuts);
  return fmt::format("{:.1f}s simulated in {:.2f}s ({:.0f}x), {} owners, {} clients, {} operations "
                     "(puts {} ok/{} failed, gets {} found/{} not found/{} failed, {} removes, {} evicted){}, "
                     "trace {:016x}",
                     r.simulated_s, r.real_s, r.real_s > 0 ? r.simulated_s / r.real_s : 0.0, r.owners,
                     r.clients, r.operations, c.puts_acked, c.puts_failed, c.gets_found,
                     c.gets_not_found, c.gets_failed, c.removes, c.forgotten, rpc, r.trace_hash);
}

sim::run_options options_for(const sim_flags& f, sim::sim_duration duration, sim::fault_level level,
                             std::uint64_t seed) {
  sim::run_options o;
  o.seed = seed;
  o.owners = f.owners;
  o.clients = f.clients;
  o.duration = duration;
  o.faults = level;
  o.keep_trace = f.trace;
  o.rpc = f.rpc;
  o.rdma = f.rdma;
  o.mq = f.mq;
  if (auto size = parse_size(f.capacity); !f.capacity.empty() && size) o.owner_capacity = *size;
  if (auto after = parse_duration(f.repair_after)) o.repair_after = *after;
  if (auto think = parse_duration(f.think)) o.think = *think;
  return o;
}

int run_determinism(const sim_flags& f, seed_range seeds, sim::sim_duration d, sim::fault_level level) {
  int failed = 0;
  for (auto seed = seeds.first; seed <= seeds.last; ++seed) {
    if (auto signal = take_stop_signal(); signal != 0) {
      std::cout << fmt::format("stopped by {} after {} of {} seeds: {} not deterministic", signal_name(signal),
                               seed - seeds.first, seeds.last - seeds.first + 1, failed)
                << std::endl;
      return 128 + signal;
    }
    auto options = options_for(f, d, level, seed);
    auto divergence = sim::check_determinism(options);
    if (divergence.empty()) {
      std::cout << "seed " << seed << ": deterministic (two runs, same trace)" << std::endl;
    } else {
      ++failed;
      std::cout << "seed " << seed << ": NOT deterministic: " << divergence << "\n  replay: "
                << sim::replay_command(options) << " --check-determinism" << std::endl;
    }
  }
  return failed == 0 ? exit_ok : exit_failed;
}

void print_failure(const sim::run_report& r, const sim::run_options& o) {
  std::cout << "seed " << r.seed << ": FAILED (" << summary(r) << ")\n";
  constexpr std::size_t shown_max = 10;
  for (std::size_t i = 0; i < r.violations.size() && i < shown_max; ++i) {
    std::cout << "  " << r.violations[i] << "\n";
  }
  if (r.violations.size() > shown_max) {
    std::cout << "  ... and " << r.violations.size() - shown_max << " more\n";
  }
  std::cout << "  faults: " << r.plan << "\n  replay: " << sim::replay_command(o) << std::endl;
}

/// A sweep's tally so far.
struct sweep_tally {
  std::uint64_t run = 0;
  std::vector<sim::run_options> failed;
  double simulated_s = 0;
  double real_s = 0;
  std::uint64_t rpc_calls = 0;
  std::uint64_t rpc_streams = 0;
  std::uint64_t rpc_stream_items = 0;
  std::uint64_t mq_produced = 0;
  std::uint64_t mq_delivered = 0;
  std::uint64_t mq_redelivered = 0;
  std::uint64_t mq_acked = 0;
  std::uint64_t repair_copies = 0;
  std::uint64_t repair_copies_failed = 0;
  std::uint64_t repair_seeds = 0;  ///< seeds in which repair made a copy
  std::uint64_t durable_keys = 0;
  std::uint64_t relay_cuts = 0;

  double speedup() const { return real_s > 0 ? simulated_s / real_s : 0.0; }
};

void print_progress(const sweep_tally& t, std::uint64_t total) {
  std::cout << fmt::format("[{}/{}] {} passed, {} failed, {:.0f}x real time", t.run, total,
                           t.run - t.failed.size(), t.failed.size(), t.speedup())
            << std::endl;
}

/// The closing lines of a sweep of several seeds: the count, the seeds
/// that failed and how to replay each.
void print_sweep_summary(const sweep_tally& t) {
  std::cout << fmt::format("{} seeds: {} passed, {} failed", t.run, t.run - t.failed.size(), t.failed.size());
  for (auto& o : t.failed) std::cout << " " << o.seed;
  std::cout << "\n";
  for (auto& o : t.failed) std::cout << "  replay: " << sim::replay_command(o) << "\n";
  std::cout << fmt::format("simulated {:.0f}s in {:.1f}s", t.simulated_s, t.real_s) << "\n";
  if (t.rpc_calls > 0) {
    std::cout << fmt::format("rpc: {} calls, {} streams, {} stream items read, in all", t.rpc_calls, t.rpc_streams,
                             t.rpc_stream_items)
              << "\n";
  }
  if (t.mq_produced + t.mq_delivered > 0) {
    std::cout << fmt::format("mq: {} messages produced, {} delivered ({} redelivered), {} acked, in all",
                             t.mq_produced, t.mq_delivered, t.mq_redelivered, t.mq_acked)
              << "\n";
  }
  if (t.repair_copies + t.repair_copies_failed > 0) {
    std::cout << fmt::format("repair: {} copies made ({} failed) in {} seeds", t.repair_copies,
                             t.repair_copies_failed, t.repair_seeds)
              << "\n";
  }
  if (t.durable_keys > 0) {
    std::cout << fmt::format("durability: {} keys put with two copies read back after the faults", t.durable_keys)
              << "\n";
  }
  if (t.relay_cuts > 0) {
    std::cout << fmt::format("relays: {} cuts between the master and an owner judged by the relay check",
                             t.relay_cuts)
              << "\n";
  }
}

void print_single(const sim_flags& f, const sim::run_report& report) {
  std::cout << "faults: " << report.plan << "\n";
  if (!report.fault_sites.empty()) std::cout << "fault sites fired: " << report.fault_sites << "\n";
  if (f.trace) {
    for (auto& e : report.events) std::cout << "  " << e.text << "\n";
  }
  if (report.passed()) std::cout << "seed " << report.seed << ": passed, " << summary(report) << std::endl;
}

/// Runs the seeds in order. SIGINT or SIGTERM stops the sweep after the
/// seed that is running: the summary covers the seeds run so far and the
/// exit code is 128 + the signal's number.
int run_sweep(const sim_flags& f, seed_range seeds, sim::sim_duration d, sim::fault_level level) {
  sweep_tally tally;
  auto total = seeds.last - seeds.first + 1;
  auto last_progress = std::chrono::steady_clock::now();
  int stopped_by = 0;
  for (auto seed = seeds.first; seed <= seeds.last; ++seed) {
    if ((stopped_by = take_stop_signal()) != 0) break;
    auto options = options_for(f, d, level, seed);
    auto report = sim::run_seed(options);
    ++tally.run;
    tally.simulated_s += report.simulated_s;
    tally.real_s += report.real_s;
    tally.rpc_calls += report.rpc_calls;
    tally.rpc_streams += report.rpc_streams;
    tally.rpc_stream_items += report.rpc_stream_items;
    tally.mq_produced += report.mq_produced;
    tally.mq_delivered += report.mq_delivered;
    tally.mq_redelivered += report.mq_redelivered;
    tally.mq_acked += report.mq_acked;
    tally.repair_copies += report.repair_copies;
    tally.repair_copies_failed += report.repair_copies_failed;
    tally.repair_seeds += report.repair_copies > 0 ? 1 : 0;
    tally.durable_keys += report.durable_keys;
    tally.relay_cuts += report.relay_cuts;
    if (total == 1) print_single(f, report);
    if (!report.passed()) {
      tally.failed.push_back(options);
      print_failure(report, options);
    }
    auto now = std::chrono::steady_clock::now();
    if (total > 1 && (now - last_progress > std::chrono::seconds{2} || seed == seeds.last)) {
      last_progress = now;
      print_progress(tally, total);
    }
  }
  if (stopped_by != 0) {
    std::cout << fmt::format("stopped by {} after {} of {} seeds", signal_name(stopped_by), tally.run, total)
              << std::endl;
  }
  if (total > 1) print_sweep_summary(tally);
  std::cout << fmt::format("figure sim_speedup {:.1f} ratio", tally.speedup()) << std::endl;
  if (stopped_by != 0) return 128 + stopped_by;
  return tally.failed.empty() ? exit_ok : exit_failed;
}

int run_sim(const sim_flags& f) {
  auto seeds = parse_seeds(f);
  auto duration = parse_duration(f.duration);
  auto level = sim::parse_fault_level(f.faults);
  for (const error* e : {seeds ? nullptr : &seeds.error(), duration ? nullptr : &duration.error(),
                         level ? nullptr : &level.error()}) {
    if (e != nullptr) {
      std::cerr << "sluice sim: " << e->message() << "\n";
      return exit_usage;
    }
  }
  (void)configure_logging(f.verbose ? "info" : "off");
  // Log lines carry the virtual time and the node, in the trace's order.
  if (f.verbose) set_log_sink(sim::make_log_sink());
  auto d = std::chrono::duration_cast<sim::sim_duration>(*duration);
  if (f.check_determinism) return run_determinism(f, *seeds, d, *level);
  return run_sweep(f, *seeds, d, *level);
}

}  // namespace

void add_sim_command(CLI::App& app, int& exit_code) {
  auto f = std::make_shared<sim_flags>();
  auto* cmd = app.add_subcommand("sim", "Run the whole cluster in this process on virtual time, with seeded faults");
  cmd->add_option("--seed", f->seed, "The root seed of the run")->capture_default_str();
  cmd->add_option("--seeds", f->seeds, "Sweep a range of seeds, A..B");
  cmd->add_option("--owners", f->owners, "Owners (swarm draws its own)")->capture_default_str()->check(CLI::Range(1, 64));
  cmd->add_option("--clients", f->clients, "Clients (swarm draws its own)")->capture_default_str()->check(CLI::Range(1, 128));
  cmd->add_option("--duration", f->duration, "Simulated time of the faulty phase, e.g. 60s")->capture_default_str();
  cmd->add_option("--faults", f->faults, "none, light, heavy, swarm or cuts")->capture_default_str();
  cmd->add_option("--capacity", f->capacity, "Each owner's pool, e.g. 256KiB: small pools make owners evict")
      ->check([](const std::string& text) {
        auto size = parse_size(text);
        return size && *size >= 4096 ? std::string{} : std::string{"a size of at least 4KiB, e.g. 256KiB"};
      });
  cmd->add_option("--repair-after", f->repair_after,
                  "The master's repair_after: copies on an owner down this long are made again elsewhere")
      ->capture_default_str()
      ->check([](const std::string& text) {
        return parse_duration(text) ? std::string{} : std::string{"a duration, e.g. 2s or 1h"};
      });
  cmd->add_option("--think", f->think,
                  "Mean pause between two KV operations of one client: shorter, a denser workload (100us to 10s)")
      ->capture_default_str()
      ->check([](const std::string& text) {
        auto d = parse_duration(text);
        return d && *d >= std::chrono::microseconds{100} && *d <= std::chrono::seconds{10}
                   ? std::string{}
                   : std::string{"a duration from 100us to 10s, e.g. 5ms"};
      });
  cmd->add_flag("--check-determinism", f->check_determinism, "Run each seed twice and compare the traces");
  cmd->add_flag("--rpc", f->rpc, "Clients also serve names and call each other, every call judged");
  cmd->add_flag("--mq", f->mq, "Clients also produce to MQ topics and consume them in two groups, every delivery judged");
  cmd->add_flag("--rdma", f->rdma, "Owners read each other's values over the simulated rdma path, with its own faults");
  cmd->add_flag("--verbose", f->verbose, "Show the nodes' logs");
  cmd->add_flag("--trace", f->trace, "Print every trace event (single seed)");
  cmd->callback([f, &exit_code] { exit_code = run_sim(*f); });
}

}  // namespace sluice::cli
