// spin_policy and yield_policy: a waiter spins, and yields its core,
// only while that pays.

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "transports/shm/spin_policy.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::transport::shm::spin_policy;
using sluice::transport::shm::yield_policy;

/// Waits that all run out, until the budget is 0.
void waste_until_none(spin_policy& p) {
  for (int i = 0; i < 1000 && p.budget().count() > 0; ++i) {
    (void)p.next_budget();
    p.wasted();
  }
}

/// How many of `waits` waits would spin (probes, at budget 0); each probe runs out.
int probes_in(spin_policy& p, std::uint32_t waits) {
  int spins = 0;
  for (std::uint32_t i = 0; i < waits; ++i) {
    auto b = p.next_budget();
    if (b.count() > 0) {
      CHECK(b == p.max());
      ++spins;
      p.wasted();
    }
  }
  return spins;
}

}  // namespace

TEST_CASE("spin policy: spins that pay keep the full budget") {
  spin_policy p{30us};
  for (int i = 0; i < 100; ++i) {
    CHECK(p.next_budget() == 30us);
    p.paid();
  }
}

TEST_CASE("spin policy: a miss now and then keeps the budget, misses in a row shrink it to none") {
  spin_policy p{32us};
  for (int i = 0; i < 100; ++i) {
    (void)p.next_budget();
    if (i % spin_policy::misses_to_shrink == 0) {
      p.wasted();
    } else {
      p.paid();
    }
  }
  CHECK(p.budget() == 32us);
  std::vector<std::chrono::nanoseconds> budgets;
  for (int i = 0; i < 6; ++i) {
    budgets.push_back(p.budget());
    for (std::uint32_t m = 0; m < spin_policy::misses_to_shrink; ++m) {
      (void)p.next_budget();
      p.wasted();
    }
  }
  CHECK(budgets == std::vector<std::chrono::nanoseconds>{32us, 16us, 8us, 4us, 2us, 0us});
}

TEST_CASE("spin policy: a spin that was preempted shrinks the budget at once") {
  spin_policy p{32us};
  (void)p.next_budget();
  p.wasted(true);
  CHECK(p.budget() == 16us);
}

TEST_CASE("spin policy: at budget none it probes now and then, further apart after each probe that fails") {
  spin_policy p{32us};
  waste_until_none(p);
  CHECK(p.budget() == 0us);
  // The first probe comes within probe_every_min waits, the next within
  // twice that, and so on.
  CHECK(probes_in(p, spin_policy::probe_every_min) == 1);
  CHECK(probes_in(p, 2 * spin_policy::probe_every_min) == 1);
  CHECK(probes_in(p, 4 * spin_policy::probe_every_min) == 1);
  // Never further apart than probe_every_max.
  CHECK(probes_in(p, 4 * spin_policy::probe_every_max) >= 2);
}

TEST_CASE("spin policy: a probe that pays brings spinning back") {
  spin_policy p{32us};
  waste_until_none(p);
  std::chrono::nanoseconds b{0};
  for (int i = 0; i < 1000 && (b = p.next_budget()).count() == 0; ++i) {
  }
  CHECK(b == 32us);
  p.paid();
  CHECK(p.budget() == 8us);
  CHECK(p.next_budget() == 8us);
  p.paid();
  p.paid();
  CHECK(p.next_budget() == 32us);
}

TEST_CASE("spin policy: a wait that slept but whose answer came within a spin brings the probes back close") {
  spin_policy p{32us};
  waste_until_none(p);
  // A long phase of slow answers spaces the probes far apart...
  (void)probes_in(p, 8 * spin_policy::probe_every_max);
  while (probes_in(p, 1) == 0) {
  }
  CHECK(probes_in(p, 16 * spin_policy::probe_every_min) == 0);
  // ...until a wait that slept sees an answer a spin would have caught.
  p.would_have_paid();
  CHECK(p.budget() == 0us);  // it does not spin at once
  CHECK(probes_in(p, spin_policy::probe_every_min) == 1);
}

TEST_CASE("spin policy: only a long gap between two looks at the clock counts as preempted") {
  CHECK_FALSE(spin_policy::preempted(2us));
  CHECK_FALSE(spin_policy::preempted(100us));
  CHECK(spin_policy::preempted(3ms));
}

TEST_CASE("spin policy: a budget of none never spins") {
  spin_policy p{0us};
  for (int i = 0; i < 100; ++i) CHECK(p.next_budget() == 0us);
}

TEST_CASE("yield policy: a yield that hands the core away for a time slice stops yielding, and probes come further apart") {
  yield_policy y;
  CHECK(y.allowed());
  y.yielded(20us);
  CHECK(y.on());
  y.yielded(4ms);
  CHECK_FALSE(y.on());
  auto yields_in = [&y](std::uint32_t chances) {
    int n = 0;
    for (std::uint32_t i = 0; i < chances; ++i) {
      if (y.allowed()) {
        ++n;
        y.yielded(4ms);
      }
    }
    return n;
  };
  CHECK(yields_in(yield_policy::probe_every_min) == 1);
  CHECK(yields_in(2 * yield_policy::probe_every_min) == 1);
  // A probe that pays turns yielding back on.
  while (!y.allowed()) {
  }
  y.yielded(10us);
  CHECK(y.on());
  CHECK(y.allowed());
}
