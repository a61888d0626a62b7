// The master's MQ state in its durable store: change records journaled by
// mq_store and read back into fresh cores, across deletes, crashes before
// a sync (whole and cut short) and corrupt records.

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/master/mq_groups.hpp"
#include "actors/master/mq_log.hpp"
#include "actors/master/mq_records.hpp"
#include "actors/master/mq_store.hpp"
#include "runtime/storage/durable_store.hpp"

namespace {

using sluice::errc;
using sluice::memory_durable_store;
using sluice::master::mq_full_policy;
using sluice::master::mq_group_config;
using sluice::master::mq_groups;
using sluice::master::mq_load;
using sluice::master::mq_load_stats;
using sluice::master::mq_log;
using sluice::master::mq_message;
using sluice::master::mq_partition_id;
using sluice::master::mq_start;
using sluice::master::mq_topic_config;
namespace records = sluice::master::mq_records;

/// A config with every field off its default.
mq_topic_config busy_topic() {
  mq_topic_config c;
  c.partitions = 3;
  c.max_age_ms = 60'000;
  c.max_bytes = 1000;
  c.max_messages = 4;
  c.full = mq_full_policy::drop_oldest;
  c.payload_replicas = 3;
  c.max_message_bytes = 500;
  c.dedupe_window_ms = 30'000;
  c.dedupe_entries_max = 100;
  c.dead_letter = "busy.dead";
  return c;
}

mq_topic_config plain_topic(std::uint32_t partitions) {
  mq_topic_config c;
  c.partitions = partitions;
  c.full = mq_full_policy::reject;
  return c;
}

mq_group_config reads(std::vector<std::string> topics, mq_start start = mq_start::earliest) {
  mq_group_config c;
  c.topics = std::move(topics);
  c.ack_timeout_ms = 5000;
  c.max_deliveries = 3;
  c.prefetch = 8;
  c.start = start;
  return c;
}

/// Records every write since the last sync over a memory store, so a
/// test can build what a crash keeps: the synced writes and a prefix of
/// the rest (durable_store.hpp).
class recording_store final : public sluice::durable_store {
 public:
  sluice::result<std::optional<std::string>> get(std::string_view key) override { return inner_.get(key); }
  sluice::result<void> put(std::string_view key, std::string_view value) override {
    pending_.push_back({std::string{key}, std::string{value}});
    return inner_.put(key, value);
  }
  sluice::result<void> erase(std::string_view key) override {
    pending_.push_back({std::string{key}, std::nullopt});
    return inner_.erase(key);
  }
  sluice::result<void> sync() override {
    synced_.insert(synced_.end(), pending_.begin(), pending_.end());
    pending_.clear();
    return inner_.sync();
  }
  void discard() override {
    pending_.clear();
    inner_.discard();
  }
  sluice::result<void> scan(std::string_view prefix,
                            const std::function<void(std::string_view, std::string_view)>& visit) override {
    return inner_.scan(prefix, visit);
  }

  std::size_t pending() const { return pending_.size(); }
  /// The store a crash leaves when the first `kept` unsynced writes land.
  std::unique_ptr<memory_durable_store> crashed(std::size_t kept) const {
    auto out = std::make_unique<memory_durable_store>();
    auto apply = [&out](const write& w) {
      if (w.value) {
        REQUIRE(out->put(w.key, *w.value).ok());
      } else {
        REQUIRE(out->erase(w.key).ok());
      }
    };
    for (auto& w : synced_) apply(w);
    for (std::size_t i = 0; i < kept; ++i) apply(pending_.at(i));
    REQUIRE(out->sync().ok());
    return out;
  }

 private:
  struct write {
    std::string key;
    std::optional<std::string> value;  ///< none: an erase
  };
  memory_durable_store inner_;
  std::vector<write> synced_;
  std::vector<write> pending_;
};

/// A log, its groups and the store they are journaled to.
struct world {
  mq_log log;
  mq_groups groups;
  std::int64_t now = 1000;

  std::uint64_t produce(const std::string& topic, std::uint32_t partition, const std::string& payload,
                        std::uint64_t producer = 0, std::string id = {}) {
    mq_message m;
    m.payload = payload;
    m.size_bytes = 100 + payload.size();
    m.producer = producer;
    m.message_id = std::move(id);
    m.partition = partition;
    auto out = log.append(topic, m, now);
    REQUIRE(out.ok());
    now += 7;
    return out->offset;
  }
  void join(const std::string& group, std::uint64_t session, const mq_group_config& config) {
    REQUIRE(groups.join(group, session, config, now + 60'000, now, log).ok());
  }
  /// Polls `session` and acks what it got, but for the partitions in
  /// `hold` (those stay in flight).
  void poll_ack(const std::string& group, std::uint64_t session, const std::set<mq_partition_id>& hold = {}) {
    auto polled = groups.poll(group, session, 100, 0, now, log);
    REQUIRE(polled.ok());
    for (auto& d : polled->deliveries) {
      if (hold.contains(d.partition)) continue;
      REQUIRE(groups.ack(group, session, d.partition, d.offset, d.generation).ok());
    }
  }
  void prune() { log.prune(now, groups.consumed_upto(log)); }
  void journal(sluice::durable_store& store) {
    REQUIRE(sluice::master::mq_journal(store, log.drain_changes()).ok());
    REQUIRE(sluice::master::mq_journal(store, groups.drain_changes()).ok());
  }
};

/// What a fresh log and groups hold after a load.
struct loaded {
  mq_log log;
  mq_groups groups;
  mq_load_stats stats;

  explicit loaded(sluice::durable_store& store) {
    auto out = mq_load(store, log, groups);
    REQUIRE_MESSAGE(out.ok(), out.error().message());
    stats = *out;
    groups.topics_changed(log);
  }
};

/// Everything a log shows, as text, to compare two logs.
std::string dump(const mq_log& log) {
  std::string out;
  for (auto& name : log.list()) {
    auto info = *log.describe(name);
    auto& c = info.config;
    out += name + " {" + std::to_string(c.partitions) + " " + std::to_string(c.max_age_ms) + " " +
           std::to_string(c.max_bytes) + " " + std::to_string(c.max_messages) + " " +
           std::to_string(static_cast<int>(c.full)) + " " + std::to_string(c.payload_replicas) + " " +
           std::to_string(c.max_message_bytes) + " " + std::to_string(c.dedupe_window_ms) + " " +
           std::to_string(c.dedupe_entries_max) + " " + c.dead_letter + "}:";
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

/// Every group's config and, per partition, its committed offset and generation.
std::string dump(const mq_groups& groups, const mq_log& log) {
  std::string out;
  for (auto& name : groups.list()) {
    auto& c = *groups.config_of(name);
    out += name + " {" + std::to_string(c.ack_timeout_ms) + " " + std::to_string(c.max_deliveries) + " " +
           std::to_string(c.prefetch) + " " + std::to_string(static_cast<int>(c.start));
    for (auto& topic : c.topics) out += " " + topic;
    out += "}:";
    for (auto& topic : c.topics) {
      auto* tc = log.config_of(topic);
      if (tc == nullptr) continue;
      for (std::uint32_t p = 0; p < tc->partitions; ++p) {
        auto view = groups.view(name, {topic, p});
        if (!view.ok()) continue;
        out += " " + topic + "/" + std::to_string(p) + "@" + std::to_string(view->committed) + "g" +
               std::to_string(view->generation);
      }
    }
    out += "\n";
  }
  return out;
}

std::vector<std::string> keys_with(sluice::durable_store& store, std::string_view prefix) {
  std::vector<std::string> out;
  REQUIRE(store.scan(prefix, [&out](std::string_view key, std::string_view) { out.emplace_back(key); }).ok());
  return out;
}

/// Topics "a" (every config field set) and "b"; groups "g1" (holding
/// a/0 in flight, the rest acked) and "g2" (from the latest, all acked).
/// drop_oldest moves the start of a/0 to 2, a prune those of a/1 to 1 and
/// b/1 to 4.
void build_busy(world& w) {
  REQUIRE(w.log.create("a", busy_topic()).ok());
  REQUIRE(w.log.create("b", plain_topic(2)).ok());
  for (int i = 0; i < 6; ++i) w.produce("a", 0, "a0-" + std::to_string(i), 9, "id" + std::to_string(i));
  w.produce("a", 1, "a1-0", 4);
  for (int i = 0; i < 3; ++i) w.produce("b", 1, "b1-" + std::to_string(i));
  w.join("g1", 11, reads({"a", "b"}));
  w.join("g2", 12, reads({"b"}, mq_start::latest));
  w.poll_ack("g1", 11, {{"a", 0}});
  w.produce("b", 1, "b1-3");
  w.poll_ack("g1", 11);
  w.poll_ack("g2", 12);
  w.prune();
}

}  // namespace

TEST_CASE("mq_store: topics, shells, log starts, groups and offsets come back as they were") {
  memory_durable_store store;
  world w;
  build_busy(w);
  w.journal(store);
  REQUIRE(store.sync().ok());
  // The setup moved both kinds of log start.
  REQUIRE(*w.log.start_offset("a", 0) == 2);
  REQUIRE(*w.log.start_offset("a", 1) == 1);
  REQUIRE(*w.log.start_offset("b", 1) == 4);

  loaded l{store};
  CHECK(l.stats.topics == 2);
  CHECK(l.stats.shells == w.log.shell_count());
  CHECK(l.stats.groups == 2);
  CHECK(l.stats.offsets == 7);  // g1: a/0-2 and b/0-1; g2: b/0-1
  CHECK(l.stats.leftovers == 0);
  CHECK(l.log.list() == w.log.list());
  CHECK(l.groups.list() == w.groups.list());
  CHECK(dump(l.log) == dump(w.log));
  CHECK(dump(l.groups, l.log) == dump(w.groups, w.log));
  CHECK(*l.log.config_of("a") == busy_topic());
  CHECK(*l.groups.config_of("g2") == reads({"b"}, mq_start::latest));
  CHECK(*l.log.find("a", 0, 5) == *w.log.find("a", 0, 5));
  CHECK(l.log.find("a", 0, 1) == nullptr);
  CHECK(l.groups.view("g1", {"b", 1})->committed == 4);
  CHECK(l.groups.view("g1", {"a", 0})->generation == w.groups.view("g1", {"a", 0})->generation);
  CHECK(l.groups.consumed_upto(l.log) == w.groups.consumed_upto(w.log));
  CHECK(l.log.drain_changes().empty());
  CHECK(l.groups.drain_changes().empty());
  // The dedupe window came back with the shells: a retry is no new message.
  mq_message retry;
  retry.payload = "again";
  retry.size_bytes = 10;
  retry.producer = 9;
  retry.message_id = "id5";
  retry.partition = 0;
  auto again = l.log.append("a", retry, w.now);
  REQUIRE(again.ok());
  CHECK(again->duplicate);
  CHECK(again->offset == 5);
}

TEST_CASE("mq_store: a deleted topic or group leaves no records behind") {
  memory_durable_store store;
  world w;
  build_busy(w);
  w.journal(store);
  REQUIRE(store.sync().ok());
  REQUIRE_FALSE(keys_with(store, "q/s/a/").empty());
  REQUIRE_FALSE(keys_with(store, "q/l/a/").empty());
  REQUIRE_FALSE(keys_with(store, "q/o/g2/").empty());

  REQUIRE(w.log.remove("a").ok());
  w.groups.topics_changed(w.log);
  REQUIRE(w.groups.remove("g2").ok());
  w.journal(store);
  REQUIRE(store.sync().ok());
  CHECK(keys_with(store, "q/t/a").empty());
  CHECK(keys_with(store, "q/l/a/").empty());
  CHECK(keys_with(store, "q/s/a/").empty());
  CHECK(keys_with(store, "q/o/g1/a/").empty());
  CHECK(keys_with(store, "q/g/g2").empty());
  CHECK(keys_with(store, "q/o/g2/").empty());
  // What was not deleted is all still there.
  CHECK(keys_with(store, "q/t/") == std::vector<std::string>{"q/t/b"});
  CHECK(keys_with(store, "q/g/") == std::vector<std::string>{"q/g/g1"});

  loaded l{store};
  CHECK(l.log.list() == std::vector<std::string>{"b"});
  CHECK(l.groups.list() == std::vector<std::string>{"g1"});
  CHECK(dump(l.log) == dump(w.log));
  CHECK(dump(l.groups, l.log) == dump(w.groups, w.log));
  CHECK(l.stats.leftovers == 0);

  // A topic of the same name starts empty, from offset 0.
  REQUIRE(w.log.create("a", plain_topic(1)).ok());
  CHECK(w.produce("a", 0, "new") == 0);
  w.journal(store);
  loaded again{store};
  CHECK(dump(again.log) == dump(w.log));
}

TEST_CASE("mq_store: a crash before the sync loses the unsynced changes and nothing else") {
  memory_durable_store store;
  world w;
  build_busy(w);
  w.journal(store);
  REQUIRE(store.sync().ok());
  auto log_synced = dump(w.log);
  auto groups_synced = dump(w.groups, w.log);

  // A batch that touches every kind of record, journaled and never synced.
  for (int i = 0; i < 5; ++i) w.produce("a", 2, "late-" + std::to_string(i));
  w.poll_ack("g1", 11);
  w.prune();
  REQUIRE(w.log.remove("b").ok());
  w.groups.topics_changed(w.log);
  REQUIRE(w.groups.remove("g2").ok());
  REQUIRE(w.log.create("c", plain_topic(1)).ok());
  w.produce("c", 0, "c0");
  w.join("g3", 13, reads({"c"}));
  w.journal(store);
  REQUIRE(dump(loaded{store}.log) != log_synced);  // the writes are there before the crash
  store.discard();

  loaded l{store};
  CHECK(dump(l.log) == log_synced);
  CHECK(dump(l.groups, l.log) == groups_synced);
}

TEST_CASE("mq_store: every prefix of an unsynced batch loads, and no offset is handed out twice") {
  recording_store store;
  world w;
  build_busy(w);
  w.journal(store);
  REQUIRE(store.sync().ok());
  std::vector<std::uint64_t> synced_end, synced_start;
  for (std::uint32_t p = 0; p < 3; ++p) {
    synced_end.push_back(*w.log.end_offset("a", p));
    synced_start.push_back(*w.log.start_offset("a", p));
  }

  // The batch: every shell of a/0 acked and pruned (the start moves to
  // the end), appends that drop_oldest makes room for, a topic and a
  // group deleted and created again, offsets moved.
  REQUIRE(w.groups.ack_upto("g1", 11, {"a", 0}, 5).ok());
  for (int i = 0; i < 6; ++i) w.produce("a", 1, "a1-late-" + std::to_string(i));
  w.prune();
  REQUIRE(*w.log.start_offset("a", 0) == *w.log.end_offset("a", 0));
  REQUIRE(w.log.remove("b").ok());
  w.groups.topics_changed(w.log);
  REQUIRE(w.groups.remove("g2").ok());
  REQUIRE(w.log.create("b", plain_topic(1)).ok());
  w.produce("b", 0, "b-new");
  w.join("g2", 12, reads({"b"}));
  w.groups.topics_changed(w.log);
  w.journal(store);
  auto final_log = dump(w.log);
  REQUIRE(store.pending() > 20);

  for (std::size_t kept = 0; kept <= store.pending(); ++kept) {
    CAPTURE(kept);
    auto crashed = store.crashed(kept);
    std::string first;
    {
      loaded l{*crashed};
      first = dump(l.log) + dump(l.groups, l.log);
      for (std::uint32_t p = 0; p < 3; ++p) {
        auto start = *l.log.start_offset("a", p);
        auto end = *l.log.end_offset("a", p);
        CHECK(start >= synced_start[p]);
        CHECK(end >= synced_end[p]);
        CHECK(end <= *w.log.end_offset("a", p));
      }
      if (kept == store.pending()) CHECK(dump(l.log) == final_log);
    }
    // The load erased what it passed over; the next one finds none, and
    // the same state.
    loaded again{*crashed};
    CHECK(again.stats.leftovers == 0);
    CHECK(dump(again.log) + dump(again.groups, again.log) == first);
  }
}

TEST_CASE("mq_store: offsets stay monotonic after a reload, even when every shell was pruned") {
  memory_durable_store store;
  world w;
  mq_topic_config aged = plain_topic(1);
  aged.max_age_ms = 100;
  REQUIRE(w.log.create("t", aged).ok());
  for (int i = 0; i < 5; ++i) w.produce("t", 0, "p" + std::to_string(i));
  w.now += 1000;
  w.prune();
  REQUIRE(w.log.shell_count() == 0);
  w.journal(store);
  REQUIRE(store.sync().ok());
  CHECK(keys_with(store, "q/s/").empty());

  for (std::uint64_t round = 0; round < 3; ++round) {
    loaded l{store};
    CHECK(*l.log.start_offset("t", 0) == 5 + round);
    CHECK(*l.log.end_offset("t", 0) == 5 + round);
    mq_message m;
    m.payload = "next";
    m.size_bytes = 1;
    auto out = l.log.append("t", m, w.now);
    REQUIRE(out.ok());
    CHECK(out->offset == 5 + round);
    w.now += 1000;
    l.log.prune(w.now, {});
    REQUIRE(sluice::master::mq_journal(store, l.log.drain_changes()).ok());
    REQUIRE(store.sync().ok());
  }
}

TEST_CASE("mq_store: a corrupt record fails the load with internal and names the record") {
  auto corrupted = [](const std::function<void(memory_durable_store&)>& corrupt) {
    memory_durable_store store;
    world w;
    build_busy(w);
    w.journal(store);
    REQUIRE(store.sync().ok());
    corrupt(store);
    mq_log log;
    mq_groups groups;
    auto out = mq_load(store, log, groups);
    REQUIRE_FALSE(out.ok());
    CHECK(out.code() == errc::internal);
    return out.error().message();
  };
  auto with_format = [](std::string value, char format) {
    value[0] = format;
    return value;
  };
  CHECK(corrupted([](memory_durable_store& s) { REQUIRE(s.put("q/t/a", "junk").ok()); }).find("q/t/a") !=
        std::string::npos);
  CHECK(corrupted([&](memory_durable_store& s) {
          REQUIRE(s.put("q/t/b", with_format(records::encode_topic_config(plain_topic(2)), 2)).ok());
        }).find("q/t/b") != std::string::npos);
  // A config the core refuses.
  CHECK(corrupted([](memory_durable_store& s) {
          REQUIRE(s.put("q/t/b", records::encode_topic_config(plain_topic(0))).ok());
        }).find("partitions") != std::string::npos);
  // A shell cut short, one with a trailing byte, one missing in the middle.
  CHECK(corrupted([](memory_durable_store& s) {
          auto key = records::shell_key("a", 0, 4);
          auto value = **s.get(key);
          value.pop_back();
          REQUIRE(s.put(key, value).ok());
        }).find(records::shell_key("a", 0, 4)) != std::string::npos);
  corrupted([](memory_durable_store& s) {
    auto key = records::shell_key("a", 0, 4);
    REQUIRE(s.put(key, **s.get(key) + "x").ok());
  });
  CHECK(corrupted([](memory_durable_store& s) { REQUIRE(s.erase(records::shell_key("a", 0, 3)).ok()); })
            .find("contiguous") != std::string::npos);
  // Keys that are not the layout's.
  corrupted([](memory_durable_store& s) { REQUIRE(s.put("q/s/a/0000000g/0000000000000000", "").ok()); });
  corrupted([](memory_durable_store& s) { REQUIRE(s.put("q/s/a/0", "").ok()); });
  corrupted([](memory_durable_store& s) { REQUIRE(s.put("q/l/a", "").ok()); });
  corrupted([](memory_durable_store& s) { REQUIRE(s.put("q/o/g1/00000000", "").ok()); });
  // A shell of a partition the topic does not have.
  corrupted([](memory_durable_store& s) {
    REQUIRE(s.put(records::shell_key("a", 7, 0), **s.get(records::shell_key("a", 0, 4))).ok());
  });
  // An offset of a topic its group does not read, and a group config cut short.
  corrupted([](memory_durable_store& s) {
    REQUIRE(s.put(records::offset_key("g2", {"a", 0}), records::encode_offset(1, 1)).ok());
  });
  corrupted([](memory_durable_store& s) {
    auto value = **s.get("q/g/g1");
    REQUIRE(s.put("q/g/g1", value.substr(0, value.size() - 1)).ok());
  });
}

TEST_CASE("mq_store: records of a topic or group whose delete a crash cut short are passed over and erased") {
  memory_durable_store store;
  world w;
  build_busy(w);
  w.journal(store);
  REQUIRE(store.sync().ok());
  // As a cut delete leaves them: the configs gone, the rest still there.
  auto a_records = keys_with(store, "q/s/a/").size() + keys_with(store, "q/l/a/").size();
  auto g2_records = keys_with(store, "q/o/g2/").size();
  REQUIRE(store.erase("q/t/a").ok());
  REQUIRE(store.erase("q/g/g2").ok());
  // And a shell below its log start, as a cut start move leaves it.
  REQUIRE(store.put(records::shell_key("b", 1, 0), records::encode_shell({0, "old", 1, 0, "", 0})).ok());

  loaded l{store};
  CHECK(l.stats.leftovers == a_records + g2_records + 1);
  CHECK(l.log.list() == std::vector<std::string>{"b"});
  CHECK(l.groups.list() == std::vector<std::string>{"g1"});
  CHECK(keys_with(store, "q/s/a/").empty());
  CHECK(keys_with(store, "q/l/a/").empty());
  CHECK(keys_with(store, "q/o/g2/").empty());
  CHECK(store.get(records::shell_key("b", 1, 0))->has_value() == false);
  CHECK(*l.log.start_offset("b", 1) == 4);
}

TEST_CASE("mq_store: record values lead with a format byte and every field round-trips") {
  mq_topic_config c = busy_topic();
  c.max_age_ms = sluice::master::mq_window_ms_max;
  c.max_bytes = UINT64_MAX;
  c.max_message_bytes = sluice::master::mq_message_bytes_max;
  auto value = records::encode_topic_config(c);
  CHECK(value[0] == static_cast<char>(records::format));
  CHECK(records::decode_topic_config(value) == c);
  CHECK_FALSE(records::decode_topic_config(value + "x"));
  CHECK_FALSE(records::decode_topic_config(value.substr(0, value.size() - 1)));
  CHECK_FALSE(records::decode_topic_config(""));
  // A record written before dead-letter topics ends at dedupe_entries_max.
  auto older = c;
  older.dead_letter.clear();
  auto old_value = records::encode_topic_config(older);
  old_value.resize(old_value.size() - 4);  // the empty name's length
  CHECK(records::decode_topic_config(old_value) == older);

  sluice::master::mq_shell s{UINT64_MAX, std::string{"bin\0key", 7}, 1ull << 40, UINT64_MAX - 1, "msg-1", -5};
  auto shell = records::encode_shell(s);
  CHECK(shell[0] == static_cast<char>(records::format));
  CHECK(records::decode_shell(shell, UINT64_MAX) == s);
  CHECK(records::decode_shell(shell, 3)->offset == 3);
  auto other_format = shell;
  other_format[0] = 2;
  CHECK_FALSE(records::decode_shell(other_format, 0));

  auto g = reads({"a", "b", "c"}, mq_start::latest);
  CHECK(records::decode_group_config(records::encode_group_config(g)) == g);
  CHECK(records::decode_start(records::encode_start(UINT64_MAX)) == UINT64_MAX);
  auto o = records::decode_offset(records::encode_offset(7, UINT64_MAX));
  REQUIRE(o);
  CHECK(o->committed == 7);
  CHECK(o->generation == UINT64_MAX);

  // Keys: fixed-width lowercase hex, so key order is offset order.
  CHECK(records::shell_key("t", 255, 16) == "q/s/t/000000ff/0000000000000010");
  CHECK(records::shell_key("t", 0, 9) < records::shell_key("t", 0, 10));
  auto parsed = records::parse_shell_key("q/s/t.x-y_z/000000ff/0000000000000010");
  REQUIRE(parsed);
  CHECK(parsed->topic == "t.x-y_z");
  CHECK(parsed->partition == 255);
  CHECK(parsed->offset == 16);
  CHECK_FALSE(records::parse_shell_key("q/s/t/000000FF/0000000000000010"));
  CHECK_FALSE(records::parse_shell_key("q/s//000000ff/0000000000000010"));
  auto offset_key = records::offset_key("g", {"t", 3});  // the parts view into it
  auto offset = records::parse_offset_key(offset_key);
  REQUIRE(offset);
  CHECK(offset->group == "g");
  CHECK(offset->topic == "t");
  CHECK(offset->partition == 3);
  CHECK_FALSE(records::parse_offset_key("q/o/g/a/b/00000003"));
}
