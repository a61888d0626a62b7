// MQ in the simulator: producers and two consumer groups over the real
// actors under heavy faults, every delivery judged (sim/mq_checker.hpp),
// and planted bugs in the master (forgotten acks, leaked payloads) caught
// by sweeps of seeds.

#include <doctest/doctest.h>

#include "runtime/log.hpp"
#include "sim/runner.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::sim::check_determinism;
using sluice::sim::fault_level;
using sluice::sim::run_options;
using sluice::sim::run_seed;

run_options mq_run(std::uint64_t seed, bool planted = false, bool leaks = false) {
  (void)sluice::configure_logging("off");
  run_options o;
  o.seed = seed;
  o.duration = 5s;
  o.faults = fault_level::heavy;
  o.mq = true;
  o.mq_forgets_acks = planted;
  o.mq_leaks_payloads = leaks;
  return o;
}

}  // namespace

TEST_CASE("sim: 20 heavy seeds pass with producers and consumer groups, and messages are delivered, redelivered "
          "and acked") {
  constexpr std::uint64_t seeds = 20;
  std::uint64_t produced = 0, delivered = 0, redelivered = 0, acked = 0, acked_upto = 0, refused_full = 0,
                seeks = 0, replayed = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto r = run_seed(mq_run(seed));
    CHECK_MESSAGE(r.passed(), "seed " << seed << ": " << (r.passed() ? "" : r.violations.front()));
    produced += r.mq_produced;
    delivered += r.mq_delivered;
    redelivered += r.mq_redelivered;
    acked += r.mq_acked;
    acked_upto += r.mq_acked_upto;
    refused_full += r.mq_refused_full;
    seeks += r.mq_seeks;
    replayed += r.mq_replayed;
  }
  MESSAGE(produced << " produced, " << delivered << " delivered (" << redelivered << " redelivered), " << acked
                   << " acked over " << seeds << " seeds");
  CHECK(produced > 20 * seeds);
  CHECK(redelivered > 0);
  CHECK(acked >= produced);
  MESSAGE(acked_upto << " ack_upto calls confirmed, " << refused_full << " produces refused by a full topic");
  CHECK(acked_upto > 0);
  CHECK(refused_full > 0);
  MESSAGE(seeks << " seeks confirmed, " << replayed << " acked messages delivered again after them");
  CHECK(seeks > 0);
  CHECK(replayed > 0);
}

TEST_CASE("sim: runs with the MQ workload replay identically") {
  for (std::uint64_t seed : {3, 4}) {
    auto divergence = check_determinism(mq_run(seed));
    CHECK_MESSAGE(divergence.empty(), "seed " << seed << ": " << divergence);
  }
}

TEST_CASE("sim: a master that forgets acks when a partition moves is caught by a sweep, and the same seeds pass "
          "without it") {
  // The same 20 seeds pass without the bug (the test above); with it a
  // quarter of them must see an acked message come back.
  constexpr std::uint64_t seeds = 20;
  std::uint64_t caught = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto broken = run_seed(mq_run(seed, true));
    if (broken.passed()) continue;
    ++caught;
    if (caught == 1) MESSAGE("seed " << seed << " caught it: " << broken.violations.front());
  }
  MESSAGE(caught << " of " << seeds << " seeds caught it");
  CHECK(caught >= seeds / 4);
}

TEST_CASE("sim: a master that never frees consumed payloads is caught by the memory check") {
  // The same seeds pass without the leak (the first test): every payload
  // a shell no longer names is freed by the end of the run.
  constexpr std::uint64_t seeds = 5;
  std::uint64_t caught = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto broken = run_seed(mq_run(seed, false, true));
    if (broken.passed()) continue;
    ++caught;
    if (caught == 1) MESSAGE("seed " << seed << " caught it: " << broken.violations.front());
  }
  MESSAGE(caught << " of " << seeds << " seeds caught it");
  CHECK(caught == seeds);
}
