// The serving state of one client (actors/client/serve_table.hpp): served
// names, admission against max_concurrent, calls a cancel reaches, open
// streams, and what is served again on a new link.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "actors/client/serve_table.hpp"
#include "runtime/rng.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::served_kind;
using sluice::served_limits;

using table_type = sluice::serve_table<std::string, int, std::string>;

served_limits at_most(std::uint32_t n) { return {n, 0us}; }

}  // namespace

TEST_CASE("serve table: a name not served is answered not_found, naming the client and the name") {
  table_type table{"client-7"};
  auto found = table.find("echo");
  REQUIRE_FALSE(found.ok());
  CHECK(found.code() == errc::not_found);
  CHECK(found.error().message() == "client client-7 does not serve 'echo'");
  REQUIRE(table.serve("echo", "h1", served_kind::call, at_most(1)).ok());
  REQUIRE(table.find("echo").ok());
  CHECK((*table.find("echo"))->handler == "h1");
  CHECK(table.unserve("echo"));
  CHECK_FALSE(table.unserve("echo"));
  CHECK(table.find("echo").code() == errc::not_found);
}

TEST_CASE("serve table: calls beyond max_concurrent are overloaded until one is released") {
  table_type table{"c"};
  auto entry = table.serve("work", "h", served_kind::call, at_most(2));
  REQUIRE(entry.ok());
  auto& e = **entry;
  CHECK(table.admit(e).ok());
  CHECK(table.admit(e).ok());
  auto third = table.admit(e);
  REQUIRE_FALSE(third.ok());
  CHECK(third.code() == errc::overloaded);
  CHECK(third.error().message().find("max_concurrent") != std::string::npos);
  CHECK(e.in_flight == 2);
  table.release(e);
  CHECK(table.admit(e).ok());
  CHECK(e.in_flight == 2);
}

TEST_CASE("serve table: calls of a name served again count down on the entry they were admitted to") {
  table_type table{"c"};
  auto old_entry = *table.serve("work", "old", served_kind::call, at_most(1));
  REQUIRE(table.admit(*old_entry).ok());
  // Served again while the call runs: the new entry starts with room...
  auto new_entry = *table.serve("work", "new", served_kind::call, at_most(1));
  CHECK((*table.find("work"))->handler == "new");
  CHECK(table.admit(*new_entry).ok());
  // ...and the old call's answer releases the old one.
  table.release(*old_entry);
  CHECK(old_entry->in_flight == 0);
  CHECK(new_entry->in_flight == 1);
  // A serve the owner refused is taken back only while it is the one served.
  table.withdraw(old_entry);
  CHECK((*table.find("work"))->handler == "new");
  table.withdraw(new_entry);
  CHECK(table.find("work").code() == errc::not_found);
}

TEST_CASE("serve table: bad names and limits are refused, and so is a name past names_max") {
  table_type table{"c"};
  CHECK(table.serve("", "h", served_kind::call, at_most(1)).code() == errc::invalid_argument);
  CHECK(table.serve("has space", "h", served_kind::call, at_most(1)).code() == errc::invalid_argument);
  CHECK(table.serve("n", "h", served_kind::call, at_most(0)).code() == errc::invalid_argument);
  CHECK(table.serve("n", "h", served_kind::call, at_most(sluice::served_concurrent_max + 1)).code() ==
        errc::invalid_argument);
  CHECK(table.serve("n", "h", served_kind::call, {1, -1us}).code() == errc::invalid_argument);
  CHECK(table.names() == 0);
  for (std::size_t i = 0; i < table_type::names_max; ++i) {
    REQUIRE(table.serve("n" + std::to_string(i), "h", served_kind::call, at_most(1)).ok());
  }
  auto one_more = table.serve("another", "h", served_kind::call, at_most(1));
  CHECK(one_more.code() == errc::invalid_argument);
  // Serving a name again is not one more.
  CHECK(table.serve("n0", "h2", served_kind::call, at_most(1)).ok());
  CHECK(table.names() == table_type::names_max);
}

TEST_CASE("serve table: what is served again carries every name with its limits and kind, and spin is the longest") {
  table_type table{"c"};
  REQUIRE(table.serve("a", "h", served_kind::call, {3, 10us}).ok());
  REQUIRE(table.serve("s", "h", served_kind::stream, {5, 40us}).ok());
  auto again = table.to_serve_again();
  REQUIRE(again.size() == 2);
  CHECK(again[0].name == "a");
  CHECK(again[0].max_concurrent == 3);
  CHECK_FALSE(again[0].stream);
  CHECK(again[1].name == "s");
  CHECK(again[1].max_concurrent == 5);
  CHECK(again[1].stream);
  CHECK(table.spin() == 40us);
  CHECK(table.unserve("s"));
  CHECK(table.spin() == 10us);
}

TEST_CASE("serve table: a cancel reaches a tracked call until it is untracked") {
  table_type table{"c"};
  REQUIRE(table.track(41, 1).ok());
  REQUIRE(table.tracked(41) != nullptr);
  CHECK(*table.tracked(41) == 1);
  *table.tracked(41) = 2;  // a watch learns its stream
  CHECK(*table.tracked(41) == 2);
  CHECK(table.tracked(42) == nullptr);
  table.untrack(41);
  CHECK(table.tracked(41) == nullptr);
  CHECK(table.calls() == 0);
}

TEST_CASE("serve table: streams get ids from 1, once each, and are found until closed") {
  table_type table{"c"};
  const sluice::stream_time t0{};
  auto a = table.open_stream("a", t0 + 1s);
  auto b = table.open_stream("b", t0 + 1s);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == 1);
  CHECK(*b == 2);
  REQUIRE(table.stream(*b) != nullptr);
  CHECK(*table.stream(*b) == "b");
  table.close_stream(*a);
  CHECK(table.stream(*a) == nullptr);
  table.close_stream(*a);  // twice: nothing
  auto c = table.open_stream("c", t0 + 2s);
  CHECK(*c == 3);
  std::string seen;
  table.each_stream([&seen](std::int64_t, const std::string& s) { seen += s; });
  CHECK(seen == "bc");
  CHECK(table.streams() == 2);
}

TEST_CASE("serve table: streams come due at their deadlines, earliest first, until they are closed") {
  table_type table{"c"};
  const sluice::stream_time t0{};
  CHECK_FALSE(table.next_stream_deadline().has_value());
  auto late = *table.open_stream("late", t0 + 3s);
  auto early = *table.open_stream("early", t0 + 1s);
  auto middle = *table.open_stream("middle", t0 + 2s);
  CHECK(table.next_stream_deadline() == t0 + 1s);
  CHECK(table.streams_due(t0 + 500ms).empty());
  CHECK(table.streams_due(t0 + 2s) == std::vector<std::int64_t>{early, middle});
  // Due until closed (expiring them is the driver's): then gone.
  CHECK(table.streams_due(t0 + 2s).size() == 2);
  table.close_stream(early);
  CHECK(table.streams_due(t0 + 2s) == std::vector<std::int64_t>{middle});
  CHECK(table.next_stream_deadline() == t0 + 2s);
  table.close_stream(middle);
  table.close_stream(late);
  CHECK(table.streams_due(t0 + 10s).empty());
  CHECK_FALSE(table.next_stream_deadline().has_value());
}

TEST_CASE("serve table: random admits and releases keep in_flight equal to a model and within max_concurrent") {
  table_type table{"c"};
  sluice::rng random{7};
  std::vector<table_type::name_ref> entries;
  std::vector<std::uint32_t> model;
  for (int i = 0; i < 4; ++i) {
    entries.push_back(*table.serve("n" + std::to_string(i), "h", served_kind::call, at_most(1 + i)));
    model.push_back(0);
  }
  std::uint64_t refused = 0;
  for (int step = 0; step < 20000; ++step) {
    auto i = static_cast<std::size_t>(random.uniform(entries.size()));
    auto& e = *entries[i];
    if (random.chance(1, 2)) {
      auto ok = table.admit(e);
      bool room = model[i] < e.limits.max_concurrent;
      REQUIRE(ok.ok() == room);
      if (room) {
        ++model[i];
      } else {
        ++refused;
      }
    } else if (model[i] > 0) {
      table.release(e);
      --model[i];
    }
    REQUIRE(e.in_flight == model[i]);
  }
  CHECK(refused > 0);
}
