// What the master keeps across restarts: committed objects, members and
// the version floor, written through persistence and read back into a
// fresh directory.

#include <doctest/doctest.h>

#include "actors/master/persistence.hpp"
#include "runtime/keys.hpp"

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

TEST_CASE("persistence: replicas are kept with their object") {
  sluice::memory_durable_store store;
  std::uint64_t v = 0;
  {
    directory d;
    persistence p{&store};
    v = put(d, p, "k", 7, a);
    REQUIRE(d.add_replica("k", v, b));
    p.object_committed("k", *d.find("k"));
    REQUIRE(p.sync().ok());
  }
  directory d;
  std::vector<member> members;
  persistence p{&store};
  REQUIRE(p.load(d, members).ok());
  REQUIRE(d.find("k") != nullptr);
  CHECK(d.find("k")->holder == a);
  CHECK(d.find("k")->replicas == std::vector<node_id>{b});
  CHECK(d.find("k")->expires_ms == 0);
  CHECK(d.usage_of(b).objects == 1);
}

TEST_CASE("persistence: an object's copy target is kept, and records written before it existed still read") {
  sluice::memory_durable_store store;
  const node_id c{3};
  {
    directory d;
    persistence p{&store};
    // Three copies asked; one so far, then one more registered.
    auto v = d.begin_put("three", 7, a, t0 + 1s, {}, 0, 3);
    REQUIRE(d.commit("three", v, a).ok());
    p.object_committed("three", *d.find("three"));
    auto w = d.begin_put("two", 9, a, t0 + 1s, {}, 0, 2);
    REQUIRE(d.commit("two", w, a).ok());
    REQUIRE(d.add_replica("two", w, c));
    p.object_committed("two", *d.find("two"));
    put(d, p, "one", 5, b);
    REQUIRE(p.sync().ok());
  }
  // A record of the format before copy targets: version, size, holder,
  // expiry, one replica — its target reads as 1.
  std::string old;
  for (std::uint64_t x : {std::uint64_t{90}, std::uint64_t{4}, a.value, std::uint64_t{0}, b.value}) {
    for (int i = 0; i < 8; ++i) old.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  }
  REQUIRE(store.put("o/older", old).ok());
  directory d;
  std::vector<member> members;
  persistence p{&store};
  REQUIRE(p.load(d, members).ok());
  REQUIRE(d.find("three") != nullptr);
  CHECK(d.find("three")->copies == 3);
  CHECK(d.find("three")->replicas.empty());
  CHECK(d.find("two")->copies == 2);
  CHECK(d.find("two")->replicas == std::vector<node_id>{c});
  CHECK(d.find("one")->copies == 1);
  REQUIRE(d.find("older") != nullptr);
  CHECK(d.find("older")->copies == 1);
  CHECK(d.find("older")->replicas == std::vector<node_id>{b});
  // An eviction on purpose lowers the target to what is left.
  REQUIRE(d.evict("two", d.find("two")->version, c) == sluice::master::evicted_copy::replica);
  d.settle_copies("two");
  CHECK(d.find("two")->copies == 1);
}

TEST_CASE("persistence: an object record with a copy target of 0 is corrupt") {
  sluice::memory_durable_store store;
  std::string bad;
  for (std::uint64_t x : {std::uint64_t{5}, std::uint64_t{4}, a.value, std::uint64_t{0}}) {
    for (int i = 0; i < 8; ++i) bad.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  }
  bad.append(4, '\0');
  REQUIRE(store.put("o/k", bad).ok());
  directory d;
  std::vector<member> members;
  persistence p{&store};
  auto loaded = p.load(d, members);
  REQUIRE_FALSE(loaded.ok());
  CHECK(loaded.error().to_string().find("o/k") != std::string::npos);
}

TEST_CASE("pins: session pins lapse with their session or owner, detached ones with time or unpin, all survive a restart") {
  using sluice::master::pin_table;
  using sluice::master::pinned_forever;
  sluice::memory_durable_store store;
  {
    pin_table t;
    persistence p{&store};
    t.pin("model", a, 0, pinned_forever);  // detached, no time limit
    t.pin("cache", a, 41, 5'000);          // client 41 through owner a, until t=5000
    t.pin("cache", b, 42, pinned_forever); // client 42 through owner b
    t.pin("cache", a, 41, 1'000);          // pinning again never shortens
    for (auto key : {"model", "cache"}) p.pins_changed(key, t.holds(key));
    REQUIRE(p.sync().ok());
  }
  directory d;
  std::vector<member> members;
  pin_table t;
  persistence p{&store};
  REQUIRE(p.load(d, members, &t).ok());
  CHECK(t.keys() == 2);
  CHECK(t.pinned("model", 0));
  CHECK(t.holds("cache").size() == 2);
  CHECK(t.holds("cache")[0].until_ms == 5'000);
  // Owner b no longer lists client 42: its pin lapses; 41's holds on.
  CHECK(t.keep_sessions(b, {7}) == std::vector<std::string>{"cache"});
  CHECK(t.pinned("cache", 4'999));
  CHECK_FALSE(t.pinned("cache", 5'000));  // and then its time runs out
  CHECK(t.prune(5'000) == std::vector<std::string>{"cache"});
  CHECK(t.holds("cache").empty());
  // Only the holder lifts a pin; a down owner takes its sessions' pins along.
  t.pin("k", a, 41, pinned_forever);
  CHECK_FALSE(t.unpin("k", 0, 0));
  CHECK(t.pinned("k", 0));
  t.drop_owner(a);
  CHECK_FALSE(t.pinned("k", 0));
  CHECK(t.pinned("model", 0));  // detached pins are nobody's session
  CHECK(t.unpin("model", 0, 0));
  CHECK_FALSE(t.pinned("model", 0));
  t.pin("gone", a, 0, pinned_forever);
  CHECK(t.forget_key("gone"));
  CHECK(t.keys() == 0);
}

TEST_CASE("persistence: an object record past the directory's bounds (copies, size, key length) is corrupt") {
  auto record = [](std::uint64_t size, std::uint32_t copies) {
    std::string out;
    for (std::uint64_t x : {std::uint64_t{5}, size, a.value, std::uint64_t{0}}) {
      for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
    }
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((copies >> (8 * i)) & 0xff));
    return out;
  };
  struct bad_case {
    std::string key;
    std::string value;
  };
  for (auto& bad : {bad_case{"o/k", record(10, 256)}, bad_case{"o/k", record(sluice::master::object_size_max + 1, 2)},
                    bad_case{"o/" + std::string(sluice::max_key_bytes + 1, 'k'), record(10, 2)}}) {
    sluice::memory_durable_store store;
    REQUIRE(store.put(bad.key, bad.value).ok());
    directory d;
    std::vector<member> members;
    persistence p{&store};
    auto loaded = p.load(d, members);
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.error().to_string().find("not an object") != std::string::npos);
    CHECK(d.object_count() == 0);
  }
  // At the bounds it reads.
  sluice::memory_durable_store store;
  REQUIRE(store.put("o/" + std::string(sluice::max_key_bytes, 'k'), record(sluice::master::object_size_max, 255)).ok());
  directory d;
  std::vector<member> members;
  persistence p{&store};
  REQUIRE(p.load(d, members).ok());
  auto* e = d.find(std::string(sluice::max_key_bytes, 'k'));
  REQUIRE(e != nullptr);
  CHECK(e->size == sluice::master::object_size_max);
  CHECK(e->copies == 255);
}
