// Streams in the simulator: both ends run the client core's stream state
// machines with real dict items, and a planted bug in the serving one is
// caught by a sweep of seeds.

#include <doctest/doctest.h>

#include "runtime/log.hpp"
#include "sim/runner.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::sim::fault_level;
using sluice::sim::run_options;
using sluice::sim::run_seed;

constexpr std::uint64_t seeds = 10;

run_options streams(std::uint64_t seed, bool planted) {
  (void)sluice::configure_logging("off");
  run_options o;
  o.seed = seed;
  o.duration = 10s;
  o.faults = fault_level::swarm;
  o.rpc = true;
  o.rpc_stream_repeats_item = planted;
  return o;
}

}  // namespace

TEST_CASE("sim: a stream server that delivers an item twice after a credit race is caught by a sweep, and the same "
          "seeds pass without it") {
  std::uint64_t caught = 0;
  std::uint64_t items = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto clean = run_seed(streams(seed, false));
    CHECK_MESSAGE(clean.passed(), "seed " << seed << ": " << (clean.passed() ? "" : clean.violations.front()));
    items += clean.rpc_stream_items;
    auto broken = run_seed(streams(seed, true));
    if (!broken.passed()) {
      ++caught;
      if (caught == 1) MESSAGE("seed " << seed << " caught it: " << broken.violations.front());
    }
  }
  MESSAGE(caught << " of " << seeds << " seeds caught it; " << items << " stream items read without it");
  CHECK(items > 1000);
  CHECK(caught >= seeds / 2);
}
