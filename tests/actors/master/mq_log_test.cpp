// The master's MQ topics and partition logs, tested without actors:
// mq_log is pure bookkeeping.

#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "actors/master/mq_log.hpp"
#include "runtime/overloaded.hpp"

namespace {

using sluice::errc;
using sluice::master::mq_full_policy;
using sluice::master::mq_log;
using sluice::master::mq_log_change;
using sluice::master::mq_message;
using sluice::master::mq_partition_id;
using sluice::master::mq_shell;
using sluice::master::mq_topic_config;

mq_topic_config topic_of(std::uint32_t partitions) {
  mq_topic_config c;
  c.partitions = partitions;
  return c;
}

mq_message message(std::string payload, std::uint64_t size = 10) {
  mq_message m;
  m.payload = std::move(payload);
  m.size_bytes = size;
  return m;
}

mq_message with_id(std::string payload, std::uint64_t producer, std::string id) {
  auto m = message(std::move(payload));
  m.producer = producer;
  m.message_id = std::move(id);
  return m;
}

mq_message to_partition(std::string payload, std::uint32_t partition, std::uint64_t size = 10) {
  auto m = message(std::move(payload), size);
  m.partition = partition;
  return m;
}

/// Every payload key a partition holds, oldest first.
std::vector<std::string> payloads_of(const mq_log& log, const std::string& topic, std::uint32_t partition) {
  std::vector<std::string> out;
  auto start = *log.start_offset(topic, partition);
  auto end = *log.end_offset(topic, partition);
  for (auto o = start; o < end; ++o) out.push_back(log.find(topic, partition, o)->payload);
  return out;
}

/// A stand-in for the master's durable store: applies change records the
/// way a persister would, and restores a log from what it holds.
struct log_store {
  std::map<std::string, mq_topic_config> topics;
  std::map<std::pair<std::string, std::uint32_t>, std::uint64_t> starts;
  std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>, mq_shell> shells;

  void erase_shells(const std::string& topic, std::uint32_t partition, std::uint64_t below) {
    auto it = shells.lower_bound({topic, partition, 0});
    while (it != shells.end() && std::get<0>(it->first) == topic && std::get<1>(it->first) == partition &&
           std::get<2>(it->first) < below) {
      it = shells.erase(it);
    }
  }

  void apply(const std::vector<mq_log_change>& changes) {
    for (auto& change : changes) {
      std::visit(sluice::overloaded{
                     [this](const sluice::master::mq_topic_created& c) { topics[c.topic] = c.config; },
                     [this](const sluice::master::mq_topic_deleted& c) {
                       auto& config = topics.at(c.topic);
                       for (std::uint32_t p = 0; p < config.partitions; ++p) {
                         erase_shells(c.topic, p, UINT64_MAX);
                         starts.erase({c.topic, p});
                       }
                       topics.erase(c.topic);
                     },
                     [this](const sluice::master::mq_shell_appended& c) {
                       shells[{c.topic, c.partition, c.shell.offset}] = c.shell;
                     },
                     [this](const sluice::master::mq_log_start_moved& c) {
                       starts[{c.topic, c.partition}] = c.start;
                       erase_shells(c.topic, c.partition, c.start);
                     },
                 },
                 change);
    }
  }

  void restore(mq_log& log) const {
    for (auto& [name, config] : topics) REQUIRE(log.restore_topic(name, config).ok());
    for (auto& [at, start] : starts) REQUIRE(log.restore_log_start(at.first, at.second, start).ok());
    for (auto& [at, shell] : shells) REQUIRE(log.restore_shell(std::get<0>(at), std::get<1>(at), shell).ok());
    log.restore_done();
  }
};

/// Everything a log shows, as text, to compare two logs.
std::string dump(const mq_log& log) {
  std::string out;
  for (auto& name : log.list()) {
    auto info = *log.describe(name);
    out += name + ":";
    for (std::uint32_t p = 0; p < info.partitions.size(); ++p) {
      auto& pi = info.partitions[p];
      out += " [" + std::to_string(pi.start) + "," + std::to_string(pi.end) + ") " + std::to_string(pi.bytes) + "B";
      for (auto o = pi.start; o < pi.end; ++o) {
        auto* s = log.find(name, p, o);
        out += " " + std::to_string(s->offset) + "=" + s->payload + "/" + std::to_string(s->size_bytes) + "/" +
               std::to_string(s->producer) + "/" + s->message_id + "/" + std::to_string(s->append_ms);
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("mq_log: topic names and configs out of range are refused") {
  mq_log log;
  CHECK(log.create("", topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.create(std::string(201, 'a'), topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.create(std::string(200, 'a'), topic_of(1)).ok());
  CHECK(log.create("a/b", topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.create("a b", topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.create("Az09._-", topic_of(1)).ok());

  auto refused = [&log](auto change) {
    auto c = topic_of(1);
    change(c);
    return log.create("t", c).code() == errc::invalid_argument;
  };
  CHECK(refused([](mq_topic_config& c) { c.partitions = 0; }));
  CHECK(refused([](mq_topic_config& c) { c.partitions = sluice::master::mq_partitions_max + 1; }));
  CHECK(refused([](mq_topic_config& c) { c.payload_replicas = 0; }));
  CHECK(refused([](mq_topic_config& c) { c.payload_replicas = 9; }));
  CHECK(refused([](mq_topic_config& c) { c.max_message_bytes = 0; }));
  CHECK(refused([](mq_topic_config& c) { c.max_message_bytes = sluice::master::mq_message_bytes_max + 1; }));
  CHECK(refused([](mq_topic_config& c) {
    c.max_bytes = 100;
    c.max_message_bytes = 101;
  }));
  CHECK(refused([](mq_topic_config& c) { c.max_messages = sluice::master::mq_partition_shells_max + 1; }));
  CHECK(refused([](mq_topic_config& c) { c.max_age_ms = -1; }));
  CHECK(refused([](mq_topic_config& c) { c.full = static_cast<mq_full_policy>(7); }));
  CHECK(refused([](mq_topic_config& c) { c.dedupe_entries_max = 10; }));
  CHECK(refused([](mq_topic_config& c) { c.dedupe_window_ms = 1000; }));
  CHECK(refused([](mq_topic_config& c) {
    c.dedupe_window_ms = 1000;
    c.dedupe_entries_max = sluice::master::mq_dedupe_entries_max + 1;
  }));
  CHECK(log.list().size() == 2);
}

TEST_CASE("mq_log: create is idempotent with the same config and a conflict with another") {
  mq_log log;
  CHECK(*log.create("t", topic_of(4)) == true);
  CHECK(*log.create("t", topic_of(4)) == false);
  CHECK(log.create("t", topic_of(2)).code() == errc::conflict);
  auto other = topic_of(4);
  other.full = mq_full_policy::reject;
  CHECK(log.create("t", other).code() == errc::conflict);
  CHECK(log.describe("t")->config == topic_of(4));
  CHECK(log.describe("t")->partitions.size() == 4);
  CHECK(log.describe("nope").code() == errc::not_found);
}

TEST_CASE("mq_log: the topic table holds mq_topics_max topics") {
  mq_log log;
  for (std::size_t i = 0; i < sluice::master::mq_topics_max; ++i) {
    REQUIRE(log.create("t" + std::to_string(i), topic_of(1)).ok());
  }
  CHECK(log.create("one-more", topic_of(1)).code() == errc::overloaded);
  // The same config again is no new topic: still fine.
  CHECK(log.create("t0", topic_of(1)).ok());
  REQUIRE(log.remove("t0").ok());
  CHECK(log.create("one-more", topic_of(1)).ok());
  CHECK(log.list().size() == sluice::master::mq_topics_max);
}

TEST_CASE("mq_log: the dedupe windows of all topics together are bounded") {
  mq_log log;
  auto c = topic_of(1);
  c.dedupe_window_ms = 1000;
  c.dedupe_entries_max = sluice::master::mq_dedupe_entries_max;
  auto topics = sluice::master::mq_dedupe_entries_total_max / sluice::master::mq_dedupe_entries_max;
  for (std::uint64_t i = 0; i < topics; ++i) REQUIRE(log.create("t" + std::to_string(i), c).ok());
  auto small = c;
  small.dedupe_entries_max = 1;
  CHECK(log.create("more", small).code() == errc::overloaded);
  CHECK(log.create("no-dedupe", topic_of(1)).ok());
  REQUIRE(log.remove("t0").ok());
  CHECK(log.create("more", small).ok());
}

TEST_CASE("mq_log: list is in name order and delete returns every payload the topic held") {
  mq_log log;
  REQUIRE(log.create("b", topic_of(2)).ok());
  REQUIRE(log.create("a", topic_of(1)).ok());
  CHECK(log.list() == std::vector<std::string>{"a", "b"});
  REQUIRE(log.append("b", to_partition("p0", 0), 1).ok());
  REQUIRE(log.append("b", to_partition("p1", 1), 1).ok());
  REQUIRE(log.append("b", to_partition("p2", 0), 1).ok());
  CHECK(log.shell_count() == 3);
  auto freed = log.remove("b");
  REQUIRE(freed.ok());
  CHECK(*freed == std::vector<std::string>{"p0", "p2", "p1"});
  CHECK(log.shell_count() == 0);
  CHECK(log.list() == std::vector<std::string>{"a"});
  CHECK(log.remove("b").code() == errc::not_found);
  CHECK(log.append("b", message("x"), 1).code() == errc::not_found);
}

TEST_CASE("mq_log: offsets are contiguous per partition from 0") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(2)).ok());
  for (std::uint64_t i = 0; i < 5; ++i) {
    auto a = log.append("t", to_partition("a" + std::to_string(i), 0), 1);
    REQUIRE(a.ok());
    CHECK(a->partition == 0);
    CHECK(a->offset == i);
  }
  auto b = log.append("t", to_partition("b0", 1), 1);
  CHECK(b->offset == 0);
  CHECK(*log.end_offset("t", 0) == 5);
  CHECK(*log.end_offset("t", 1) == 1);
  CHECK(log.find("t", 0, 3)->payload == "a3");
  CHECK(log.find("t", 0, 5) == nullptr);
  CHECK(log.end_offset("t", 2).code() == errc::invalid_argument);
  CHECK(log.end_offset("u", 0).code() == errc::not_found);
}

TEST_CASE("mq_log: messages with neither key nor partition go round-robin") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(3)).ok());
  std::vector<std::uint32_t> seen;
  for (int i = 0; i < 7; ++i) seen.push_back(log.append("t", message("m" + std::to_string(i)), 1)->partition);
  CHECK(seen == std::vector<std::uint32_t>{0, 1, 2, 0, 1, 2, 0});
  // Explicit partitions do not move the cursor.
  REQUIRE(log.append("t", to_partition("x", 0), 1).ok());
  CHECK(log.append("t", message("next"), 1)->partition == 1);
}

TEST_CASE("mq_log: a key always falls in the same partition, by a hash that never changes") {
  // XXH64 with seed 0, modulo the partition count: producers compute it
  // too, so these values are pinned.
  CHECK(mq_log::partition_of_key("user-42", 16) == 1);   // XXH64 0x397e9d3a76af7c81
  CHECK(mq_log::partition_of_key("user-43", 16) == 11);  // XXH64 0xbcf71fd8c0c70e7b
  CHECK(mq_log::partition_of_key("", 7) == 6);           // XXH64 0xef46db3751d8e999
  mq_log one, two;
  REQUIRE(one.create("t", topic_of(16)).ok());
  REQUIRE(two.create("t", topic_of(16)).ok());
  REQUIRE(two.append("t", message("warm-up"), 1).ok());  // moves the round-robin cursor only
  std::set<std::uint32_t> used;
  for (int i = 0; i < 64; ++i) {
    auto m = message("m");
    m.key = "key-" + std::to_string(i);
    auto a = one.append("t", m, 1);
    auto b = two.append("t", m, 1);
    REQUIRE(a.ok());
    CHECK(a->partition == b->partition);
    CHECK(a->partition == mq_log::partition_of_key(m.key, 16));
    CHECK(one.append("t", m, 2)->partition == a->partition);
    used.insert(a->partition);
  }
  CHECK(used.size() > 8);  // keys spread
  // An explicit partition wins over the key; one out of range is refused.
  auto m = to_partition("m", 5);
  m.key = "user-42";
  CHECK(one.append("t", m, 1)->partition == 5);
  CHECK(one.append("t", to_partition("m", 16), 1).code() == errc::invalid_argument);
}

TEST_CASE("mq_log: a message id seen inside the dedupe window returns the first offset and appends nothing") {
  mq_log log;
  auto c = topic_of(2);
  c.dedupe_window_ms = 1000;
  c.dedupe_entries_max = 100;
  REQUIRE(log.create("t", c).ok());
  auto first = log.append("t", with_id("p1", 7, "m1"), 100);
  REQUIRE(first.ok());
  CHECK_FALSE(first->duplicate);
  auto retry = log.append("t", with_id("p1-retry", 7, "m1"), 1099);
  REQUIRE(retry.ok());
  CHECK(retry->duplicate);
  CHECK(retry->partition == first->partition);
  CHECK(retry->offset == first->offset);
  CHECK(log.shell_count() == 1);
  // Another producer with the same id, or the same producer with another
  // id, is another message.
  CHECK_FALSE(log.append("t", with_id("p2", 8, "m1"), 1099)->duplicate);
  CHECK_FALSE(log.append("t", with_id("p3", 7, "m2"), 1099)->duplicate);
  // Messages without an id are never deduplicated.
  CHECK_FALSE(log.append("t", message("p4"), 1099)->duplicate);
  CHECK_FALSE(log.append("t", message("p4"), 1099)->duplicate);
  CHECK(log.shell_count() == 5);
  // The changes hold the one append, not the retry.
  auto changes = log.drain_changes();
  CHECK(changes.size() == 1 + 5);
}

TEST_CASE("mq_log: the same message id outside the dedupe window is appended again") {
  mq_log log;
  auto c = topic_of(1);
  c.dedupe_window_ms = 1000;
  c.dedupe_entries_max = 2;
  REQUIRE(log.create("t", c).ok());
  REQUIRE(log.append("t", with_id("p1", 7, "m1"), 100).ok());
  auto late = log.append("t", with_id("p1", 7, "m1"), 1100);
  REQUIRE(late.ok());
  CHECK_FALSE(late->duplicate);
  CHECK(late->offset == 1);
  // Now the window holds m1 (at 1100); it remembers at most 2 ids, so
  // after two more the oldest is forgotten though still inside the time.
  CHECK(log.append("t", with_id("x", 7, "m1"), 1200)->duplicate);
  REQUIRE(log.append("t", with_id("p2", 7, "m2"), 1200).ok());
  REQUIRE(log.append("t", with_id("p3", 7, "m3"), 1200).ok());
  CHECK(log.append("t", with_id("p3", 7, "m3"), 1200)->duplicate);
  CHECK_FALSE(log.append("t", with_id("p1", 7, "m1"), 1200)->duplicate);
}

TEST_CASE("mq_log: bad messages are refused with invalid_argument") {
  mq_log log;
  auto c = topic_of(1);
  c.max_message_bytes = 1000;
  REQUIRE(log.create("t", c).ok());
  CHECK(log.append("t", message("p", 1000), 1).ok());
  CHECK(log.append("t", message("p", 1001), 1).code() == errc::invalid_argument);
  CHECK(log.append("t", message("", 1), 1).code() == errc::invalid_argument);
  CHECK(log.append("t", message(std::string(4097, 'k'), 1), 1).code() == errc::invalid_argument);
  CHECK(log.append("t", with_id("p", 1, std::string(257, 'i')), 1).code() == errc::invalid_argument);
  auto keyed = message("p");
  keyed.key = std::string(1025, 'k');
  CHECK(log.append("t", keyed, 1).code() == errc::invalid_argument);
  CHECK(log.shell_count() == 1);
}

TEST_CASE("mq_log: a full partition refuses with overloaded under block and reject, until a prune makes room") {
  for (auto policy : {mq_full_policy::block, mq_full_policy::reject}) {
    CAPTURE(static_cast<int>(policy));
    mq_log log;
    auto c = topic_of(2);
    c.max_messages = 2;
    c.max_bytes = 100;
    c.max_message_bytes = 100;
    c.full = policy;
    REQUIRE(log.create("t", c).ok());
    REQUIRE(log.append("t", to_partition("a", 0), 1).ok());
    REQUIRE(log.append("t", to_partition("b", 0), 1).ok());
    auto full = log.append("t", to_partition("c", 0), 1);
    CHECK(full.code() == errc::overloaded);
    // The other partition has its own limits.
    CHECK(log.append("t", to_partition("d", 1, 95), 1).ok());
    CHECK(log.append("t", to_partition("e", 1, 6), 1).code() == errc::overloaded);
    CHECK(log.append("t", to_partition("e", 1, 5), 1).ok());
    CHECK(payloads_of(log, "t", 0) == std::vector<std::string>{"a", "b"});

    // A group consumed partition 0 up to offset 1: that frees a.
    auto pruned = log.prune(2, {{mq_partition_id{"t", 0}, 1}, {mq_partition_id{"t", 1}, 0}});
    CHECK(pruned.payloads == std::vector<std::string>{"a"});
    CHECK(pruned.topics == std::vector<std::string>{"t"});
    auto retried = log.append("t", to_partition("c", 0), 3);
    REQUIRE(retried.ok());
    CHECK(retried->offset == 2);
    CHECK(payloads_of(log, "t", 0) == std::vector<std::string>{"b", "c"});
  }
}

TEST_CASE("mq_log: drop_oldest drops the oldest shells to make room and returns them") {
  mq_log log;
  auto c = topic_of(1);
  c.max_messages = 3;
  c.max_bytes = 100;
  c.max_message_bytes = 100;
  c.full = mq_full_policy::drop_oldest;
  REQUIRE(log.create("t", c).ok());
  for (auto p : {"a", "b", "c"}) REQUIRE(log.append("t", message(p, 10), 1).ok());
  // max_messages: one goes.
  auto d = log.append("t", message("d", 10), 1);
  REQUIRE(d.ok());
  CHECK(d->offset == 3);
  CHECK(d->dropped == std::vector<std::string>{"a"});
  // max_bytes: 30 held, 90 more needs two to go.
  auto e = log.append("t", message("e", 90), 1);
  REQUIRE(e.ok());
  CHECK(e->dropped == std::vector<std::string>{"b", "c"});
  CHECK(payloads_of(log, "t", 0) == std::vector<std::string>{"d", "e"});
  CHECK(*log.start_offset("t", 0) == 3);
  CHECK(log.describe("t")->partitions[0].bytes == 100);
  // A message the size of max_bytes empties the partition.
  auto f = log.append("t", message("f", 100), 1);
  CHECK(f->dropped == std::vector<std::string>{"d", "e"});
  CHECK(f->offset == 5);
}

TEST_CASE("mq_log: prune frees what every group consumed, and keeps partitions no group reads") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(2)).ok());
  REQUIRE(log.create("u", topic_of(1)).ok());
  for (int i = 0; i < 4; ++i) {
    REQUIRE(log.append("t", to_partition("t0-" + std::to_string(i), 0), 1).ok());
    REQUIRE(log.append("t", to_partition("t1-" + std::to_string(i), 1), 1).ok());
    REQUIRE(log.append("u", message("u-" + std::to_string(i)), 1).ok());
  }
  log.drain_changes();
  auto pruned = log.prune(10, {{mq_partition_id{"t", 0}, 3}, {mq_partition_id{"t", 1}, 0}});
  CHECK(pruned.payloads == std::vector<std::string>{"t0-0", "t0-1", "t0-2"});
  CHECK(pruned.topics == std::vector<std::string>{"t"});
  CHECK(*log.start_offset("t", 0) == 3);
  CHECK(*log.start_offset("t", 1) == 0);
  CHECK(*log.start_offset("u", 0) == 0);
  // The prune is recorded as one move of the log start.
  auto changes = log.drain_changes();
  REQUIRE(changes.size() == 1);
  auto& moved = std::get<sluice::master::mq_log_start_moved>(changes[0]);
  CHECK(moved.topic == "t");
  CHECK(moved.partition == 0);
  CHECK(moved.start == 3);
  // Nothing more to free: nothing changes.
  CHECK(log.prune(10, {{mq_partition_id{"t", 0}, 3}}).payloads.empty());
  CHECK(log.drain_changes().empty());
}

TEST_CASE("mq_log: prune drops shells past max_age whatever was consumed") {
  mq_log log;
  auto c = topic_of(1);
  c.max_age_ms = 1000;
  REQUIRE(log.create("t", c).ok());
  REQUIRE(log.append("t", message("a"), 100).ok());
  REQUIRE(log.append("t", message("b"), 500).ok());
  REQUIRE(log.append("t", message("c"), 900).ok());
  CHECK(log.prune(1099, {}).payloads.empty());
  CHECK(log.prune(1100, {{mq_partition_id{"t", 0}, 0}}).payloads == std::vector<std::string>{"a"});
  CHECK(log.prune(1900, {}).payloads == std::vector<std::string>{"b", "c"});
  CHECK(*log.start_offset("t", 0) == 3);
}

TEST_CASE("mq_log: a log restored over its count and byte limits is trimmed by the next prune") {
  // Limits are enforced at append; a prune enforces them too, for a store
  // written by a build with other limits.
  mq_log log;
  auto c = topic_of(1);
  c.max_messages = 2;
  c.max_bytes = 25;
  c.max_message_bytes = 10;
  REQUIRE(log.restore_topic("t", c).ok());
  for (std::uint64_t i = 0; i < 4; ++i) {
    REQUIRE(log.restore_shell("t", 0, mq_shell{i, "p" + std::to_string(i), 10, 1, {}, 1}).ok());
  }
  CHECK(log.prune(2, {}).payloads == std::vector<std::string>{"p0", "p1"});
  c.max_messages = 0;
  mq_log bytes;
  REQUIRE(bytes.restore_topic("t", c).ok());
  for (std::uint64_t i = 0; i < 4; ++i) {
    REQUIRE(bytes.restore_shell("t", 0, mq_shell{i, "p" + std::to_string(i), 10, 1, {}, 1}).ok());
  }
  CHECK(bytes.prune(2, {}).payloads == std::vector<std::string>{"p0", "p1"});
  CHECK(bytes.describe("t")->partitions[0].bytes == 20);
}

TEST_CASE("mq_log: offsets are never reused, even after every shell was dropped") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(1)).ok());
  for (int i = 0; i < 3; ++i) REQUIRE(log.append("t", message("p"), 1).ok());
  CHECK(log.prune(1, {{mq_partition_id{"t", 0}, 3}}).payloads.size() == 3);
  CHECK(*log.start_offset("t", 0) == 3);
  CHECK(*log.end_offset("t", 0) == 3);
  CHECK(log.append("t", message("q"), 1)->offset == 3);
  // Also after a restart.
  log_store store;
  store.apply(log.drain_changes());
  CHECK(log.prune(1, {{mq_partition_id{"t", 0}, 4}}).payloads.size() == 1);
  store.apply(log.drain_changes());
  mq_log again;
  store.restore(again);
  CHECK(*again.start_offset("t", 0) == 4);
  CHECK(again.append("t", message("r"), 1)->offset == 4);
}

TEST_CASE("mq_log: lag inputs give the log start and end, bytes between offsets and offsets by time") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(1)).ok());
  for (std::uint64_t i = 0; i < 5; ++i) REQUIRE(log.append("t", message("p", 10 * (i + 1)), 100 * i).ok());
  // Sizes 10, 20, 30, 40, 50 at times 0, 100, 200, 300, 400.
  CHECK(*log.bytes_between("t", 0, 0, 5) == 150);
  CHECK(*log.bytes_between("t", 0, 1, 3) == 50);
  CHECK(*log.bytes_between("t", 0, 3, 3) == 0);
  CHECK(*log.bytes_between("t", 0, 4, 99) == 50);
  CHECK(*log.bytes_between("t", 0, 3, 1) == 0);
  REQUIRE(log.prune(500, {{mq_partition_id{"t", 0}, 2}}).payloads.size() == 2);
  CHECK(*log.bytes_between("t", 0, 0, 5) == 120);  // clamped to the log start
  CHECK(*log.start_offset("t", 0) == 2);
  CHECK(*log.offset_at_time("t", 0, 0) == 2);
  CHECK(*log.offset_at_time("t", 0, 250) == 3);
  CHECK(*log.offset_at_time("t", 0, 300) == 3);
  CHECK(*log.offset_at_time("t", 0, 401) == 5);
  // A clock that steps back is clamped: append times never decrease.
  REQUIRE(log.append("t", message("late", 1), 50).ok());
  CHECK(log.find("t", 0, 5)->append_ms == 400);
  CHECK(log.bytes_between("t", 1, 0, 1).code() == errc::invalid_argument);
  CHECK(log.offset_at_time("x", 0, 0).code() == errc::not_found);
}

TEST_CASE("mq_log: append_batch gives one result per message") {
  mq_log log;
  auto c = topic_of(2);
  c.max_message_bytes = 100;
  REQUIRE(log.create("t", c).ok());
  std::vector<mq_message> batch{to_partition("a", 0), to_partition("b", 1, 101), to_partition("c", 1),
                                to_partition("d", 2)};
  auto out = log.append_batch("t", batch, 1);
  REQUIRE(out.ok());
  REQUIRE(out->size() == 4);
  CHECK((*out)[0].ok());
  CHECK((*out)[1].code() == errc::invalid_argument);
  CHECK((*out)[2]->offset == 0);
  CHECK((*out)[2]->partition == 1);
  CHECK((*out)[3].code() == errc::invalid_argument);
  CHECK(log.append_batch("u", batch, 1).code() == errc::not_found);
  std::vector<mq_message> big(sluice::master::mq_append_batch_max + 1, message("p"));
  CHECK(log.append_batch("t", big, 1).code() == errc::invalid_argument);
  CHECK(log.shell_count() == 2);
  big.pop_back();
  REQUIRE(log.append_batch("t", big, 1).ok());
  CHECK(log.shell_count() == 2 + sluice::master::mq_append_batch_max);
}

TEST_CASE("mq_log: a partition holds at most mq_partition_shells_max shells") {
  mq_log log;
  REQUIRE(log.create("t", topic_of(1)).ok());
  auto m = message("p", 1);
  for (std::uint64_t i = 0; i < sluice::master::mq_partition_shells_max; ++i) {
    REQUIRE(log.append("t", m, 1).ok());
    if (i % 4096 == 0) log.drain_changes();
  }
  CHECK(log.append("t", m, 1).code() == errc::overloaded);
  CHECK(log.prune(1, {{mq_partition_id{"t", 0}, 1}}).payloads.size() == 1);
  CHECK(log.append("t", m, 1).ok());
}

TEST_CASE("mq_log: restore from the change records reproduces the same log") {
  mq_log log;
  log_store store;
  auto c = topic_of(3);
  c.dedupe_window_ms = 10'000;
  c.dedupe_entries_max = 100;
  c.max_messages = 4;
  c.full = mq_full_policy::drop_oldest;
  REQUIRE(log.create("t", c).ok());
  REQUIRE(log.create("gone", topic_of(1)).ok());
  REQUIRE(log.create("u", topic_of(1)).ok());
  std::int64_t now = 1000;
  for (int i = 0; i < 20; ++i) {
    REQUIRE(log.append("t", with_id("t" + std::to_string(i), 1, "id" + std::to_string(i)), now++).ok());
    REQUIRE(log.append("gone", message("g" + std::to_string(i)), now++).ok());
    if (i % 3 == 0) REQUIRE(log.append("u", message("u" + std::to_string(i), i), now++).ok());
    if (i % 5 == 4) store.apply(log.drain_changes());  // syncs at arbitrary points
  }
  REQUIRE(log.remove("gone").ok());
  REQUIRE(log.create("gone", topic_of(2)).ok());  // a new topic of the old name
  REQUIRE(log.append("gone", message("new"), now++).ok());
  log.prune(now, {{mq_partition_id{"u", 0}, 4}});
  store.apply(log.drain_changes());

  mq_log restored;
  store.restore(restored);
  CHECK(dump(restored) == dump(log));
  CHECK(restored.shell_count() == log.shell_count());
  CHECK(restored.drain_changes().empty());
  // The dedupe window is rebuilt from the shells: a retry is still one.
  auto retry = restored.append("t", with_id("again", 1, "id19"), now);
  REQUIRE(retry.ok());
  CHECK(retry->duplicate);
  CHECK(retry->offset == log.append("t", with_id("again", 1, "id19"), now)->offset);
}

TEST_CASE("mq_log: restore refuses records that break the log's invariants") {
  mq_log log;
  REQUIRE(log.restore_topic("t", topic_of(1)).ok());
  CHECK(log.restore_topic("t", topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.restore_topic("bad name", topic_of(1)).code() == errc::invalid_argument);
  CHECK(log.restore_shell("t", 0, mq_shell{1, "p", 1, 1, {}, 1}).code() == errc::invalid_argument);
  CHECK(log.restore_shell("t", 1, mq_shell{0, "p", 1, 1, {}, 1}).code() == errc::invalid_argument);
  CHECK(log.restore_shell("x", 0, mq_shell{0, "p", 1, 1, {}, 1}).code() == errc::invalid_argument);
  REQUIRE(log.restore_log_start("t", 0, 5).ok());
  REQUIRE(log.restore_shell("t", 0, mq_shell{5, "p", 1, 1, {}, 10}).ok());
  CHECK(log.restore_shell("t", 0, mq_shell{6, "p", 1, 1, {}, 9}).code() == errc::invalid_argument);
  CHECK(log.restore_log_start("t", 0, 7).code() == errc::invalid_argument);
  CHECK(*log.end_offset("t", 0) == 6);
}

namespace {

/// A dead-lettered copy of `payload`: another shell naming it.
mq_message shared_copy(std::string payload) {
  auto m = message(std::move(payload));
  m.shares_payload = true;
  return m;
}

}  // namespace

TEST_CASE("mq_log: a payload two shells name is handed back once, when the second of them goes") {
  mq_log log;
  REQUIRE(log.create("jobs", topic_of(1)).ok());
  REQUIRE(log.create("dead", topic_of(1)).ok());
  REQUIRE(log.append("jobs", message("~mq/jobs/a"), 1).ok());
  REQUIRE(log.append("jobs", message("~mq/jobs/b"), 2).ok());
  REQUIRE(log.append("dead", shared_copy("~mq/jobs/a"), 3).ok());
  REQUIRE(log.append("dead", shared_copy("~mq/jobs/a"), 4).ok());  // dead in a second group too
  CHECK(log.shared_payloads() == 1);

  // The source goes first: "a" is still named twice, "b" is free.
  auto pruned = log.prune(10, {{mq_partition_id{"jobs", 0}, 2}});
  CHECK(pruned.payloads == std::vector<std::string>{"~mq/jobs/b"});
  pruned = log.prune(10, {{mq_partition_id{"dead", 0}, 1}});
  CHECK(pruned.payloads.empty());
  CHECK(log.shared_payloads() == 0);
  // The last name goes, by a topic delete: now it is handed back.
  auto removed = log.remove("dead");
  REQUIRE(removed.ok());
  CHECK(*removed == std::vector<std::string>{"~mq/jobs/a"});
}

TEST_CASE("mq_log: a restore counts the shells naming each payload again") {
  mq_log log;
  log_store store;
  REQUIRE(log.create("jobs", topic_of(1)).ok());
  REQUIRE(log.create("dead", topic_of(1)).ok());
  REQUIRE(log.append("jobs", message("~mq/jobs/a"), 1).ok());
  REQUIRE(log.append("dead", shared_copy("~mq/jobs/a"), 2).ok());
  REQUIRE(log.append("jobs", message("~mq/jobs/b"), 3).ok());
  REQUIRE(log.append("dead", shared_copy("~mq/jobs/b"), 4).ok());
  log.prune(10, {{mq_partition_id{"jobs", 0}, 1}});  // "a" left the source before the restart
  store.apply(log.drain_changes());

  mq_log restored;
  store.restore(restored);
  CHECK(restored.shared_payloads() == 1);  // only "b" is named twice now
  auto pruned = restored.prune(10, {{mq_partition_id{"dead", 0}, 2}});
  CHECK(pruned.payloads == std::vector<std::string>{"~mq/jobs/a"});
  pruned = restored.prune(10, {{mq_partition_id{"jobs", 0}, 2}, {mq_partition_id{"dead", 0}, 2}});
  CHECK(pruned.payloads == std::vector<std::string>{"~mq/jobs/b"});
  CHECK(restored.shared_payloads() == 0);
}

TEST_CASE("mq_log: a topic cannot be its own dead-letter topic, and the name must be valid") {
  mq_log log;
  auto c = topic_of(1);
  c.dead_letter = "t";
  CHECK(log.create("t", c).code() == errc::invalid_argument);
  c.dead_letter = "bad name";
  CHECK(log.create("t", c).code() == errc::invalid_argument);
  c.dead_letter = "t.dead";
  CHECK(log.create("t", c).ok());
  CHECK(log.config_of("t")->dead_letter == "t.dead");
}
