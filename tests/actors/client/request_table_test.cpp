// The request table every caller keeps (endpoint, RPC channel, direct
// shm call): ids, deadlines, completion once, the bound.

#include <doctest/doctest.h>

#include <chrono>
#include <map>
#include <string>

#include "actors/client/request_table.hpp"
#include "runtime/rng.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::request_table;
using sluice::request_time;

const request_time t0{};

}  // namespace

TEST_CASE("request table: ids grow from 1 and each request finishes once") {
  request_table<std::string> table{8};
  auto a = table.open(t0 + 1s, "a");
  auto b = table.open(t0 + 1s, "b");
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == 1);
  CHECK(*b == 2);
  REQUIRE(table.find(*b) != nullptr);
  CHECK(*table.find(*b) == "b");
  auto closed = table.close(*a);
  REQUIRE(closed.has_value());
  CHECK(*closed == "a");
  // A second answer to the same request, or a late one, finds nothing.
  CHECK_FALSE(table.close(*a).has_value());
  CHECK(table.find(*a) == nullptr);
  CHECK(table.size() == 1);
  // Ids are never handed out twice, not even after a request finished.
  auto c = table.open(t0 + 1s, "c");
  REQUIRE(c.ok());
  CHECK(*c == 3);
}

TEST_CASE("request table: beyond its bound a request is refused with overloaded and nothing changes") {
  request_table<int> table{2};
  REQUIRE(table.open(t0 + 1s, 1).ok());
  REQUIRE(table.open(t0 + 2s, 2).ok());
  CHECK(table.full());
  auto refused = table.open(t0 + 3s, 3);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.code() == sluice::errc::overloaded);
  CHECK(table.size() == 2);
  CHECK(*table.next_deadline() == t0 + 1s);
  // Once one finishes there is room again.
  CHECK(table.close(1).has_value());
  CHECK_FALSE(table.full());
  CHECK(table.open(t0 + 3s, 3).ok());
}

TEST_CASE("request table: requests expire in the order of their deadlines, not of their ids") {
  request_table<int> table{8};
  auto late = *table.open(t0 + 30ms, 0);
  auto early = *table.open(t0 + 10ms, 0);
  auto middle = *table.open(t0 + 20ms, 0);
  CHECK_FALSE(table.first_expired(t0 + 9ms).has_value());
  CHECK(*table.next_deadline() == t0 + 10ms);
  std::vector<std::uint64_t> expired;
  while (auto id = table.first_expired(t0 + 25ms)) {
    expired.push_back(*id);
    table.close(*id);
  }
  CHECK(expired == std::vector<std::uint64_t>{early, middle});
  CHECK(*table.next_deadline() == t0 + 30ms);
  table.close(late);
  CHECK_FALSE(table.next_deadline().has_value());
  CHECK(table.empty());
}

TEST_CASE("request table: the requests of one link are found by their entries, in id order") {
  struct entry {
    int link;
  };
  request_table<entry> table{16};
  for (int i = 0; i < 10; ++i) REQUIRE(table.open(t0 + std::chrono::milliseconds{10 - i}, entry{i % 3}).ok());
  auto on_one = table.ids_where([](const entry& e) { return e.link == 1; });
  CHECK(on_one == std::vector<std::uint64_t>{2, 5, 8});
}

TEST_CASE("request table: random opens, answers and sweeps agree with a plain model") {
  request_table<std::uint64_t> table{16};
  std::map<std::uint64_t, request_time> model;  // id -> deadline
  sluice::rng random{7};
  request_time now = t0;
  std::uint64_t refused = 0;
  for (int step = 0; step < 20000; ++step) {
    auto what = random.uniform(4);
    if (what < 2) {
      auto deadline = now + std::chrono::microseconds{1 + random.uniform(5000)};
      auto id = table.open(deadline, 0);
      if (model.size() >= 16) {
        CHECK_FALSE(id.ok());
        ++refused;
      } else {
        REQUIRE(id.ok());
        CHECK(model.count(*id) == 0);
        model[*id] = deadline;
      }
    } else if (what == 2 && !model.empty()) {
      auto it = std::next(model.begin(), static_cast<long>(random.uniform(model.size())));
      CHECK(table.close(it->first).has_value());
      model.erase(it);
    } else {
      now += std::chrono::microseconds{random.uniform(300)};
      while (auto id = table.first_expired(now)) {
        REQUIRE(model.count(*id) == 1);
        CHECK(model[*id] <= now);
        table.close(*id);
        model.erase(*id);
      }
      for (auto& [id, deadline] : model) CHECK(deadline > now);
    }
    REQUIRE(table.size() == model.size());
  }
  CHECK(refused > 0);
}
