// Owner-committed puts, piece by piece without actors: the directory's
// view of slots and of commits owners make themselves, the master's
// table of slot homes and of how far it applied each owner's commits,
// their persistence, and the owner's fast index that makes the commits.

#include <doctest/doctest.h>

#include <set>

#include "actors/master/directory.hpp"
#include "actors/master/homes.hpp"
#include "actors/master/persistence.hpp"
#include "actors/owner/fast_path.hpp"
#include "runtime/wire/codec.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::key_slot;
using sluice::node_id;
using sluice::slot_of;
using sluice::master::directory;
using sluice::master::homes;
using sluice::master::owner_commit_log;

const sluice::clock_time t0{};
const node_id a{1}, b{2};

/// A key that falls in `slot` (found by trying).
std::string key_in(key_slot slot, int nth = 0) {
  for (int i = 0;; ++i) {
    auto key = "key-" + std::to_string(i);
    if (slot_of(key) == slot && nth-- == 0) return key;
  }
}

sluice::shared_bytes bytes_of(const std::string& text) {
  return sluice::shared_bytes::copy_of(std::as_bytes(std::span{text.data(), text.size()}));
}

/// An owner's fast index with a store behind it, a lease until `now` +
/// 1 s, and values up to 1 KiB allowed.
struct fast_owner {
  sluice::fast_index index;
  sluice::memory_store store{1 << 20};
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::time_point{} + 1s;
  explicit fast_owner(bool leased = true) {
    index.set_max_value_bytes(1 << 10);
    if (leased) index.set_lease(now + 1s);
  }
  std::optional<sluice::fast_index::put_outcome> put(const std::string& key, const std::string& value) {
    return index.try_put(key, bytes_of(value), store, now);
  }
};

}  // namespace

TEST_CASE("keys: slots spread keys over the whole slot space, the same for everyone") {
  std::set<key_slot> seen;
  for (int i = 0; i < 20000; ++i) {
    auto slot = slot_of("k" + std::to_string(i));
    REQUIRE(slot < sluice::key_slots);
    seen.insert(slot);
  }
  CHECK(seen.size() == sluice::key_slots);
  CHECK(slot_of("a fixed key") == slot_of(std::string{"a fixed key"}));
}

TEST_CASE("directory: a slot may go to an owner only while every copy and pending put in it is that owner's") {
  directory d;
  auto k1 = key_in(7, 0), k2 = key_in(7, 1);
  CHECK(d.slot_only(7, a));
  auto v = d.begin_put(k1, 1, a, t0 + 1s);
  CHECK(d.slot_only(7, a));
  CHECK_FALSE(d.slot_only(7, b));  // a's pending put
  REQUIRE(d.commit(k1, v, a).ok());
  CHECK(d.slot_only(7, a));
  CHECK_FALSE(d.slot_only(7, b));
  auto w = d.begin_put(k2, 1, b, t0 + 1s);
  REQUIRE(d.commit(k2, w, b).ok());
  CHECK_FALSE(d.slot_only(7, a));
  d.remove(k2);
  CHECK(d.slot_only(7, a));
  // A copy counts as much as the holder's.
  REQUIRE(d.add_replica(k1, v, b));
  CHECK_FALSE(d.slot_only(7, a));
  CHECK(d.evict(k1, v, b) == sluice::master::evicted_copy::replica);
  CHECK(d.slot_only(7, a));
  CHECK(d.slot_only(8, b));  // other slots are untouched
}

TEST_CASE("directory: an owner's own commits: the higher version wins, applying one twice changes nothing") {
  directory d;
  auto first = d.commit_owned("k", 100, 10, a);
  CHECK_FALSE(first.stale.has_value());
  REQUIRE(d.find("k") != nullptr);
  CHECK(d.find("k")->version == 100);
  CHECK(d.next_version() > 100);

  auto again = d.commit_owned("k", 100, 10, a);
  CHECK_FALSE(again.stale.has_value());
  CHECK(d.usage_of(a).objects == 1);

  auto newer = d.commit_owned("k", 105, 20, a);
  REQUIRE(newer.stale.has_value());
  CHECK(newer.stale->version == 100);
  CHECK(d.find("k")->version == 105);
  CHECK(d.usage_of(a).bytes == 20);

  auto late = d.commit_owned("k", 103, 30, a);
  REQUIRE(late.stale.has_value());
  CHECK(late.stale->version == 103);  // obsolete on arrival: freed
  CHECK(d.find("k")->version == 105);
  CHECK(d.usage_of(a).objects == 1);
}

TEST_CASE("homes: a slot goes to one owner at a time, and one taken back for another waits out a cooldown") {
  homes h;
  CHECK_FALSE(h.home_of(3).has_value());
  CHECK(h.may_grant(3, a, t0));
  h.grant(3, a);
  CHECK(h.home_of(3) == a);
  CHECK(h.may_grant(3, a, t0));
  CHECK_FALSE(h.may_grant(3, b, t0));
  h.release(3, t0, true);
  CHECK_FALSE(h.home_of(3).has_value());
  CHECK_FALSE(h.may_grant(3, b, t0 + 500ms));
  CHECK(h.may_grant(3, b, t0 + sluice::master::home_cooldown));
  h.grant(4, b);
  h.grant(5, b);
  h.grant(6, a);
  CHECK(h.count_of(b) == 2);
  CHECK(h.holders() == std::vector<node_id>{a, b});
  auto back = h.release_all(b);
  CHECK(back == std::vector<key_slot>{4, 5});
  CHECK(h.holders() == std::vector<node_id>{a});
  auto g = h.next_generation();
  CHECK(h.next_generation() > g);
  CHECK(h.generation() == g + 1);
}

TEST_CASE("homes: work waiting for an owner's commits runs once they are applied, or times out") {
  owner_commit_log log;
  int ran = 0, timed_out = 0;
  auto count = [&](sluice::result<void> ok) { ok ? ++ran : ++timed_out; };
  log.wait(a, 0, t0 + 1s, count);  // nothing to wait for
  CHECK(ran == 1);
  log.wait(a, 3, t0 + 1s, count);
  log.wait(a, 5, t0 + 1s, count);
  log.wait(a, 9, t0 + 2s, count);
  log.wait(b, 1, t0 + 1s, count);
  log.set_applied(a, 5);
  for (auto& then : log.ready(a)) then(sluice::result<void>{});
  CHECK(ran == 3);
  for (auto& then : log.expired(t0 + 1s)) then(sluice::error{sluice::errc::timeout, ""});
  CHECK(timed_out == 1);  // b's
  auto left = log.forget(a);
  CHECK(left.size() == 1);  // the wait for 9
  CHECK(log.applied(a) == 0);
}

TEST_CASE("persistence: slot homes and how far each owner's commits were applied survive a restart") {
  sluice::memory_durable_store store;
  {
    sluice::master::persistence p{&store};
    p.home_changed(17, a);
    p.home_changed(1023, b);
    p.home_changed(5, a);
    p.home_changed(5, std::nullopt);
    p.owner_commits_applied(a, 42);
    p.owner_commits_applied(b, 7);
    p.owner_commits_applied(b, 0);
    REQUIRE(p.sync().ok());
  }
  directory d;
  std::vector<sluice::master::member> members;
  homes h;
  owner_commit_log log;
  sluice::master::persistence p{&store};
  REQUIRE(p.load(d, members, nullptr, &h, &log).ok());
  CHECK(h.home_of(17) == a);
  CHECK(h.home_of(1023) == b);
  CHECK_FALSE(h.home_of(5).has_value());
  CHECK(log.applied(a) == 42);
  CHECK(log.applied(b) == 0);
}

TEST_CASE("fast index: a plain put commits only in a slot handed over, with a lease, from the block") {
  fast_owner o{false};
  auto& index = o.index;
  auto key = key_in(9);
  CHECK_FALSE(o.put(key, "v").has_value());  // no lease
  index.set_lease(o.now + 1s);
  CHECK_FALSE(o.put(key, "v").has_value());  // no slot
  index.grant({9}, 1, 5000, 100);
  auto first = o.put(key, "v1");
  REQUIRE(first.has_value());
  CHECK(first->version == 5000);
  CHECK_FALSE(first->notify);  // one report: the poller tells when it idles
  CHECK(index.notify_due());
  CHECK_FALSE(index.notify_due());  // told once
  auto second = o.put(key, "v2");
  REQUIRE(second.has_value());
  CHECK(second->version == 5001);
  CHECK_FALSE(second->notify);
  // The index serves the newest; the store keeps only it.
  REQUIRE(index.find(key).has_value());
  CHECK(index.find(key)->version == 5001);
  CHECK(o.store.latest(key) == 5001);
  CHECK(o.store.object_count() == 1);
  // Too big, or another slot, or a key the owner is changing: not here.
  CHECK_FALSE(o.put(key, std::string(2000, 'x')).has_value());
  CHECK_FALSE(o.put(key_in(10), "v").has_value());
  auto token = index.begin_change(key);
  CHECK_FALSE(o.put(key, "v3").has_value());
  CHECK(index.end_change(key, token));
  CHECK(o.put(key, "v3").has_value());
  // The lease ran out: nothing more.
  o.now += 2s;
  CHECK_FALSE(o.put(key, "v4").has_value());
}

TEST_CASE("fast index: versions only grow, and a block behind a key's version is not used") {
  fast_owner o;
  auto key = key_in(2);
  REQUIRE(o.store.put(key, 700, bytes_of("held")).ok());
  o.index.grant({2}, 1, 600, 10);
  CHECK_FALSE(o.put(key, "v").has_value());
  o.index.grant({}, 2, 800, 2);
  auto put = o.put(key, "v");
  REQUIRE(put.has_value());
  CHECK(put->version == 800);
  CHECK(o.put(key, "v").has_value());
  CHECK_FALSE(o.put(key, "v").has_value());  // block used up
  CHECK(o.index.versions_left() == 0);
}

TEST_CASE("fast index: a grant older than an invalidation that took its slot back is ignored") {
  sluice::fast_index index;
  index.grant({1, 2}, 5, 100, 10);
  CHECK(index.homed(1));
  index.give_up(1, 8);
  CHECK_FALSE(index.homed(1));
  index.grant({1}, 7, 0, 0);  // crossed the invalidation on the way
  CHECK_FALSE(index.homed(1));
  index.grant({1}, 9, 0, 0);
  CHECK(index.homed(1));
  CHECK(index.homed_count() == 2);
  index.give_up_all();
  CHECK(index.homed_count() == 0);
  index.grant({1}, 1, 0, 0);  // a new registration numbers afresh
  CHECK(index.homed(1));
}

TEST_CASE("fast index: reports go out once, come back when not acknowledged, and leave when they are") {
  fast_owner o;
  auto& index = o.index;
  auto k = key_in(4);
  index.grant({4}, 1, 10, 100);
  for (int i = 0; i < 5; ++i) REQUIRE(o.put(k, "v").has_value());
  CHECK(index.first_unacknowledged() == 1);
  auto sent = index.take_unsent(3);
  REQUIRE(sent.size() == 3);
  CHECK(sent.front().seq == 1);
  CHECK(sent.back().commit.version == 12);
  CHECK(index.sent_through() == 3);
  CHECK(index.take_unsent(10).size() == 2);
  CHECK(index.take_unsent(10).empty());
  CHECK(index.sent_through() == 5);
  index.acknowledged(2);
  CHECK(index.first_unacknowledged() == 3);
  index.resend();
  auto again = index.take_unsent(10);
  REQUIRE(again.size() == 3);
  CHECK(again.front().seq == 3);
  index.acknowledged(5);
  CHECK(index.first_unacknowledged() == 6);
  CHECK_FALSE(index.unsent());
}

TEST_CASE("fast path: a request delivered twice is answered once, whichever path served it") {
  fast_owner o;
  auto& index = o.index;
  auto key = key_in(11);
  index.grant({11}, 1, 10, 100);
  sluice::wire::envelope env;
  env.request_id = 7;
  env.source = node_id{99};
  env.body = sluice::wire::kv_put{key, {}, 0, 1, ""};
  auto frame = sluice::wire::encode(env, bytes_of("value"));
  auto in = sluice::wire::inbound_frame{frame.head.slice(sluice::wire::frame_header_bytes,
                                                         frame.head.size() - sluice::wire::frame_header_bytes),
                                        frame.payload};
  auto first = sluice::serve_fast(index, &o.store, node_id{1}, 3, in, o.now);
  REQUIRE(first.has_value());
  CHECK(first->reply.has_value());
  auto repeat = sluice::serve_fast(index, &o.store, node_id{1}, 3, in, o.now);
  REQUIRE(repeat.has_value());
  CHECK_FALSE(repeat->reply.has_value());
  CHECK(index.find(key)->version == 10);  // one version, not two
  // The same id on another link is another request.
  CHECK(sluice::serve_fast(index, &o.store, node_id{1}, 4, in, o.now)->reply.has_value());
}
