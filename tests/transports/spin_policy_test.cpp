// spin_policy: a waiter spins only while spinning pays.

#include <doctest/doctest.h>

#include <chrono>
#include <vector>

#include "transports/shm/spin_policy.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::transport::shm::spin_policy;

}  // namespace

TEST_CASE("spin policy: spins that pay keep the full budget") {
  spin_policy p{30us};
  for (int i = 0; i < 100; ++i) {
    CHECK(p.next_budget() == 30us);
    p.paid();
  }
}

TEST_CASE("spin policy: spins that run out shrink the budget to none within a few waits") {
  spin_policy p{32us};
  std::vector<std::chrono::nanoseconds> budgets;
  for (int i = 0; i < 6; ++i) {
    budgets.push_back(p.next_budget());
    p.wasted();
  }
  CHECK(budgets[0] == 32us);
  CHECK(budgets[1] == 16us);
  CHECK(budgets[4] == 2us);
  CHECK(budgets[5] == 0us);
  // At budget 0 only one wait in probe_every spins, and it spins in full.
  int spins = 0;
  for (std::uint32_t i = 0; i < 10 * spin_policy::probe_every; ++i) {
    auto b = p.next_budget();
    if (b.count() > 0) {
      CHECK(b == 32us);
      ++spins;
      p.wasted();
    }
  }
  CHECK(spins == 10);
}

TEST_CASE("spin policy: a probe that pays brings spinning back") {
  spin_policy p{32us};
  for (int i = 0; i < 8; ++i) p.wasted();
  CHECK(p.budget() == 0us);
  std::chrono::nanoseconds b{0};
  while ((b = p.next_budget()).count() == 0) {
  }
  p.paid();
  CHECK(p.budget() == 8us);
  CHECK(p.next_budget() == 8us);
  p.paid();
  p.paid();
  CHECK(p.next_budget() == 32us);
}

TEST_CASE("spin policy: a long gap between two looks at the clock counts as preempted") {
  CHECK_FALSE(spin_policy::preempted(2us));
  CHECK(spin_policy::preempted(3ms));
}

TEST_CASE("spin policy: a budget of none never spins") {
  spin_policy p{0us};
  for (int i = 0; i < 100; ++i) CHECK(p.next_budget() == 0us);
}
