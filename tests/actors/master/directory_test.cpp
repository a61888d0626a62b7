// The master's bookkeeping, tested without actors: directory,
// membership and placement are pure.

#include <doctest/doctest.h>

#include "actors/master/directory.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/placement.hpp"
#include "runtime/rng.hpp"

#include <map>
#include <string>

namespace {

using namespace std::chrono_literals;
using sluice::node_id;
using sluice::master::directory;

const sluice::clock_time t0{};
const node_id a{1}, b{2}, c{3};

}  // namespace

TEST_CASE("directory: a pending put is invisible until committed") {
  directory d;
  auto v = d.begin_put("k", 10, a, t0 + 1s);
  CHECK(d.find("k") == nullptr);
  REQUIRE(d.commit("k", v, a).ok());
  REQUIRE(d.find("k") != nullptr);
  CHECK(d.find("k")->version == v);
  CHECK(d.usage_of(a).objects == 1);
  CHECK(d.usage_of(a).bytes == 10);
}

TEST_CASE("directory: the higher version wins whatever the commit order") {
  directory d;
  auto v1 = d.begin_put("k", 1, a, t0 + 1s);
  auto v2 = d.begin_put("k", 2, b, t0 + 1s);
  auto second = d.commit("k", v2, b);
  REQUIRE(second.ok());
  CHECK_FALSE(second->stale.has_value());
  auto first = d.commit("k", v1, a);
  REQUIRE(first.ok());
  // The late commit is obsolete on arrival: its holder must free it.
  REQUIRE(first->stale.has_value());
  CHECK(first->stale->holder == a);
  CHECK(first->stale->version == v1);
  CHECK(d.find("k")->version == v2);
  CHECK(d.usage_of(a).objects == 0);
  CHECK(d.usage_of(b).objects == 1);
}

TEST_CASE("directory: an overwrite names the replaced version for dropping") {
  directory d;
  auto v1 = d.begin_put("k", 1, a, t0 + 1s);
  REQUIRE(d.commit("k", v1, a).ok());
  auto v2 = d.begin_put("k", 1, b, t0 + 1s);
  auto out = d.commit("k", v2, b);
  REQUIRE(out->stale.has_value());
  CHECK(out->stale->holder == a);
  CHECK(out->stale->version == v1);
}

TEST_CASE("directory: commits that match no pending put are refused") {
  directory d;
  CHECK(d.commit("k", 99, a).code() == sluice::errc::not_found);
  auto v = d.begin_put("k", 1, a, t0 + 1s);
  CHECK(d.commit("other", v, a).code() == sluice::errc::invalid_argument);
  CHECK(d.commit("k", v, b).code() == sluice::errc::invalid_argument);
  CHECK(d.commit("k", v, a).ok());
  CHECK(d.commit("k", v, a).code() == sluice::errc::not_found);
}

TEST_CASE("directory: expired and aborted pending puts never become visible") {
  directory d;
  auto v1 = d.begin_put("k", 1, a, t0 + 1s);
  auto v2 = d.begin_put("j", 1, b, t0 + 5s);
  auto expired = d.expire(t0 + 2s);
  REQUIRE(expired.size() == 1);
  CHECK(expired[0].version == v1);
  CHECK(d.commit("k", v1, a).code() == sluice::errc::not_found);
  CHECK(d.abort(v2));
  CHECK(d.commit("j", v2, b).code() == sluice::errc::not_found);
  CHECK(d.pending_count() == 0);
}

TEST_CASE("directory: versions keep growing across a delete") {
  directory d;
  auto v1 = d.begin_put("k", 1, a, t0 + 1s);
  REQUIRE(d.commit("k", v1, a).ok());
  auto removed = d.remove("k");
  REQUIRE(removed.has_value());
  CHECK(d.find("k") == nullptr);
  CHECK_FALSE(d.remove("k").has_value());
  auto v2 = d.begin_put("k", 1, a, t0 + 1s);
  CHECK(v2 > v1);
}

TEST_CASE("membership: an owner is down after its link is lost and a grace passes, or its heartbeats stop") {
  using sluice::clock_duration;
  auto timeout = std::chrono::duration_cast<clock_duration>(3s);
  auto grace = std::chrono::duration_cast<clock_duration>(1s);
  sluice::master::membership m;
  REQUIRE(m.join(a, "a", "h:1", 11, 100, 1, t0));
  REQUIRE(m.join(b, "b", "h:2", 12, 100, 1, t0));
  CHECK(m.up_owners().size() == 2);
  CHECK(m.link_lost(11, t0, grace) == std::vector<node_id>{a});
  CHECK(m.find(a)->link == 0);
  CHECK(m.is_up(a));  // for the grace: a relay may still reach it
  CHECK(m.detect_failures(t0 + 500ms, timeout).empty());
  CHECK(m.detect_failures(t0 + 1s, timeout) == std::vector<node_id>{a});
  CHECK(m.find(a)->down_reason == "link lost");
  CHECK_FALSE(m.heartbeat(a, 0, 0, t0 + 1s));  // must register again
  CHECK(m.heartbeat(b, 5, 1, t0 + 1s));
  auto down = m.detect_failures(t0 + 5s, timeout);
  REQUIRE(down.size() == 1);
  CHECK(down[0] == b);
  REQUIRE(m.join(a, "a", "h:1", 13, 100, 1, t0 + 6s));
  CHECK(m.is_up(a));
}

TEST_CASE("membership: an owner whose own link is lost stays up when it is heard from through a relay") {
  using sluice::clock_duration;
  auto timeout = std::chrono::duration_cast<clock_duration>(3s);
  sluice::master::membership m;
  REQUIRE(m.join(a, "a", "h:1", 11, 100, 1, t0));
  REQUIRE(m.join(b, "b", "h:2", 12, 100, 1, t0));
  auto generation = m.generation();
  CHECK(m.link_lost(11, t0, std::chrono::duration_cast<clock_duration>(1s)) == std::vector<node_id>{a});
  m.route(a, 12, b);  // its next request came through b
  CHECK(m.heartbeat(a, 0, 0, t0 + 500ms));
  CHECK(m.detect_failures(t0 + 2s, timeout).empty());
  CHECK(m.find(a)->link == 12);
  CHECK(m.find(a)->via == b);
  CHECK(m.generation() == generation);  // the list of up owners did not change
  // b's link goes: a has no route until its next request, and stays up.
  CHECK(m.link_lost(12, t0 + 2s, std::chrono::duration_cast<clock_duration>(1s)) == std::vector<node_id>{b});
  CHECK(m.find(a)->link == 0);
  CHECK(m.find(a)->via.value == 0);
  CHECK(m.heartbeat(a, 0, 0, t0 + 2500ms));
  CHECK(m.detect_failures(t0 + 4s, timeout) == std::vector<node_id>{b});
  CHECK(m.is_up(a));
  CHECK(m.generation() != generation);
  // Its share of relays: the up owners after it, without itself.
  auto relays = m.relays_for(a, 16);
  CHECK(relays.empty());
  REQUIRE(m.join(b, "b", "h:2", 13, 100, 1, t0 + 5s));
  relays = m.relays_for(a, 16);
  REQUIRE(relays.size() == 1);
  CHECK(relays[0].id == b);
  CHECK(relays[0].address == "h:2");
}

TEST_CASE("placement: local-first prefers the caller's owner, random spreads, full owners are skipped") {
  sluice::rng r{1};
  std::vector<sluice::master::placement_candidate> up{{a, 100, 100, false}, {b, 100, 100, false}, {c, 0, 100, false}};
  auto local = sluice::master::choose_owner(sluice::placement_policy::local_first, b, up, 10, r);
  CHECK(local == std::optional<node_id>{b});
  auto fallback = sluice::master::choose_owner(sluice::placement_policy::local_first, c, up, 10, r);
  REQUIRE(fallback.has_value());
  CHECK(*fallback != c);
  int seen_a = 0, seen_b = 0;
  for (int i = 0; i < 200; ++i) {
    auto pick = sluice::master::choose_owner(sluice::placement_policy::random, a, up, 10, r);
    REQUIRE(pick.has_value());
    CHECK(*pick != c);
    (*pick == a ? seen_a : seen_b)++;
  }
  CHECK(seen_a > 50);
  CHECK(seen_b > 50);
  CHECK_FALSE(sluice::master::choose_owner(sluice::placement_policy::random, a, up, 1000, r).has_value());
}

TEST_CASE("placement: most-free picks the emptiest owner, and full owners that evict still take values") {
  sluice::rng r{1};
  std::vector<sluice::master::placement_candidate> up{{a, 30, 100, true}, {b, 70, 100, false}, {c, 50, 200, true}};
  CHECK(sluice::master::choose_owner(sluice::placement_policy::most_free, a, up, 10, r) == std::optional<node_id>{b});
  // Room free is preferred over room made by evicting.
  CHECK(sluice::master::choose_owner(sluice::placement_policy::most_free, a, up, 60, r) == std::optional<node_id>{b});
  // Nobody has 150 bytes free: c evicts and is large enough; b does not evict, a is too small.
  for (auto policy : {sluice::placement_policy::most_free, sluice::placement_policy::random,
                      sluice::placement_policy::local_first}) {
    CHECK(sluice::master::choose_owner(policy, a, up, 150, r) == std::optional<node_id>{c});
  }
  CHECK_FALSE(sluice::master::choose_owner(sluice::placement_policy::most_free, a, up, 250, r).has_value());
}

TEST_CASE("directory: a put placed before a removed newer version never becomes visible") {
  directory d;
  auto old = d.begin_put("k", 1, a, t0 + 1s);
  auto newer = d.begin_put("k", 1, b, t0 + 1s);
  REQUIRE(d.commit("k", newer, b).ok());
  REQUIRE(d.remove("k").has_value());
  auto late = d.commit("k", old, a);
  REQUIRE(late.ok());
  REQUIRE(late->stale.has_value());
  CHECK(late->stale->version == old);
  CHECK(d.find("k") == nullptr);
  // Once nothing is pending, the key starts afresh.
  auto fresh = d.begin_put("k", 1, a, t0 + 1s);
  REQUIRE(d.commit("k", fresh, a).ok());
  CHECK(d.find("k")->version == fresh);
}

TEST_CASE("directory: conditional puts commit only while their condition holds") {
  using sluice::wire::put_condition;
  directory d;
  const put_condition absent{true, 0};
  // Two racing only-if-absent puts: both start, the first commit wins.
  auto first = d.begin_put("k", 1, a, t0 + 1s, absent);
  auto second = d.begin_put("k", 1, b, t0 + 1s, absent);
  REQUIRE(d.commit("k", first, a).ok());
  auto lost = d.commit("k", second, b);
  CHECK(lost.code() == sluice::errc::conflict);
  CHECK(d.find("k")->version == first);
  CHECK(d.pending_count() == 0);
  CHECK(d.check("k", absent).code() == sluice::errc::conflict);

  // Only-if-version: the expected version must still be the current one.
  auto cas = d.begin_put("k", 2, a, t0 + 1s, put_condition{false, first});
  auto plain = d.begin_put("k", 3, b, t0 + 1s);
  REQUIRE(d.commit("k", plain, b).ok());
  CHECK(d.commit("k", cas, a).code() == sluice::errc::conflict);
  CHECK(d.find("k")->version == plain);
  auto cas2 = d.begin_put("k", 4, a, t0 + 1s, put_condition{false, plain});
  REQUIRE(d.commit("k", cas2, a).ok());
  CHECK(d.find("k")->version == cas2);

  // A key removed after a newer version existed: an older only-if-absent
  // put may not resurrect it under a smaller version.
  auto late = d.begin_put("j", 1, a, t0 + 1s, absent);
  auto newer = d.begin_put("j", 1, b, t0 + 1s);
  REQUIRE(d.commit("j", newer, b).ok());
  REQUIRE(d.remove("j").has_value());
  CHECK(d.commit("j", late, a).code() == sluice::errc::conflict);
  CHECK(d.find("j") == nullptr);
  CHECK(d.check("nothing", put_condition{false, 7}).code() == sluice::errc::conflict);
}

TEST_CASE("directory: keys list by prefix in order, a page at a time") {
  directory d;
  for (auto key : {"b/2", "a/1", "b/1", "b/10", "c", "b", "a/2", "b/3"}) {
    auto v = d.begin_put(key, 5, a, t0 + 1s);
    REQUIRE(d.commit(key, v, a).ok());
  }
  auto page = d.list("b/", "", 2);
  REQUIRE(page.keys.size() == 2);
  CHECK(page.keys[0].key == "b/1");
  CHECK(page.keys[1].key == "b/10");
  CHECK(page.keys[0].size == 5);
  CHECK(page.more);
  page = d.list("b/", "b/10", 2);
  REQUIRE(page.keys.size() == 2);
  CHECK(page.keys[0].key == "b/2");
  CHECK(page.keys[1].key == "b/3");
  CHECK_FALSE(page.more);  // exactly exhausted
  CHECK(d.list("b/", "b/3", 2).keys.empty());
  CHECK(d.list("", "", 100).keys.size() == 8);
  CHECK(d.list("", "b/3", 100).keys.size() == 1);  // "c"
  CHECK(d.list("zz", "", 10).keys.empty());
  CHECK(d.count("b") == 5);
  CHECK(d.count("b/") == 4);
  CHECK(d.count("") == 8);
  CHECK(d.count("a/3") == 0);
  d.remove("b/10");
  CHECK(d.count("b/") == 3);
}

TEST_CASE("directory: replicas register on the current version, go stale with it, and take over for a lost holder") {
  directory d;
  auto v1 = d.begin_put("k", 10, a, t0 + 1s);
  CHECK_FALSE(d.add_replica("k", v1, b));  // not committed yet
  REQUIRE(d.commit("k", v1, a).ok());
  CHECK(d.add_replica("k", v1, b));
  CHECK_FALSE(d.add_replica("k", v1, b));  // once
  CHECK_FALSE(d.add_replica("k", v1, a));  // the holder itself
  CHECK(d.find("k")->held_by(b));
  CHECK(d.usage_of(b).objects == 1);
  CHECK(d.usage_of(b).bytes == 10);
  // An overwrite makes every copy of the old version stale.
  auto v2 = d.begin_put("k", 20, c, t0 + 1s);
  auto out = d.commit("k", v2, c);
  REQUIRE(out.ok());
  REQUIRE(out->stale.has_value());
  CHECK(out->stale->holder == a);
  REQUIRE(out->stale_replicas.size() == 1);
  CHECK(out->stale_replicas[0].holder == b);
  CHECK(out->stale_replicas[0].version == v1);
  CHECK(d.usage_of(b).objects == 0);
  CHECK_FALSE(d.add_replica("k", v1, b));  // too late: v1 is gone
  CHECK(d.add_replica("k", v2, a));
  // The holder is lost: its replica takes over.
  std::vector<std::string> kept;
  CHECK(d.remove_holder(c, &kept).empty());
  CHECK(kept == std::vector<std::string>{"k"});
  CHECK(d.find("k")->holder == a);
  CHECK(d.find("k")->replicas.empty());
  // Evicting a copy: a replica goes alone; the last copy takes the key.
  CHECK(d.add_replica("k", v2, b));
  CHECK(d.evict("k", v2, c) == sluice::master::evicted_copy::refused);
  CHECK(d.evict("k", v1, a) == sluice::master::evicted_copy::refused);
  CHECK(d.evict("k", v2, a) == sluice::master::evicted_copy::replica);
  CHECK(d.find("k")->holder == b);
  CHECK(d.evict("k", v2, b) == sluice::master::evicted_copy::key);
  CHECK(d.find("k") == nullptr);
  CHECK(d.usage_of(a).objects == 0);
  CHECK(d.usage_of(b).objects == 0);
}

TEST_CASE("directory: lookups agree with the ordered listing through many adds and removes") {
  directory d;
  std::map<std::string, std::uint64_t> model;
  sluice::rng random{11};
  std::uint64_t version = 1;
  for (int step = 0; step < 20000; ++step) {
    auto key = "k/" + std::to_string(random.uniform(3000));
    switch (random.uniform(3)) {
      case 0:
      case 1: {
        auto v = version++;
        d.commit_owned(key, v, 8, a);
        model[key] = v;
        break;
      }
      default:
        CHECK(d.remove(key).has_value() == (model.erase(key) > 0));
    }
  }
  for (int i = 0; i < 3000; ++i) {
    auto key = "k/" + std::to_string(i);
    auto* e = d.find(key);
    auto it = model.find(key);
    REQUIRE((e != nullptr) == (it != model.end()));
    if (e != nullptr) CHECK(e->version == it->second);
  }
  auto listed = d.list("k/", "", 5000);
  REQUIRE(listed.keys.size() == model.size());
  auto it = model.begin();
  for (auto& k : listed.keys) CHECK(k.key == (it++)->first);
  CHECK(d.count("k/") == model.size());
}

TEST_CASE("directory: a replica list keeps its order, copies deeply and is one pointer while empty") {
  using sluice::master::replica_list;
  static_assert(sizeof(replica_list) == sizeof(void*));
  replica_list l;
  CHECK(l.empty());
  CHECK(l.begin() == l.end());
  const node_id a{1}, b{2}, c{3};
  l.push_back(a);
  l.push_back(b);
  l.push_back(c);
  CHECK(l == std::vector<node_id>{a, b, c});
  replica_list copy = l;
  l.remove(b);
  CHECK(l == std::vector<node_id>{a, c});
  CHECK(copy == std::vector<node_id>{a, b, c});  // the copy is its own
  CHECK(l.front() == a);
  l.pop_front();
  CHECK(l == std::vector<node_id>{c});
  l.remove(c);
  CHECK(l.empty());
  l.remove(c);  // not there: nothing happens
  CHECK(l.size() == 0);
  replica_list moved = std::move(copy);
  CHECK(moved.size() == 3);
}
