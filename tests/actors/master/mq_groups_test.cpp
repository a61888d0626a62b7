// The master's MQ consumer groups, tested without actors: mq_groups is
// pure bookkeeping over an mq_log.

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/master/mq_groups.hpp"
#include "actors/master/mq_log.hpp"
#include "runtime/overloaded.hpp"
#include "runtime/rng.hpp"

namespace {

using sluice::errc;
using sluice::master::mq_delivery;
using sluice::master::mq_group_change;
using sluice::master::mq_group_config;
using sluice::master::mq_groups;
using sluice::master::mq_log;
using sluice::master::mq_member_id;
using sluice::master::mq_partition_id;
using sluice::master::mq_polled;
using sluice::master::mq_wait;

mq_group_config reads(std::vector<std::string> topics) {
  mq_group_config c;
  c.topics = std::move(topics);
  return c;
}

const mq_partition_id a0{"a", 0}, a1{"a", 1}, a2{"a", 2}, b0{"b", 0}, b1{"b", 1}, t0{"t", 0}, t1{"t", 1};

/// A log and its groups, and a clock.
struct world {
  mq_log log;
  mq_groups groups;
  std::int64_t now = 1000;

  void topic(const std::string& name, std::uint32_t partitions) {
    sluice::master::mq_topic_config c;
    c.partitions = partitions;
    REQUIRE(log.create(name, c).ok());
  }
  std::uint64_t produce(const mq_partition_id& at, const std::string& payload, std::uint64_t size = 10) {
    sluice::master::mq_message m;
    m.payload = payload;
    m.size_bytes = size;
    m.partition = at.partition;
    auto out = log.append(at.topic, m, now);
    REQUIRE(out.ok());
    return out->offset;
  }
  std::vector<sluice::master::mq_move> join(const std::string& group, std::uint64_t session,
                                            const mq_group_config& config, std::int64_t lease_ms = 10'000) {
    auto out = groups.join(group, session, config, now + lease_ms, now, log);
    REQUIRE(out.ok());
    return *out;
  }
  mq_polled poll(const std::string& group, std::uint64_t session, std::size_t max = 100, std::uint64_t bytes = 0) {
    auto out = groups.poll(group, session, max, bytes, now, log);
    REQUIRE(out.ok());
    return *out;
  }
  sluice::master::mq_partition_view view(const std::string& group, const mq_partition_id& at) const {
    auto out = groups.view(group, at);
    REQUIRE(out.ok());
    return *out;
  }
};

std::vector<std::uint64_t> offsets_of(const mq_polled& p) {
  std::vector<std::uint64_t> out;
  for (auto& d : p.deliveries) out.push_back(d.offset);
  return out;
}

}  // namespace

TEST_CASE("mq_groups: group names and configs out of range are refused") {
  world w;
  w.topic("a", 1);
  w.topic("b", 1);
  auto code = [&w](const mq_group_config& c) { return w.groups.join("g", 1, c, w.now + 100, w.now, w.log).code(); };
  CHECK(code(reads({})) == errc::invalid_argument);
  CHECK(code(reads({"b", "a"})) == errc::invalid_argument);
  CHECK(code(reads({"a", "a"})) == errc::invalid_argument);
  CHECK(code(reads({"a b"})) == errc::invalid_argument);
  std::vector<std::string> many;
  for (int i = 0; i < 65; ++i) many.push_back("t" + std::to_string(100 + i));
  CHECK(code(reads(many)) == errc::invalid_argument);
  auto refused = [&code](auto change) {
    auto c = reads({"a"});
    change(c);
    return code(c) == errc::invalid_argument;
  };
  CHECK(refused([](mq_group_config& c) { c.ack_timeout_ms = 0; }));
  CHECK(refused([](mq_group_config& c) { c.ack_timeout_ms = sluice::master::mq_delay_ms_max + 1; }));
  CHECK(refused([](mq_group_config& c) { c.max_deliveries = 0; }));
  CHECK(refused([](mq_group_config& c) { c.max_deliveries = sluice::master::mq_deliveries_max + 1; }));
  CHECK(refused([](mq_group_config& c) { c.prefetch = 0; }));
  CHECK(refused([](mq_group_config& c) { c.prefetch = sluice::master::mq_prefetch_max + 1; }));
  CHECK(refused([](mq_group_config& c) { c.start = static_cast<sluice::master::mq_start>(9); }));
  CHECK(code(reads({"a", "zz"})) == errc::not_found);
  CHECK(w.groups.join("", 1, reads({"a"}), w.now + 100, w.now, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.join("g", 1, reads({"a"}), w.now, w.now, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.list().empty());
  CHECK(w.groups.drain_changes().empty());
}

TEST_CASE("mq_groups: a join with another config is a conflict, and with the same config it extends the lease") {
  world w;
  w.topic("a", 1);
  w.topic("b", 1);
  w.join("g", 1, reads({"a"}), 100);
  CHECK(w.groups.join("g", 2, reads({"a", "b"}), w.now + 100, w.now, w.log).code() == errc::conflict);
  auto other = reads({"a"});
  other.prefetch = 3;
  CHECK(w.groups.join("g", 2, other, w.now + 100, w.now, w.log).code() == errc::conflict);
  CHECK(w.join("g", 1, reads({"a"}), 150).empty());  // no change of hands
  CHECK(w.groups.heartbeat("g", 1, w.now + 200).ok());
  CHECK(w.groups.heartbeat("g", 1, w.now + 50).ok());  // never shortens
  CHECK(w.groups.heartbeat("g", 2, w.now + 200).code() == errc::not_found);
  CHECK(w.groups.heartbeat("h", 1, w.now + 200).code() == errc::not_found);
  CHECK(w.groups.expire(w.now + 199, w.log).members.empty());
  auto lapsed = w.groups.expire(w.now + 200, w.log);
  CHECK(lapsed.members == std::vector<mq_member_id>{{"g", 1}});
  CHECK(w.groups.assigned("g", 1).empty());
  CHECK_FALSE(w.view("g", {"a", 0}).member.has_value());
}

TEST_CASE("mq_groups: the group table and each group's members are bounded") {
  world w;
  w.topic("a", 1);
  for (std::size_t i = 0; i < sluice::master::mq_groups_max; ++i) w.join("g" + std::to_string(i), 1, reads({"a"}));
  CHECK(w.groups.join("more", 1, reads({"a"}), w.now + 100, w.now, w.log).code() == errc::overloaded);
  for (std::uint64_t s = 2; s <= sluice::master::mq_group_members_max; ++s) w.join("g0", s, reads({"a"}));
  CHECK(w.groups.join("g0", 9999, reads({"a"}), w.now + 100, w.now, w.log).code() == errc::overloaded);
  CHECK(w.groups.join("g0", 1, reads({"a"}), w.now + 100, w.now, w.log).ok());  // a member already
  REQUIRE(w.groups.remove("g1").ok());
  CHECK(w.groups.join("more", 1, reads({"a"}), w.now + 100, w.now, w.log).ok());
}

TEST_CASE("mq_groups: partitions are spread over members in order, never two holders, and moves raise generations") {
  world w;
  w.topic("a", 3);
  w.topic("b", 2);
  auto first = w.join("g", 20, reads({"a", "b"}));
  CHECK(first.size() == 5);
  CHECK(w.groups.assigned("g", 20) == std::vector<mq_partition_id>{a0, a1, a2, b0, b1});
  auto moves = w.join("g", 10, reads({"a", "b"}));
  // Members by id [10, 20]; partitions by (topic, partition): i -> i mod 2.
  CHECK(w.groups.assigned("g", 10) == std::vector<mq_partition_id>{a0, a2, b1});
  CHECK(w.groups.assigned("g", 20) == std::vector<mq_partition_id>{a1, b0});
  REQUIRE(moves.size() == 3);
  CHECK(moves[0].partition == a0);
  CHECK(moves[0].from == std::optional<std::uint64_t>{20});
  CHECK(moves[0].to == std::optional<std::uint64_t>{10});
  CHECK(moves[0].generation == 2);
  CHECK(w.view("g", a0).generation == 2);
  CHECK(w.view("g", a1).generation == 1);  // stayed
  w.groups.check_invariants();

  REQUIRE(w.groups.leave("g", 10, w.log).ok());
  CHECK(w.groups.assigned("g", 20).size() == 5);
  CHECK(w.view("g", a0).generation == 3);
  CHECK(w.view("g", a1).generation == 1);
  CHECK(w.groups.leave("g", 10, w.log).code() == errc::not_found);
  REQUIRE(w.groups.leave("g", 20, w.log).ok());
  CHECK_FALSE(w.view("g", a1).member.has_value());
  CHECK(w.view("g", a1).generation == 2);
  // The same members in another order of joining give the same spread.
  world v;
  v.topic("a", 3);
  v.topic("b", 2);
  v.join("g", 10, reads({"a", "b"}));
  v.join("g", 20, reads({"a", "b"}));
  CHECK(v.groups.assigned("g", 10) == std::vector<mq_partition_id>{a0, a2, b1});
}

TEST_CASE("mq_groups: a member that leaves hands its unacked deliveries to the new holder, never its acked ones") {
  world w;
  w.topic("t", 1);
  for (int i = 0; i < 4; ++i) w.produce(t0, "p" + std::to_string(i));
  w.join("g", 1, reads({"t"}));
  w.join("g", 2, reads({"t"}));  // partition 0 stays with member 1
  auto got = w.poll("g", 1);
  CHECK(offsets_of(got) == std::vector<std::uint64_t>{0, 1, 2, 3});
  CHECK(got.deliveries[0].generation == 1);
  CHECK(got.deliveries[0].delivery_count == 1);
  CHECK(got.deliveries[2].payload == "p2");
  REQUIRE(w.groups.ack("g", 1, t0, 0, 1).ok());
  REQUIRE(w.groups.ack("g", 1, t0, 2, 1).ok());
  CHECK(w.poll("g", 2).wait == mq_wait::log_grows);  // holds nothing yet

  auto moves = *w.groups.leave("g", 1, w.log);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].to == std::optional<std::uint64_t>{2});
  // What was in flight to member 1 is named: it may still be reading it.
  CHECK(moves[0].recalled == std::vector<std::uint64_t>{1, 3});
  auto again = w.poll("g", 2);
  CHECK(offsets_of(again) == std::vector<std::uint64_t>{1, 3});
  CHECK(again.deliveries[0].delivery_count == 2);
  CHECK(again.deliveries[0].generation == 2);
  // The old holder's acks are refused; so are acks under the old generation.
  CHECK(w.groups.ack("g", 1, t0, 1, 1).code() == errc::not_found);
  CHECK(w.groups.ack("g", 2, t0, 1, 1).code() == errc::conflict);
  CHECK(w.groups.ack("g", 2, t0, 1, 2).ok());
  CHECK(w.poll("g", 2).deliveries.empty());
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: a lapsed lease moves the member's partitions as a leave does") {
  world w;
  w.topic("t", 2);
  w.produce(t0, "x");
  w.join("g", 1, reads({"t"}), 100);
  w.join("g", 2, reads({"t"}), 1000);
  CHECK(w.groups.assigned("g", 1) == std::vector<mq_partition_id>{t0});
  CHECK(offsets_of(w.poll("g", 1)) == std::vector<std::uint64_t>{0});
  w.now += 100;
  // Past its lease but not yet expired: it may not poll.
  CHECK(w.groups.poll("g", 1, 10, 0, w.now, w.log).code() == errc::not_found);
  auto lapsed = w.groups.expire(w.now, w.log);
  CHECK(lapsed.members == std::vector<mq_member_id>{{"g", 1}});
  REQUIRE(lapsed.moves.size() == 1);
  CHECK(lapsed.moves[0].partition == t0);
  CHECK(lapsed.moves[0].to == std::optional<std::uint64_t>{2});
  auto got = w.poll("g", 2);
  REQUIRE(got.deliveries.size() == 1);
  CHECK(got.deliveries[0].delivery_count == 2);
  CHECK(w.groups.heartbeat("g", 1, w.now + 100).code() == errc::not_found);
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: a poll goes in offset order and stops at its messages, its bytes and the prefetch") {
  world w;
  w.topic("t", 2);
  w.produce(t0, "a", 10);
  w.produce(t0, "b", 20);
  w.produce(t0, "c", 30);
  w.produce(t1, "d", 40);
  auto c = reads({"t"});
  c.prefetch = 3;
  w.join("g", 1, c);
  auto first = w.poll("g", 1, 2);
  CHECK(offsets_of(first) == std::vector<std::uint64_t>{0, 1});
  CHECK(first.deliveries[1].partition == t0);
  // The next poll starts at the next partition; one more fits the prefetch.
  auto second = w.poll("g", 1, 10);
  REQUIRE(second.deliveries.size() == 1);
  CHECK(second.deliveries[0].partition == t1);
  auto full = w.poll("g", 1, 10);
  CHECK(full.deliveries.empty());
  CHECK(full.wait == mq_wait::prefetch_full);
  REQUIRE(w.groups.ack_upto("g", 1, t0, 1).ok());
  REQUIRE(w.groups.ack("g", 1, t1, 0, 1).ok());
  // A message larger than max_bytes still goes, alone.
  auto big = w.poll("g", 1, 10, 5);
  CHECK(offsets_of(big) == std::vector<std::uint64_t>{2});
  REQUIRE(w.groups.ack("g", 1, t0, 2, 1).ok());
  for (auto p : {"e", "f", "g"}) w.produce(t0, p, 10);
  auto bytes = w.poll("g", 1, 10, 25);
  CHECK(offsets_of(bytes) == std::vector<std::uint64_t>{3, 4});
  CHECK(w.groups.poll("g", 1, 0, 0, w.now, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.poll("g", 1, sluice::master::mq_poll_messages_max + 1, 0, w.now, w.log).code() ==
        errc::invalid_argument);
  CHECK(w.groups.poll("g", 7, 1, 0, w.now, w.log).code() == errc::not_found);
  CHECK(w.groups.poll("h", 1, 1, 0, w.now, w.log).code() == errc::not_found);
}

std::vector<std::string> payloads_of(const std::vector<sluice::master::mq_upcoming>& u) {
  std::vector<std::string> out;
  for (auto& x : u) out.push_back(x.payload);
  return out;
}

TEST_CASE("mq_groups: upcoming names what a member's next polls take, a prefetch window past what it holds, past what was named before") {
  world w;
  w.topic("t", 2);
  for (auto p : {"a", "b", "c"}) w.produce(t0, p);
  w.produce(t1, "d", 40);
  auto c = reads({"t"});
  c.prefetch = 3;
  w.join("g", 1, c);
  std::map<mq_partition_id, std::uint64_t> none;
  // The prefetch bounds it: three of the four, partition by partition.
  auto first = w.groups.upcoming("g", 1, w.log, none);
  CHECK(payloads_of(first) == std::vector<std::string>{"a", "b", "c"});
  CHECK(first[2].partition == t0);
  CHECK(first[2].offset == 2);
  CHECK(first[0].size_bytes == 10);
  // What was named before is not named again; its room stays taken.
  CHECK(payloads_of(w.groups.upcoming("g", 1, w.log, {{t0, 2}})) == std::vector<std::string>{"c"});
  CHECK(w.groups.upcoming("g", 1, w.log, {{t0, 3}}).empty());
  // A window past what the member holds: in flight takes no room.
  CHECK(offsets_of(w.poll("g", 1, 2)) == std::vector<std::uint64_t>{0, 1});
  CHECK(payloads_of(w.groups.upcoming("g", 1, w.log, none)) == std::vector<std::string>{"c", "d"});
  REQUIRE(w.groups.ack_upto("g", 1, t0, 1).ok());
  CHECK(payloads_of(w.groups.upcoming("g", 1, w.log, none)) == std::vector<std::string>{"c", "d"});
  // A due redelivery goes out first and takes room, and is not named.
  REQUIRE(w.poll("g", 1).deliveries.size() == 2);  // c and d
  REQUIRE(w.groups.nack("g", 1, t0, 2, 1, 0, w.now, w.log).ok());
  w.produce(t0, "e");
  w.produce(t0, "f");
  CHECK(payloads_of(w.groups.upcoming("g", 1, w.log, none)) == std::vector<std::string>{"e", "f"});
  auto one = c;
  one.prefetch = 1;
  w.join("h", 5, one);
  CHECK(payloads_of(w.groups.upcoming("h", 5, w.log, none)) == std::vector<std::string>{"a"});
  // Not members: nothing.
  CHECK(w.groups.upcoming("g", 7, w.log, none).empty());
  CHECK(w.groups.upcoming("x", 1, w.log, none).empty());
  // One holder per group that reads the partition.
  CHECK(w.groups.holders("t", 1) == std::vector<mq_member_id>{{"g", 1}, {"h", 5}});
  w.join("g", 2, c);
  auto held = w.groups.holders("t", 1);
  REQUIRE(held.size() == 2);
  CHECK(held[0] == mq_member_id{"g", 2});  // t1 moved to the second member
  CHECK(w.groups.holders("u", 0).empty());
}

TEST_CASE("mq_groups: a poll that finds nothing parks the member until one of its partitions grows") {
  world w;
  w.topic("t", 2);
  w.join("g", 1, reads({"t"}));
  w.join("g", 2, reads({"t"}));
  w.join("h", 3, reads({"t"}));
  auto empty = w.poll("g", 1);
  CHECK(empty.deliveries.empty());
  CHECK(empty.wait == mq_wait::log_grows);
  CHECK_FALSE(empty.retry_at_ms.has_value());
  CHECK(w.groups.wake("t", 1).empty());  // held by 2 and 3, who are not waiting
  CHECK(w.groups.wake("t", 0) == std::vector<mq_member_id>{{"g", 1}});
  CHECK(w.groups.wake("t", 0).empty());  // woken once
  CHECK(w.poll("h", 3).wait == mq_wait::log_grows);
  w.produce(t1, "x");
  CHECK(w.groups.wake("t", 1) == std::vector<mq_member_id>{{"h", 3}});
  CHECK(w.groups.wake("u", 0).empty());
  CHECK(w.poll("h", 3).deliveries.size() == 1);
}

TEST_CASE("mq_groups: acks move the committed offset over the acked prefix") {
  world w;
  w.topic("t", 1);
  for (int i = 0; i < 5; ++i) w.produce(t0, "p");
  w.join("g", 1, reads({"t"}));
  REQUIRE(w.poll("g", 1).deliveries.size() == 5);
  REQUIRE(w.groups.ack("g", 1, t0, 1, 1).ok());
  REQUIRE(w.groups.ack("g", 1, t0, 3, 1).ok());
  CHECK(w.view("g", t0).committed == 0);
  CHECK(w.view("g", t0).acked == 2);
  REQUIRE(w.groups.ack("g", 1, t0, 0, 1).ok());
  CHECK(w.view("g", t0).committed == 2);
  CHECK(w.view("g", t0).acked == 1);
  CHECK(*w.groups.ack_upto("g", 1, t0, 4) == 2);
  CHECK(w.view("g", t0).committed == 5);
  CHECK(w.view("g", t0).in_flight == 0);
  CHECK(w.groups.ack_upto("g", 1, t0, 4).code() == errc::not_found);
  CHECK(w.groups.ack_upto("g", 2, t0, 4).code() == errc::not_found);
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: what a poll whose answer was lost delivered goes out again at the next poll, and ack_upto never settles it") {
  world w;
  w.topic("t", 1);
  for (int i = 0; i < 4; ++i) w.produce(t0, "p");
  mq_group_config config = reads({"t"});
  config.prefetch = 10;
  w.join("g", 1, config);
  // Poll 1 is answered (offsets 0, 1); poll 2 (offsets 2, 3) is answered
  // into the void: the member never saw it.
  auto first = w.groups.poll("g", 1, 2, 0, w.now, w.log, 1, 0);
  REQUIRE(first.ok());
  CHECK(offsets_of(*first) == std::vector<std::uint64_t>{0, 1});
  auto lost = w.groups.poll("g", 1, 2, 0, w.now, w.log, 2, 1);
  REQUIRE(lost.ok());
  CHECK(offsets_of(*lost) == std::vector<std::uint64_t>{2, 3});
  // An ack_upto the member sends having seen only poll 1 settles 0 and 1,
  // not 2 and 3, though they are in flight to it below the offset named.
  auto settled = w.groups.ack_upto("g", 1, t0, 3, 1);
  REQUIRE(settled.ok());
  CHECK(*settled == 2);
  CHECK(w.view("g", t0).committed == 2);
  CHECK(w.view("g", t0).in_flight == 2);
  // Poll 3, naming poll 1 as the last answered, gets 2 and 3 again at once,
  // as first deliveries: the lost ones never reached the member.
  auto again = w.groups.poll("g", 1, 10, 0, w.now, w.log, 3, 1);
  REQUIRE(again.ok());
  CHECK(offsets_of(*again) == std::vector<std::uint64_t>{2, 3});
  for (auto& d : again->deliveries) CHECK(d.delivery_count == 1);
  CHECK(*w.groups.ack_upto("g", 1, t0, 3, 3) == 2);
  CHECK(w.view("g", t0).committed == 4);
  // A member that does not count its polls (0) is taken at its word.
  w.produce(t0, "p");
  REQUIRE(w.poll("g", 1).deliveries.size() == 1);
  CHECK(*w.groups.ack_upto("g", 1, t0, 4) == 1);
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: an ack of what was not delivered to the member, or under a stale generation, is refused and changes nothing") {
  world w;
  w.topic("t", 2);
  for (int i = 0; i < 3; ++i) w.produce(t0, "p");
  w.join("g", 1, reads({"t"}));
  w.join("g", 2, reads({"t"}));
  REQUIRE(offsets_of(w.poll("g", 1, 2)) == std::vector<std::uint64_t>{0, 1});
  auto before = w.view("g", t0);
  CHECK(w.groups.ack("g", 1, t0, 2, 1).code() == errc::not_found);   // never delivered
  CHECK(w.groups.ack("g", 1, t0, 9, 1).code() == errc::not_found);   // beyond the log
  CHECK(w.groups.ack("g", 1, t0, 0, 7).code() == errc::conflict);    // stale generation
  CHECK(w.groups.ack("g", 2, t0, 0, 1).code() == errc::conflict);    // not its partition
  CHECK(w.groups.ack("g", 3, t0, 0, 1).code() == errc::not_found);   // not a member
  CHECK(w.groups.ack("h", 1, t0, 0, 1).code() == errc::not_found);   // no group
  CHECK(w.groups.ack("g", 1, {"u", 0}, 0, 1).code() == errc::not_found);  // not read
  CHECK(w.groups.nack("g", 1, t0, 2, 1, 0, w.now, w.log).code() == errc::not_found);
  CHECK(w.groups.nack("g", 1, t0, 0, 7, 0, w.now, w.log).code() == errc::conflict);
  CHECK(w.groups.ack_upto("g", 2, t0, 1).code() == errc::conflict);
  CHECK(w.view("g", t0) == before);
  REQUIRE(w.groups.ack("g", 1, t0, 0, 1).ok());
  CHECK(w.groups.ack("g", 1, t0, 0, 1).code() == errc::not_found);  // acked already
  CHECK(w.view("g", t0).committed == 1);
}

TEST_CASE("mq_groups: a delivery whose ack deadline passes goes out again") {
  world w;
  w.topic("t", 1);
  w.produce(t0, "p");
  auto c = reads({"t"});
  c.ack_timeout_ms = 100;
  w.join("g", 1, c);
  auto got = w.poll("g", 1);
  REQUIRE(got.deliveries.size() == 1);
  CHECK(got.deliveries[0].ack_deadline_ms == w.now + 100);
  CHECK(w.poll("g", 1).wait == mq_wait::log_grows);  // in flight: nothing more, parked
  auto early = w.groups.expire_deliveries(w.now + 99, w.log);
  CHECK(early.dead.empty());
  CHECK(early.wake.empty());
  w.now += 100;
  auto expired = w.groups.expire_deliveries(w.now, w.log);
  CHECK(expired.dead.empty());
  CHECK(expired.wake == std::vector<mq_member_id>{{"g", 1}});
  CHECK(w.view("g", t0).redeliver == 1);
  auto again = w.poll("g", 1);
  REQUIRE(again.deliveries.size() == 1);
  CHECK(again.deliveries[0].delivery_count == 2);
  CHECK(again.deliveries[0].ack_deadline_ms == w.now + 100);
  CHECK(w.groups.ack("g", 1, t0, 0, 1).ok());
}

TEST_CASE("mq_groups: a nacked message is due again after its delay") {
  world w;
  w.topic("t", 1);
  w.produce(t0, "a");
  w.produce(t0, "b");
  w.join("g", 1, reads({"t"}));
  REQUIRE(w.poll("g", 1).deliveries.size() == 2);
  CHECK(w.groups.nack("g", 1, t0, 0, 1, -1, w.now, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.nack("g", 1, t0, 0, 1, sluice::master::mq_delay_ms_max + 1, w.now, w.log).code() ==
        errc::invalid_argument);
  auto nacked = w.groups.nack("g", 1, t0, 0, 1, 500, w.now, w.log);
  REQUIRE(nacked.ok());
  CHECK_FALSE(nacked->has_value());
  auto waiting = w.poll("g", 1);
  CHECK(waiting.deliveries.empty());
  CHECK(waiting.retry_at_ms == std::optional<std::int64_t>{w.now + 500});
  w.now += 499;
  CHECK(w.poll("g", 1).deliveries.empty());
  w.now += 1;
  auto due = w.poll("g", 1);
  REQUIRE(due.deliveries.size() == 1);
  CHECK(due.deliveries[0].offset == 0);
  CHECK(due.deliveries[0].delivery_count == 2);
  // Delay 0: due at once; redeliveries come before new messages.
  w.produce(t0, "c");
  REQUIRE(w.groups.nack("g", 1, t0, 1, 1, 0, w.now, w.log).ok());
  CHECK(offsets_of(w.poll("g", 1)) == std::vector<std::uint64_t>{1, 2});
}

TEST_CASE("mq_groups: a message that runs out of deliveries is dead-lettered and counts as acked") {
  world w;
  w.topic("t", 1);
  w.produce(t0, "a", 11);
  w.produce(t0, "b", 12);
  auto c = reads({"t"});
  c.max_deliveries = 2;
  c.ack_timeout_ms = 100;
  w.join("g", 1, c);
  REQUIRE(w.poll("g", 1).deliveries.size() == 2);
  w.now += 100;
  CHECK(w.groups.expire_deliveries(w.now, w.log).dead.empty());
  auto second = w.poll("g", 1);
  REQUIRE(second.deliveries.size() == 2);
  CHECK(second.deliveries[1].delivery_count == 2);
  w.now += 100;
  auto expired = w.groups.expire_deliveries(w.now, w.log);
  REQUIRE(expired.dead.size() == 2);
  CHECK(expired.dead[0].group == "g");
  CHECK(expired.dead[0].partition == t0);
  CHECK(expired.dead[0].shell.payload == "a");
  CHECK(expired.dead[0].shell.size_bytes == 11);
  CHECK(expired.dead[0].delivery_count == 2);
  CHECK(expired.dead[1].shell.offset == 1);
  CHECK(w.view("g", t0).committed == 2);
  CHECK(w.poll("g", 1).deliveries.empty());
  CHECK(w.groups.lag("g", t0, w.log)->messages == 0);

  // By nacks too.
  w.produce(t0, "c");
  REQUIRE(w.poll("g", 1).deliveries.size() == 1);
  CHECK_FALSE(w.groups.nack("g", 1, t0, 2, 1, 0, w.now, w.log)->has_value());
  REQUIRE(w.poll("g", 1).deliveries.size() == 1);
  auto dead = w.groups.nack("g", 1, t0, 2, 1, 0, w.now, w.log);
  REQUIRE(dead.ok());
  REQUIRE(dead->has_value());
  CHECK((*dead)->shell.payload == "c");
  CHECK(w.view("g", t0).committed == 3);
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: seek replays from an offset, by offset or by time, never below the log start") {
  world w;
  w.topic("t", 1);
  for (int i = 0; i < 5; ++i) {
    w.produce(t0, "p" + std::to_string(i));
    w.now += 100;
  }
  // Appended at 1000, 1100, ..., 1400.
  w.join("g", 1, reads({"t"}));
  auto first = w.poll("g", 1);
  REQUIRE(first.deliveries.size() == 5);
  REQUIRE(w.groups.ack_upto("g", 1, t0, 3).ok());
  REQUIRE(w.groups.seek("g", t0, 1, w.log).ok());
  CHECK(w.view("g", t0).committed == 1);
  CHECK(w.view("g", t0).in_flight == 0);
  // The delivery in flight before the seek is forgotten.
  CHECK(w.groups.ack("g", 1, t0, 4, 1).code() == errc::not_found);
  auto replay = w.poll("g", 1);
  CHECK(offsets_of(replay) == std::vector<std::uint64_t>{1, 2, 3, 4});
  CHECK(replay.deliveries[0].delivery_count == 1);
  CHECK(w.groups.seek("g", t0, 6, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.seek("g", t0, 5, w.log).ok());  // the end: only what comes next
  CHECK(w.poll("g", 1).deliveries.empty());
  REQUIRE(w.log.prune(w.now, {{t0, 3}}).payloads.size() == 3);
  CHECK(w.groups.seek("g", t0, 2, w.log).code() == errc::invalid_argument);
  CHECK(w.groups.seek("g", {"t", 1}, 3, w.log).code() == errc::not_found);
  CHECK(w.groups.seek("h", t0, 3, w.log).code() == errc::not_found);
  REQUIRE(w.groups.seek_time("g", t0, 1350, w.log).ok());
  CHECK(w.view("g", t0).committed == 4);
  CHECK(offsets_of(w.poll("g", 1)) == std::vector<std::uint64_t>{4});
  REQUIRE(w.groups.seek_time("g", t0, 0, w.log).ok());  // before the log: its start
  CHECK(w.view("g", t0).committed == 3);
}

TEST_CASE("mq_groups: lag counts the messages and bytes a group has not acked") {
  world w;
  w.topic("t", 1);
  w.join("g", 1, reads({"t"}));
  CHECK(w.groups.lag("g", t0, w.log)->messages == 0);
  for (std::uint64_t s : {10, 20, 30, 40}) w.produce(t0, "p", s);
  auto lag = *w.groups.lag("g", t0, w.log);
  CHECK(lag.messages == 4);
  CHECK(lag.bytes == 100);
  REQUIRE(w.poll("g", 1).deliveries.size() == 4);
  CHECK(w.groups.lag("g", t0, w.log)->messages == 4);  // delivered is not acked
  REQUIRE(w.groups.ack("g", 1, t0, 1, 1).ok());
  lag = *w.groups.lag("g", t0, w.log);
  CHECK(lag.messages == 3);
  CHECK(lag.bytes == 80);
  REQUIRE(w.groups.ack("g", 1, t0, 0, 1).ok());
  lag = *w.groups.lag("g", t0, w.log);
  CHECK(lag.messages == 2);
  CHECK(lag.bytes == 70);
  CHECK(w.groups.lag("h", t0, w.log).code() == errc::not_found);
  CHECK(w.groups.lag("g", t1, w.log).code() == errc::not_found);
}

TEST_CASE("mq_groups: consumed_upto is the lowest committed offset of the groups reading each partition") {
  world w;
  w.topic("t", 1);
  w.topic("u", 1);
  for (int i = 0; i < 3; ++i) w.produce(t0, "t" + std::to_string(i));
  w.produce({"u", 0}, "u0");
  w.join("g", 1, reads({"t"}));
  w.join("h", 2, reads({"t"}));
  CHECK(w.groups.consumed_upto(w.log) == std::map<mq_partition_id, std::uint64_t>{{t0, 0}});
  REQUIRE(w.poll("g", 1).deliveries.size() == 3);
  REQUIRE(w.poll("h", 2).deliveries.size() == 3);
  REQUIRE(w.groups.ack_upto("g", 1, t0, 1).ok());
  REQUIRE(w.groups.ack("h", 2, t0, 0, 1).ok());
  CHECK(w.groups.consumed_upto(w.log) == std::map<mq_partition_id, std::uint64_t>{{t0, 1}});
  auto pruned = w.log.prune(w.now, w.groups.consumed_upto(w.log));
  CHECK(pruned.payloads == std::vector<std::string>{"t0"});
  CHECK(*w.log.start_offset("u", 0) == 0);  // nobody reads u: kept
  // Members may come and go; the committed offsets stay.
  REQUIRE(w.groups.leave("g", 1, w.log).ok());
  REQUIRE(w.groups.leave("h", 2, w.log).ok());
  CHECK(w.groups.consumed_upto(w.log) == std::map<mq_partition_id, std::uint64_t>{{t0, 1}});
}

TEST_CASE("mq_groups: what retention drops before a group acked it counts as acked") {
  world w;
  sluice::master::mq_topic_config c;
  c.max_age_ms = 1000;
  REQUIRE(w.log.create("t", c).ok());
  for (int i = 0; i < 3; ++i) w.produce(t0, "p");
  w.join("g", 1, reads({"t"}));
  REQUIRE(w.poll("g", 1, 1).deliveries.size() == 1);
  w.now += 1000;
  CHECK(w.log.prune(w.now, w.groups.consumed_upto(w.log)).payloads.size() == 3);
  CHECK(w.poll("g", 1).deliveries.empty());
  CHECK(w.view("g", t0).committed == 3);
  CHECK(w.view("g", t0).in_flight == 0);
  CHECK(w.groups.ack("g", 1, t0, 0, 1).code() == errc::not_found);
  CHECK(w.groups.lag("g", t0, w.log)->messages == 0);
  w.produce(t0, "q");
  CHECK(offsets_of(w.poll("g", 1)) == std::vector<std::uint64_t>{3});
  w.groups.check_invariants();
}

TEST_CASE("mq_groups: a new group starts at the log start, or at its end when it asks for the latest") {
  world w;
  w.topic("t", 1);
  w.produce(t0, "old0");
  w.produce(t0, "old1");
  w.join("early", 1, reads({"t"}));
  auto late = reads({"t"});
  late.start = sluice::master::mq_start::latest;
  w.join("late", 1, late);
  CHECK(w.poll("early", 1).deliveries.size() == 2);
  CHECK(w.poll("late", 1).deliveries.empty());
  w.produce(t0, "new");
  CHECK(offsets_of(w.poll("late", 1)) == std::vector<std::uint64_t>{2});
}

TEST_CASE("mq_groups: the window stops a partition mq_window_offsets_max past its committed offset") {
  world w;
  w.topic("t", 1);
  auto window = sluice::master::mq_window_offsets_max;
  for (std::uint64_t i = 0; i <= window; ++i) w.produce(t0, "p", 1);
  auto c = reads({"t"});
  c.prefetch = sluice::master::mq_prefetch_max;
  w.join("g", 1, c);
  std::uint64_t delivered = 0;
  for (;;) {
    auto got = w.poll("g", 1, sluice::master::mq_poll_messages_max);
    if (got.deliveries.empty()) break;
    for (auto& d : got.deliveries) {
      if (d.offset != 0) REQUIRE(w.groups.ack("g", 1, t0, d.offset, d.generation).ok());
    }
    delivered += got.deliveries.size();
  }
  // Offset 0 is still in flight: the window is full.
  CHECK(delivered == window);
  CHECK(w.view("g", t0).next == window);
  REQUIRE(w.groups.ack("g", 1, t0, 0, 1).ok());
  CHECK(w.view("g", t0).committed == window);
  CHECK(offsets_of(w.poll("g", 1)) == std::vector<std::uint64_t>{window});
}

TEST_CASE("mq_groups: a deleted topic leaves its groups, and a deleted group takes its offsets with it") {
  world w;
  w.topic("t", 1);
  w.topic("u", 2);
  w.produce({"u", 0}, "x");
  w.join("g", 1, reads({"t", "u"}));
  REQUIRE(w.poll("g", 1).deliveries.size() == 1);
  w.groups.drain_changes();
  REQUIRE(w.log.remove("u").ok());
  w.groups.topics_changed(w.log);
  CHECK(w.groups.assigned("g", 1) == std::vector<mq_partition_id>{t0});
  CHECK(w.groups.view("g", {"u", 0}).code() == errc::not_found);
  CHECK(w.groups.consumed_upto(w.log).size() == 1);
  auto changes = w.groups.drain_changes();
  REQUIRE(changes.size() == 2);
  CHECK(std::get<sluice::master::mq_offset_removed>(changes[0]).partition == mq_partition_id{"u", 0});
  w.groups.check_invariants();
  // The topic comes back: the group reads it again, from its start.
  w.topic("u", 1);
  w.produce({"u", 0}, "y");
  auto moves = w.groups.topics_changed(w.log);
  REQUIRE(moves.size() == 1);
  CHECK(moves[0].to == std::optional<std::uint64_t>{1});
  CHECK(w.poll("g", 1).deliveries.size() == 1);

  REQUIRE(w.groups.remove("g").ok());
  CHECK(w.groups.list().empty());
  CHECK(w.groups.remove("g").code() == errc::not_found);
  CHECK(w.groups.consumed_upto(w.log).empty());
  CHECK(std::holds_alternative<sluice::master::mq_group_deleted>(w.groups.drain_changes().back()));
}

namespace {

/// A stand-in for the master's durable store, for groups.
struct group_store {
  std::map<std::string, mq_group_config> groups;
  std::map<std::pair<std::string, mq_partition_id>, std::pair<std::uint64_t, std::uint64_t>> offsets;

  void apply(const std::vector<mq_group_change>& changes) {
    for (auto& change : changes) {
      std::visit(sluice::overloaded{
                     [this](const sluice::master::mq_group_created& c) { groups[c.group] = c.config; },
                     [this](const sluice::master::mq_group_deleted& c) {
                       groups.erase(c.group);
                       std::erase_if(offsets, [&c](auto& kv) { return kv.first.first == c.group; });
                     },
                     [this](const sluice::master::mq_offset_changed& c) {
                       offsets[{c.group, c.partition}] = {c.committed, c.generation};
                     },
                     [this](const sluice::master::mq_offset_removed& c) { offsets.erase({c.group, c.partition}); },
                 },
                 change);
    }
  }
  void restore(mq_groups& out) const {
    for (auto& [name, config] : groups) REQUIRE(out.restore_group(name, config).ok());
    for (auto& [at, v] : offsets) REQUIRE(out.restore_offset(at.first, at.second, v.first, v.second).ok());
  }
};

}  // namespace

TEST_CASE("mq_groups: restore from the change records keeps committed offsets and generations, and redelivers what was unacked") {
  world w;
  group_store store;
  w.topic("t", 2);
  for (int i = 0; i < 4; ++i) {
    w.produce(t0, "p");
    w.produce(t1, "q");
  }
  w.join("g", 1, reads({"t"}));
  w.join("g", 2, reads({"t"}));
  w.join("gone", 1, reads({"t"}));
  REQUIRE(w.groups.remove("gone").ok());
  REQUIRE(w.poll("g", 1).deliveries.size() == 4);
  store.apply(w.groups.drain_changes());
  REQUIRE(w.poll("g", 2).deliveries.size() == 4);
  REQUIRE(w.groups.ack_upto("g", 1, t0, 1).ok());
  REQUIRE(w.groups.ack("g", 1, t0, 3, 1).ok());  // above committed: not kept
  REQUIRE(w.groups.ack_upto("g", 2, t1, 3).ok());
  REQUIRE(w.groups.leave("g", 2, w.log).ok());  // t1 moves: generation 3
  store.apply(w.groups.drain_changes());

  mq_groups restored;
  store.restore(restored);
  CHECK(restored.list() == std::vector<std::string>{"g"});
  CHECK(restored.drain_changes().empty());
  for (auto& at : {t0, t1}) {
    auto before = w.view("g", at);
    auto after = *restored.view("g", at);
    CHECK(after.committed == before.committed);
    CHECK(after.generation == before.generation);
    CHECK_FALSE(after.member.has_value());
  }
  CHECK(restored.consumed_upto(w.log) == w.groups.consumed_upto(w.log));
  // Members join again; generations only grow; every unacked message of
  // t0 goes out again (at least once), nothing below the committed offset.
  auto moves = *restored.join("g", 5, reads({"t"}), w.now + 100, w.now, w.log);
  REQUIRE(moves.size() == 2);
  CHECK(moves[1].generation > w.view("g", t1).generation);
  auto got = *restored.poll("g", 5, 100, 0, w.now, w.log);
  CHECK(offsets_of(got) == std::vector<std::uint64_t>{2, 3});
  restored.check_invariants();
  CHECK(restored.restore_group("g", reads({"t"})).code() == errc::invalid_argument);
  CHECK(restored.restore_offset("x", t0, 0, 0).code() == errc::invalid_argument);
  CHECK(restored.restore_offset("g", {"u", 0}, 0, 0).code() == errc::invalid_argument);
  CHECK(restored.restore_offset("g", t0, 0, 0).code() == errc::invalid_argument);
}

namespace {

/// What the property test knows was acked, per (group, partition):
/// everything below `floor` and the offsets in `acked`.
struct acked_model {
  std::uint64_t floor = 0;
  std::set<std::uint64_t> acked;
  bool has(std::uint64_t o) const { return o < floor || acked.contains(o); }
  void add(std::uint64_t o) {
    if (o >= floor) acked.insert(o);
  }
};

struct sent {
  std::string group;
  std::uint64_t session;
  mq_delivery delivery;
};

}  // namespace

TEST_CASE("mq_groups: random joins, leaves, polls, acks, seeks, appends and expiries keep the invariants and persist") {
  const std::vector<std::string> group_names{"g", "h"};
  const std::map<std::string, mq_group_config> configs{{"g", reads({"a", "b"})}, {"h", reads({"b"})}};
  const std::vector<mq_partition_id> partitions{a0, a1, a2, b0, b1};
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    sluice::rng r{seed};
    world w;
    w.now = 0;
    w.topic("a", 3);
    w.topic("b", 2);
    for (auto& [name, config] : configs) {
      auto c = config;
      c.prefetch = 4;
      c.ack_timeout_ms = 50;
      c.max_deliveries = 3;
      w.join(name, 1, c);
    }
    auto config_of = [&w](const std::string& g) { return *w.groups.config_of(g); };
    std::map<std::pair<std::string, mq_partition_id>, acked_model> model;
    std::vector<sent> outstanding;
    group_store store;
    auto dead = [&model](const std::vector<sluice::master::mq_dead_letter>& letters) {
      for (auto& d : letters) model[{d.group, d.partition}].add(d.shell.offset);
    };
    for (int step = 0; step < 3000; ++step) {
      auto& group = group_names[r.uniform(group_names.size())];
      auto session = 1 + r.uniform(4);
      switch (r.uniform(12)) {
        case 0:
          (void)w.groups.join(group, session, config_of(group), w.now + 20 + static_cast<std::int64_t>(r.uniform(200)),
                              w.now, w.log);
          break;
        case 1: (void)w.groups.leave(group, session, w.log); break;
        case 2: (void)w.groups.heartbeat(group, session, w.now + static_cast<std::int64_t>(r.uniform(200))); break;
        case 3:
          w.now += static_cast<std::int64_t>(r.uniform(30));
          (void)w.groups.expire(w.now, w.log);
          dead(w.groups.expire_deliveries(w.now, w.log).dead);
          break;
        case 4:
        case 5: {
          auto& at = partitions[r.uniform(partitions.size())];
          w.produce(at, "m", 1 + r.uniform(100));
          (void)w.groups.wake(at.topic, at.partition);
          break;
        }
        case 6:
        case 7: {
          auto got = w.groups.poll(group, session, 1 + r.uniform(6), r.uniform(300), w.now, w.log);
          if (!got) break;
          for (auto& d : got->deliveries) {
            // Nothing acked goes out again (unless sought back over).
            CHECK_FALSE(model[{group, d.partition}].has(d.offset));
            outstanding.push_back(sent{group, session, d});
          }
          break;
        }
        case 8:
        case 9: {
          if (outstanding.empty()) break;
          auto i = r.uniform(outstanding.size());
          auto s = outstanding[i];
          outstanding.erase(outstanding.begin() + static_cast<std::ptrdiff_t>(i));
          auto& d = s.delivery;
          if (r.chance(1, 4)) {
            auto out = w.groups.nack(s.group, s.session, d.partition, d.offset, d.generation,
                                     static_cast<std::int64_t>(r.uniform(60)), w.now, w.log);
            if (out.ok() && out->has_value()) dead({**out});
          } else if (w.groups.ack(s.group, s.session, d.partition, d.offset, d.generation).ok()) {
            model[{s.group, d.partition}].add(d.offset);
          }
          break;
        }
        case 10: {
          if (!r.chance(1, 10)) break;
          auto& at = partitions[r.uniform(partitions.size())];
          if (!w.groups.view(group, at).ok()) break;
          auto start = *w.log.start_offset(at.topic, at.partition);
          auto end = *w.log.end_offset(at.topic, at.partition);
          auto to = start + r.uniform(end - start + 1);
          REQUIRE(w.groups.seek(group, at, to, w.log).ok());
          model[{group, at}] = acked_model{to, {}};
          break;
        }
        case 11: (void)w.log.prune(w.now, w.groups.consumed_upto(w.log)); break;
      }
      w.groups.check_invariants();
      if (r.chance(1, 3)) store.apply(w.groups.drain_changes());  // syncs now and then
      for (auto& g : group_names) {
        for (auto& at : partitions) {
          auto v = w.groups.view(g, at);
          if (!v) continue;
          // At most one holder, and it is the one the partition names.
          int holders = 0;
          for (std::uint64_t s = 1; s <= 4; ++s) {
            auto held = w.groups.assigned(g, s);
            if (std::find(held.begin(), held.end(), at) == held.end()) continue;
            ++holders;
            CHECK(v->member == std::optional<std::uint64_t>{s});
          }
          CHECK(holders <= 1);
          // Every appended offset is delivered, acked or still pending.
          CHECK(v->committed <= v->next);
          CHECK(v->next <= *w.log.end_offset(at.topic, at.partition));
          CHECK(v->acked + v->in_flight + v->redeliver == v->next - v->committed);
          if (step % 50 != 0) continue;
          auto& m = model[{g, at}];
          std::size_t known_below = 0, known_above = 0;
          for (auto o : m.acked) (o < v->committed ? known_below : known_above) += 1;
          CHECK(m.floor <= v->committed);
          CHECK(known_below == v->committed - m.floor);  // all below committed was acked
          CHECK(known_above == v->acked);                 // and the acks above it are ours
        }
      }
    }
    // What was persisted gives back every committed offset and generation.
    store.apply(w.groups.drain_changes());
    mq_groups restored;
    store.restore(restored);
    for (auto& g : group_names) {
      for (auto& at : partitions) {
        auto before = w.groups.view(g, at);
        auto after = restored.view(g, at);
        REQUIRE(after.ok() == before.ok());
        if (!before) continue;
        CHECK(after->committed == before->committed);
        CHECK(after->generation == before->generation);
      }
    }
  }
}
