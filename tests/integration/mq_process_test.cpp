// MQ across processes: a master killed with SIGKILL comes back with every
// committed message and every group's offset, and with payload replicas 2
// an owner killed with SIGKILL loses no acknowledged message.

#include <doctest/doctest.h>

#include <signal.h>

#include <set>
#include <thread>

#include "sluice/mq.hpp"
#include "tests/support/nodes.hpp"

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
