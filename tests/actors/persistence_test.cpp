// What the master keeps across restarts: committed objects, members and
// the version floor, written through persistence and read back into a
// fresh directory.

#include <doctest/doctest.h>

#include "actors/master/persistence.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::node_id;
using sluice::master::directory;
using sluice::master::member;
using sluice::master::persistence;

const sluice::clock_time t0{};
const node_id a{1}, b{2};

/// A put through the directory, recorded as the master records it.
std::uint64_t put(directory& d, persistence& p, const std::string& key, std::uint64_t size, node_id holder) {
  auto v = d.begin_put(key, size, holder, t0 + 1s);
  p.versions_used(d.next_version());
  auto outcome = d.commit(key, v, holder);
  REQUIRE(outcome.ok());
  p.object_committed(key, *d.find(key));
  return v;
}

}  // namespace

TEST_CASE("persistence: a restarted master finds every committed object, member and version floor") {
  sluice::memory_durable_store store;
  std::uint64_t last = 0;
  {
    directory d;
    persistence p{&store};
    member m;
    m.id = a;
    m.name = "owner-a";
    m.address = "tcp://10.0.0.1:7070";
    m.capacity_bytes = 1 << 30;
    m.incarnation = 77;
    p.member_joined(m);
    put(d, p, "kept", 10, a);
    put(d, p, std::string{"bin\0key", 7}, 20, b);
    put(d, p, "removed", 30, a);
    last = put(d, p, "kept", 11, a);  // a newer version replaces the first
    REQUIRE(d.remove("removed"));
    p.object_removed("removed");
    CHECK(p.dirty());
    REQUIRE(p.sync().ok());
    CHECK_FALSE(p.dirty());
    // Unsynced changes are what a crash may lose: this one is discarded.
    put(d, p, "never-synced", 5, a);
    p.discard();
  }
  directory d;
  std::vector<member> members;
  persistence p{&store};
  auto stats = p.load(d, members);
  REQUIRE(stats.ok());
  CHECK(stats->objects == 2);
  CHECK(stats->members == 1);
  REQUIRE(d.find("kept") != nullptr);
  CHECK(d.find("kept")->version == last);
  CHECK(d.find("kept")->size == 11);
  CHECK(d.find("kept")->holder == a);
  REQUIRE(d.find(std::string{"bin\0key", 7}) != nullptr);
  CHECK(d.find(std::string{"bin\0key", 7})->holder == b);
  CHECK(d.find("removed") == nullptr);
  CHECK(d.find("never-synced") == nullptr);
  CHECK(d.usage_of(a).bytes == 11);
  REQUIRE(members.size() == 1);
  CHECK(members[0].name == "owner-a");
  CHECK(members[0].address == "tcp://10.0.0.1:7070");
  CHECK(members[0].incarnation == 77);
  CHECK(members[0].capacity_bytes == 1 << 30);
  // Versions handed out before the restart (even unsynced ones) are never
  // handed out again: the floor is ahead of them.
  CHECK(d.next_version() > last + 1);
}

TEST_CASE("persistence: a corrupt record is an internal error naming it") {
  sluice::memory_durable_store store;
  REQUIRE(store.put("o/some-key", "short").ok());
  directory d;
  std::vector<member> members;
  persistence p{&store};
  auto stats = p.load(d, members);
  REQUIRE_FALSE(stats.ok());
  CHECK(stats.code() == sluice::errc::internal);
  CHECK(stats.error().message().find("o/some-key") != std::string::npos);
}

TEST_CASE("persistence: without a store nothing is written and the master starts empty") {
  directory d;
  persistence p{nullptr};
  put(d, p, "k", 1, a);
  CHECK_FALSE(p.dirty());
  CHECK(p.sync().ok());
  std::vector<member> members;
  auto stats = p.load(d, members);
  REQUIRE(stats.ok());
  CHECK(stats->objects == 0);
}

TEST_CASE("directory: remove_holder forgets what one owner held, nothing else") {
  directory d;
  persistence p{nullptr};
  put(d, p, "x", 1, a);
  put(d, p, "y", 2, b);
  put(d, p, "z", 3, a);
  auto gone = d.remove_holder(a);
  CHECK(gone == std::vector<std::string>{"x", "z"});
  CHECK(d.find("x") == nullptr);
  CHECK(d.find("y") != nullptr);
  CHECK(d.usage_of(a).objects == 0);
  CHECK(d.object_count() == 1);
}

TEST_CASE("directory: a version with a TTL expires at its wall time, survives a restart, and is taken out") {
  sluice::memory_durable_store store;
  {
    directory d;
    persistence p{&store};
    d.advance(1'000'000);
    auto v = d.begin_put("short", 5, a, t0 + 1s, {}, 250);
    REQUIRE(d.commit("short", v, a).ok());
    p.object_committed("short", *d.find_any("short"));
    put(d, p, "forever", 5, a);
    CHECK(d.find_any("short")->expires_ms == 1'000'250);
    CHECK(d.find("short") != nullptr);
    d.advance(1'000'249);
    CHECK(d.expired(10).empty());
    REQUIRE(p.sync().ok());
  }
  directory d;
  std::vector<member> members;
  persistence p{&store};
  REQUIRE(p.load(d, members).ok());
  d.advance(1'000'100);
  REQUIRE(d.find("short") != nullptr);
  CHECK(d.find("short")->expires_ms == 1'000'250);
  CHECK(d.count("") == 2);
  d.advance(1'000'250);  // the TTL ran out
  CHECK(d.find("short") == nullptr);
  CHECK(d.find_any("short") != nullptr);  // listed until taken out
  CHECK(d.check("short", sluice::wire::put_condition{true, 0}).ok());  // absent, for a condition
  CHECK(d.count("") == 1);
  CHECK(d.list("", "", 10).keys.size() == 1);
  auto expired = d.expired(10);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].first == "short");
  REQUIRE(d.remove("short"));
  CHECK(d.expired(10).empty());
  // An overwrite without a TTL clears it.
  d.advance(2'000'000);
  auto v = d.begin_put("forever", 5, a, t0 + 1s, {}, 10);
  REQUIRE(d.commit("forever", v, a).ok());
  auto w = d.begin_put("forever", 5, a, t0 + 1s);
  REQUIRE(d.commit("forever", w, a).ok());
  d.advance(3'000'000);
  CHECK(d.find("forever") != nullptr);
  CHECK(d.expired(10).empty());
}

TEST_CASE("directory: a pin survives a restart and overwrites, and goes with a remove") {
  sluice::memory_durable_store store;
  {
    directory d;
    persistence p{&store};
    d.advance(1'000);
    put(d, p, "p", 5, a);
    REQUIRE(d.pin("p", 5'000).ok());
    p.object_committed("p", *d.find_any("p"));
    CHECK(d.pin("missing", 5'000).code() == sluice::errc::not_found);
    REQUIRE(p.sync().ok());
  }
  directory d;
  std::vector<member> members;
  persistence p{&store};
  REQUIRE(p.load(d, members).ok());
  d.advance(2'000);
  REQUIRE(d.find("p") != nullptr);
  CHECK(d.pinned(*d.find("p")));
  CHECK(d.find("p")->expires_ms == 0);
  put(d, p, "p", 6, a);  // overwritten: still pinned
  CHECK(d.pinned(*d.find("p")));
  d.advance(5'000);  // lapsed
  CHECK_FALSE(d.pinned(*d.find("p")));
  REQUIRE(d.pin("p", 9'000).ok());
  CHECK(d.unpin("p"));
  CHECK_FALSE(d.pinned(*d.find("p")));
  REQUIRE(d.pin("p", 9'000).ok());
  REQUIRE(d.remove("p"));
  put(d, p, "p", 1, a);
  CHECK_FALSE(d.pinned(*d.find("p")));
}
