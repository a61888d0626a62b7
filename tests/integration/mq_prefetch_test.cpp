// MQ payloads fetched ahead: a consumer's owner fetches the payloads of
// the messages its member will be handed next from the owner that holds
// them, before the member polls; the poll then reads them on its own host,
// and each crosses between the hosts once. With [owner] mq_prefetch = 0
// nothing moves before the poll.

#include <doctest/doctest.h>

#include <thread>

#include "sluice/mq.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

constexpr std::size_t message_count = 8;
constexpr std::size_t message_size = 2 << 20;
constexpr std::uint64_t all_bytes = message_count * message_size;

/// Two owners; the consumer's (A) with `a_config`.
struct two_hosts {
  node_proc master;
  node_proc a;
  node_proc b;
  explicit two_hosts(const std::string& a_config) {
    auto config = write_config("[owner]\ntransfer_chunk = \"1MiB\"\n" + a_config);
    master = start_node({"master", "--listen", "127.0.0.1:0"});
    a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", config});
    b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  }
};

/// Payload bytes the owner at `address` moved over its links to other
/// owners, as it last reported.
std::uint64_t link_bytes(const sluice::cluster_status& s, const std::string& address) {
  std::uint64_t n = 0;
  for (auto& m : s.members) {
    if (m.address != address) continue;
    for (auto& l : m.links) {
      for (auto& p : l.paths) n += p.bytes;
    }
  }
  return n;
}

std::string body_of(std::size_t i) { return pattern(message_size, static_cast<char>('a' + i)); }

/// Polls until every message came (or 20 s passed), checks every byte of
/// each and acks it.
void take_all(sluice::mq_consumer& consumer) {
  std::vector<bool> seen(message_count, false);
  std::size_t got = 0;
  auto end = std::chrono::steady_clock::now() + 20s;
  while (got < message_count && std::chrono::steady_clock::now() < end) {
    auto batch = consumer.poll({.max_messages = message_count, .wait = 500ms});
    REQUIRE_MESSAGE(batch.ok(), (batch ? "" : batch.error().to_string()));
    for (auto& m : *batch) {
      REQUIRE_MESSAGE(m.payload.ok(), (m.payload ? "" : m.payload.error().to_string()));
      auto i = std::stoul(m.message_id);
      REQUIRE(i < message_count);
      CHECK(m.payload->str() == body_of(i));
      CHECK_FALSE(seen[i]);
      seen[i] = true;
      got += 1;
      REQUIRE(consumer.ack(m).ok());
    }
  }
  CHECK(got == message_count);
}

/// Produces the messages through B, with a member of "g" subscribed
/// through A that has not polled yet.
struct produced_elsewhere {
  two_hosts cluster;
  std::unique_ptr<sluice::client> on_a;
  std::unique_ptr<sluice::client> on_b;
  std::optional<sluice::mq_consumer> consumer;
  explicit produced_elsewhere(const std::string& a_config) : cluster{a_config} {
    on_a = connect_shm(cluster.a.address);
    on_b = connect(cluster.b.address);
    await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
    sluice::mq qb{*on_b};
    REQUIRE(qb.create_topic("frames", {.partitions = 2}).value());
    sluice::mq qa{*on_a};
    auto member = qa.subscribe("g", {"frames"}, {.prefetch = 16});
    REQUIRE_MESSAGE(member.ok(), (member ? "" : member.error().to_string()));
    consumer.emplace(std::move(*member));
    for (std::size_t i = 0; i < message_count; ++i) {
      auto at = qb.produce("frames", body_of(i), {.message_id = std::to_string(i)});
      REQUIRE_MESSAGE(at.ok(), (at ? "" : at.error().to_string()));
    }
  }
};

}  // namespace

TEST_CASE("mq prefetch: payloads held by another owner move to the consumer's owner before it polls, once") {
  produced_elsewhere run{""};
  // Before any poll, A has fetched every payload the member will be handed.
  auto before = await_status(*run.on_a, [&](const sluice::cluster_status& s) {
    return link_bytes(s, run.cluster.a.address) >= all_bytes;
  });
  CHECK(link_bytes(before, run.cluster.a.address) < all_bytes + message_size);

  take_all(*run.consumer);

  // The polls read them on A: nothing more crossed. Three reports later,
  // A's links carried no second copy of them.
  std::this_thread::sleep_for(1500ms);
  auto after = run.on_a->status();
  REQUIRE(after.ok());
  CHECK(link_bytes(*after, run.cluster.a.address) < all_bytes + message_size);
}

TEST_CASE("mq prefetch: an owner with mq_prefetch = 0 fetches a payload only when it is read") {
  produced_elsewhere run{"mq_prefetch = 0\n"};
  std::this_thread::sleep_for(1500ms);  // three reports
  auto before = run.on_a->status();
  REQUIRE(before.ok());
  CHECK(link_bytes(*before, run.cluster.a.address) < message_size);

  take_all(*run.consumer);
  auto after = await_status(*run.on_a, [&](const sluice::cluster_status& s) {
    return link_bytes(s, run.cluster.a.address) >= all_bytes;
  });
  CHECK(link_bytes(after, run.cluster.a.address) < all_bytes + message_size);
}
