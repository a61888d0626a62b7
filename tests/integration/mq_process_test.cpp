// MQ across processes: a master killed with SIGKILL comes back with every
// committed message and every group's offset; with payload replicas 2 an
// owner killed with SIGKILL loses no acknowledged message; a consumer
// killed mid-batch hands its unacked messages to another member and never
// its acked ones; a producer killed mid-produce leaves no torn message; a
// slow consumer holds a fast producer at the topic's bound with the pool
// flat; members joining and leaving under load lose nothing.

#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "sluice/mq.hpp"
#include "tests/support/mq_pattern.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/process.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

std::string body_of(int i) { return "message-" + std::to_string(i) + "-" + pattern(1000 + static_cast<std::size_t>(i), 'm'); }

/// Polls until `n` messages came (or 20 s passed); acks none.
std::vector<sluice::mq_message> take(sluice::mq_consumer& consumer, std::size_t n) {
  std::vector<sluice::mq_message> out;
  auto end = std::chrono::steady_clock::now() + 20s;
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    auto batch = consumer.poll({.max_messages = n - out.size(), .wait = 500ms});
    if (!batch) {
      // The master may still be coming back.
      std::this_thread::sleep_for(50ms);
      continue;
    }
    for (auto& m : *batch) out.push_back(std::move(m));
  }
  return out;
}

const std::string child_bin = SLUICE_TEST_CHILD;

/// A master and one owner as processes, with a client of the owner.
struct one_host {
  node_proc master = start_node({"master", "--listen", "127.0.0.1:0"});
  node_proc owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  std::unique_ptr<sluice::client> c = connect(owner.address);
  one_host() {
    await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  }
};

std::uint64_t pool_used(sluice::client& c) {
  auto s = c.status().value();
  std::uint64_t used = 0;
  for (auto& m : s.members) used += m.used_bytes;
  return used;
}

}  // namespace

TEST_CASE("mq process: a master killed and restarted keeps committed messages and group offsets") {
  auto data_dir = temp_path("master-data");
  auto master = start_node({"master", "--listen", "127.0.0.1:0", "--data-dir", data_dir});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto c = connect(owner.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });

  sluice::mq q{*c};
  REQUIRE(q.create_topic("events", {.partitions = 2}).value());
  for (int i = 0; i < 20; ++i) REQUIRE(q.produce("events", body_of(i), {.key = std::to_string(i)}).ok());
  std::set<std::string> acked;
  {
    auto consumer = q.subscribe("readers", {"events"}, {.prefetch = 20}).value();
    auto got = take(consumer, 20);
    REQUIRE(got.size() == 20);
    for (std::size_t i = 0; i < 10; ++i) {
      REQUIRE(consumer.ack(got[i]).ok());
      acked.insert(std::string{got[i].payload->str()});
    }
    master.proc->signal(SIGKILL);
    master.proc->wait(5s);
    // The consumer goes without leaving: its master is gone.
  }
  master = start_node({"master", "--listen", master.address, "--data-dir", data_dir});
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });

  auto topics = q.topics().value();
  REQUIRE(topics.size() == 1);
  CHECK(topics[0].partitions.size() == 2);
  CHECK(topics[0].partitions[0].end + topics[0].partitions[1].end == 20);

  auto consumer = q.subscribe("readers", {"events"}, {.prefetch = 20}).value();
  auto again = take(consumer, 10);
  CHECK(again.size() == 10);
  std::set<std::string> seen;
  for (auto& m : again) {
    REQUIRE_MESSAGE(m.payload.ok(), m.payload.error().to_string());
    auto text = std::string{m.payload->str()};
    CHECK_MESSAGE(acked.count(text) == 0, "an acked message came back: " << text.substr(0, 12));
    seen.insert(text);
    REQUIRE(consumer.ack(m).ok());
  }
  CHECK(seen.size() + acked.size() == 20);
  // A new produce gets the next offset, never one handed out before.
  auto at = q.produce("events", "after", {.partition = 0}).value();
  CHECK(at.offset == topics[0].partitions[0].end);
}

TEST_CASE("mq process: with payload replicas 2 an owner killed with SIGKILL loses no acknowledged message") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto producer_client = connect(owner_a.address);
  auto consumer_client = connect(owner_b.address);
  await_status(*consumer_client, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  sluice::mq producer{*producer_client};
  REQUIRE(producer.create_topic("safe", {.payload_replicas = 2}).value());
  for (int i = 0; i < 30; ++i) {
    auto at = producer.produce("safe", body_of(i));
    REQUIRE_MESSAGE(at.ok(), at.error().to_string());
  }
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);

  sluice::mq queue{*consumer_client};
  auto consumer = queue.subscribe("g", {"safe"}, {.prefetch = 30}).value();
  auto got = take(consumer, 30);
  REQUIRE(got.size() == 30);
  for (std::size_t i = 0; i < got.size(); ++i) {
    REQUIRE_MESSAGE(got[i].payload.ok(), "offset " << got[i].offset << ": " << got[i].payload.error().to_string());
    CHECK(got[i].payload->str() == body_of(static_cast<int>(got[i].offset)));
    REQUIRE(consumer.ack(got[i]).ok());
  }
}

TEST_CASE("mq process: a consumer killed mid-batch hands its unacked messages on, never its acked ones") {
  one_host h;
  sluice::mq q{*h.c};
  REQUIRE(q.create_topic("work", {.partitions = 3}).value());
  for (int i = 0; i < 20; ++i) REQUIRE(q.produce("work", body_of(i), {.key = std::to_string(i)}).ok());

  // The child takes all 20, acks 8 and holds 12 when it is killed.
  process child{child_bin, {h.owner.address, "mq-hold", "work", "crew", "20", "8"}};
  std::set<std::pair<std::uint32_t, std::uint64_t>> acked;
  for (;;) {
    auto line = child.read_line(20s);
    REQUIRE_MESSAGE(line.has_value(), "the child did not finish its batch");
    if (*line == "held") break;
    unsigned p = 0;
    unsigned long long o = 0;
    if (std::sscanf(line->c_str(), "acked %u %llu", &p, &o) == 2) acked.insert({p, o});
    REQUIRE_MESSAGE(line->rfind("bad", 0) != 0, *line);
  }
  REQUIRE(acked.size() == 8);
  child.signal(SIGKILL);
  child.wait(5s);

  auto consumer = q.subscribe("crew", {"work"}, {.prefetch = 20}).value();  // the group's settings
  auto got = take(consumer, 12);
  CHECK(got.size() == 12);
  std::set<std::pair<std::uint32_t, std::uint64_t>> redelivered;
  for (auto& m : got) {
    CHECK_MESSAGE(acked.count({m.partition, m.offset}) == 0, "acked message came back: " << m.partition << "@" << m.offset);
    CHECK(m.delivery_count == 2);
    REQUIRE_MESSAGE(m.payload.ok(), m.payload.error().to_string());
    redelivered.insert({m.partition, m.offset});
    REQUIRE(consumer.ack(m).ok());
  }
  CHECK(redelivered.size() + acked.size() == 20);
  auto more = consumer.poll({.max_messages = 20, .wait = 1500ms});
  REQUIRE(more.ok());
  CHECK(more->empty());
}

TEST_CASE("mq process: a producer killed mid-produce leaves no torn message") {
  one_host h;
  sluice::mq q{*h.c};
  constexpr std::size_t size = 256 * 1024;
  REQUIRE(q.create_topic("stream", {.max_message_bytes = size}).value());
  auto used_before = pool_used(*h.c);
  {
    process child{child_bin, {h.owner.address, "mq-produce", "stream", std::to_string(size)}};
    auto line = child.read_line(20s);
    REQUIRE_MESSAGE(line == std::optional<std::string>{"ready"}, line.value_or("(nothing)"));
    std::this_thread::sleep_for(300ms);
    child.signal(SIGKILL);
    child.wait(5s);
  }
  auto topics = q.topics().value();
  REQUIRE(topics.size() == 1);
  auto n = topics[0].partitions[0].end;
  REQUIRE(n >= 1);
  auto consumer = q.subscribe("check", {"stream"}, {.prefetch = 64}).value();
  std::uint64_t seen = 0;
  while (seen < n) {
    auto batch = consumer.poll({.max_messages = 64, .wait = 2s});
    REQUIRE(batch.ok());
    REQUIRE_MESSAGE(!batch->empty(), "only " << seen << " of " << n << " messages came");
    for (auto& m : *batch) {
      REQUIRE_MESSAGE(m.payload.ok(), m.payload.error().to_string());
      // Every byte is the one the producer wrote for that message.
      auto got = m.payload->str();
      auto want = numbered_message(m.offset, size);
      std::size_t first_bad = 0;
      while (first_bad < std::min(got.size(), want.size()) && got[first_bad] == want[first_bad]) ++first_bad;
      CHECK_MESSAGE(got == want, "offset " << m.offset << ": " << got.size() << " bytes, first wrong at " << first_bad);
      REQUIRE(consumer.ack(m).ok());
      ++seen;
    }
  }
  CHECK(seen == n);
  // The reservation it was writing when killed went back to the pool:
  // what stays is at most the payloads not yet freed and one orphan.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (pool_used(*h.c) > used_before + 2 * size && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(100ms);
  }
  CHECK(pool_used(*h.c) <= used_before + 2 * size);
}

TEST_CASE("mq process: a slow consumer holds a fast producer at the topic's bound, the pool flat") {
  one_host h;
  sluice::mq q{*h.c};
  constexpr std::size_t size = 256 * 1024;
  constexpr std::uint64_t bound = 8;
  constexpr int total = 48;
  REQUIRE(q.create_topic("tight", {.max_messages = bound, .when_full = sluice::full_policy::block,
                                   .max_message_bytes = size}).value());
  auto used_before = pool_used(*h.c);
  std::atomic<int> produced{0};
  std::atomic<bool> failed{false};
  std::thread producer{[&] {
    sluice::mq p{*h.c, "fast"};
    for (int i = 0; i < total; ++i) {
      auto at = p.produce("tight", numbered_message(static_cast<std::uint64_t>(i), size), {.timeout = 30s});
      if (!at) {
        failed = true;
        return;
      }
      ++produced;
    }
  }};
  auto consumer = q.subscribe("slow", {"tight"}, {.prefetch = 2}).value();
  std::uint64_t most_held = 0, most_used = 0;
  int consumed = 0;
  while (consumed < total && !failed) {
    auto batch = consumer.poll({.max_messages = 1, .wait = 2s});
    REQUIRE(batch.ok());
    for (auto& m : *batch) {
      std::this_thread::sleep_for(40ms);  // slow
      CHECK(m.payload->str() == numbered_message(m.offset, size));
      auto t = q.topics().value();
      most_held = std::max(most_held, t[0].partitions[0].end - t[0].partitions[0].start);
      most_used = std::max(most_used, pool_used(*h.c) - std::min(pool_used(*h.c), used_before));
      REQUIRE(consumer.ack(m).ok());
      ++consumed;
    }
  }
  producer.join();
  CHECK_FALSE(failed);
  CHECK(produced == total);
  CHECK(consumed == total);
  CHECK(most_held <= bound);
  // The pool holds the bound's payloads and the one being written, not the
  // 12 MiB produced in all.
  CHECK_MESSAGE(most_used <= (bound + 2) * size, "pool grew by " << most_used);
}

TEST_CASE("mq process: members joining and leaving under load lose nothing and never see an acked message") {
  one_host h;
  sluice::mq q{*h.c};
  REQUIRE(q.create_topic("load", {.partitions = 4}).value());
  constexpr int total = 400;
  std::mutex mu;
  // Each ack by when it completed (a count of acks) and by whom. A
  // delivery a poll returns may predate an ack that completed while the
  // poll's batch was worked through (the partition moved meanwhile); one
  // of a message acked before the poll was even sent is a redelivery of
  // an acked message.
  struct ack_record {
    std::uint64_t seq = 0;
    std::string by;
  };
  std::map<std::pair<std::uint32_t, std::uint64_t>, ack_record> acked;
  std::uint64_t acks_done = 0;
  std::vector<std::string> violations;
  std::atomic<bool> producing{true};
  std::thread producer{[&] {
    sluice::mq p{*h.c, "steady"};
    for (int i = 0; i < total; ++i) {
      if (!p.produce("load", body_of(i), {.key = std::to_string(i)})) {
        std::lock_guard lock{mu};
        violations.push_back("a produce failed");
      }
      if (i % 20 == 0) std::this_thread::sleep_for(10ms);
    }
    producing = false;
  }};
  auto member = [&](unsigned seed) {
    auto c = connect(h.owner.address);
    sluice::mq mine{*c};
    std::mt19937 rng{seed};
    auto end = std::chrono::steady_clock::now() + 30s;
    while (std::chrono::steady_clock::now() < end) {
      {
        std::lock_guard lock{mu};
        if (!producing && acked.size() == total) return;
      }
      auto consumer = mine.subscribe("crowd", {"load"}, {.lease = 2s});
      if (!consumer) continue;
      auto stay_until = std::chrono::steady_clock::now() + std::chrono::milliseconds{100 + rng() % 400};
      while (std::chrono::steady_clock::now() < stay_until) {
        std::uint64_t acks_before = 0;
        {
          std::lock_guard lock{mu};
          acks_before = acks_done;
        }
        auto batch = consumer->poll({.max_messages = 8, .wait = 100ms});
        if (!batch) break;
        for (auto& m : *batch) {
          std::pair place{m.partition, m.offset};
          {
            std::lock_guard lock{mu};
            if (auto a = acked.find(place); a != acked.end() && a->second.seq < acks_before) {
              violations.push_back("acked message delivered again: " + std::to_string(m.partition) + "@" +
                                   std::to_string(m.offset) + " to member " + std::to_string(seed) + " (delivery " +
                                   std::to_string(m.delivery_count) + ", generation " + std::to_string(m.generation) +
                                   "), acked by " + a->second.by);
            }
          }
          if (!m.payload || m.payload->str().rfind("message-", 0) != 0) {
            std::lock_guard lock{mu};
            violations.push_back("a payload did not read back");
          }
          if (rng() % 10 == 0) continue;  // left unacked: it goes out again when this member leaves
          if (consumer->ack(m)) {
            std::lock_guard lock{mu};
            if (acked.count(place) != 0) {
              violations.push_back("acked twice: " + std::to_string(m.partition) + "@" + std::to_string(m.offset));
            }
            acked.emplace(place, ack_record{acks_done++, "member " + std::to_string(seed) + " (delivery " +
                                                          std::to_string(m.delivery_count) + ", generation " +
                                                          std::to_string(m.generation) + ")"});
          }
        }
      }
      (void)consumer->close();
    }
  };
  std::vector<std::thread> members;
  for (unsigned i = 0; i < 3; ++i) members.emplace_back(member, i + 1);
  producer.join();
  for (auto& t : members) t.join();
  for (auto& v : violations) FAIL_CHECK(v);
  CHECK(acked.size() == total);
  auto lag = q.lag("crowd").value();
  std::uint64_t behind = 0;
  for (auto& p : lag) behind += p.messages;
  CHECK(behind == 0);
}
