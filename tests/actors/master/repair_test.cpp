// The repair queue's decisions: which key is copied next, how many at
// once, how many bytes per second, and what happens to keys that fail.

#include <doctest/doctest.h>

#include "actors/master/repair.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::master::repair_limits;
using sluice::master::repair_queue;

const sluice::clock_time t0{};

}  // namespace

TEST_CASE("repair queue: the keys with the fewest live copies go first, then in key order") {
  repair_queue q{repair_limits{16, 1ULL << 40}};
  q.want("b", 2);
  q.want("c", 1);
  q.want("a", 2);
  q.want("d", 1);
  q.want("a", 1);  // a lost one more: it moves up
  CHECK(q.queued() == 4);
  std::vector<std::string> order;
  while (auto key = q.next(t0)) {
    q.started(*key, 1);
    order.push_back(*key);
  }
  CHECK(order == std::vector<std::string>{"a", "c", "d", "b"});
  CHECK(q.in_flight_count() == 4);
  CHECK(q.under_replicated() == 4);
  // A key in flight is not queued again while its copy is made.
  q.want("a", 1);
  CHECK(q.queued() == 0);
  q.finished("a", true, 1, t0);
  CHECK(q.copies_made() == 1);
  CHECK(q.bytes_copied() == 1);
  CHECK(q.under_replicated() == 3);
}

TEST_CASE("repair queue: no more copies in flight than the concurrency limit") {
  repair_queue q{repair_limits{2, 1ULL << 40}};
  for (auto key : {"a", "b", "c"}) q.want(key, 1);
  auto first = q.next(t0);
  REQUIRE(first);
  q.started(*first, 10);
  auto second = q.next(t0);
  REQUIRE(second);
  q.started(*second, 10);
  CHECK_FALSE(q.next(t0));
  CHECK(q.queued() == 1);
  q.finished(*first, true, 10, t0);
  auto third = q.next(t0);
  REQUIRE(third);
  CHECK(*third == "c");
}

TEST_CASE("repair queue: copies start only while the byte budget lasts, and it refills at the rate") {
  // 1000 bytes per second: one second's worth to start with.
  repair_queue q{repair_limits{64, 1000}};
  for (auto key : {"a", "b", "c", "d"}) q.want(key, 1);
  auto a = q.next(t0);
  REQUIRE(a);
  q.started(*a, 600);
  auto b = q.next(t0);
  REQUIRE(b);  // 400 left: a copy may start and run the budget below 0
  q.started(*b, 600);
  CHECK_FALSE(q.next(t0));        // -200
  CHECK_FALSE(q.next(t0 + 200ms));  // back to 0: still nothing
  auto c = q.next(t0 + 300ms);      // +100
  REQUIRE(c);
  q.started(*c, 2000);  // larger than a second's worth: it starts, and is paid back later
  CHECK_FALSE(q.next(t0 + 2s));     // -1900 + 1700 = -200
  CHECK(q.next(t0 + 3s).has_value());  // +1000: room again
}

TEST_CASE("repair queue: a failed copy counts as failed and comes back when its retry time comes") {
  repair_queue q{repair_limits{4, 1ULL << 40}};
  q.want("k", 1);
  auto k = q.next(t0);
  REQUIRE(k);
  q.started(*k, 5);
  q.finished(*k, false, 5, t0 + 2s);
  CHECK(q.copies_failed() == 1);
  CHECK(q.copies_made() == 0);
  CHECK(q.under_replicated() == 1);  // deferred, still short
  CHECK_FALSE(q.next(t0 + 1s));
  CHECK(q.due(t0 + 1s).empty());
  CHECK(q.due(t0 + 2s) == std::vector<std::string>{"k"});
  CHECK(q.under_replicated() == 0);  // the caller looks at it again (want or drop)
  // A key with nowhere to go waits the same way.
  q.want("j", 1);
  auto j = q.next(t0 + 2s);
  REQUIRE(j);
  q.defer(*j, t0 + 4s);
  CHECK(q.under_replicated() == 1);
  q.want("j", 1);  // counted again meanwhile: queued at once
  CHECK(q.queued() == 1);
  CHECK(q.due(t0 + 4s).empty());
}

TEST_CASE("repair queue: a key with no live copy is stranded, apart from the keys a copy can help") {
  repair_queue q;
  q.want("a", 1);
  q.stranded("b");
  CHECK(q.stranded_count() == 1);
  CHECK(q.under_replicated() == 1);
  // A holder of b came back.
  q.want("b", 1);
  CHECK(q.stranded_count() == 0);
  CHECK(q.queued() == 2);
  q.drop("a");
  q.drop("b");
  CHECK(q.queued() == 0);
  q.want("c", 1);
  q.stranded("d");
  q.clear();
  CHECK(q.under_replicated() == 0);
  CHECK(q.stranded_count() == 0);
}
