// MQ in the simulator: producers and two consumer groups over the real
// actors under heavy faults, every delivery judged (sim/mq_checker.hpp),
// and planted bugs in the master (forgotten acks, leaked payloads) caught
// by sweeps of seeds.

#include <doctest/doctest.h>

#include "actors/common/mq_reply.hpp"
#include "runtime/log.hpp"
#include "sim/runner.hpp"
#include "sim/world.hpp"
#include "tests/sim/staged_world.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::sim::check_determinism;
using sluice::sim::fault_level;
using sluice::sim::run_options;
using sluice::sim::run_seed;

run_options mq_run(std::uint64_t seed, bool planted = false, bool leaks = false) {
  (void)sluice::configure_logging("off");
  run_options o;
  o.seed = seed;
  o.duration = 5s;
  o.faults = fault_level::heavy;
  o.mq = true;
  o.mq_forgets_acks = planted;
  o.mq_leaks_payloads = leaks;
  return o;
}

}  // namespace

TEST_CASE("sim: 20 heavy seeds pass with producers and consumer groups, and messages are delivered, redelivered "
          "and acked") {
  constexpr std::uint64_t seeds = 20;
  std::uint64_t produced = 0, delivered = 0, redelivered = 0, acked = 0, acked_upto = 0, refused_full = 0,
                seeks = 0, replayed = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto r = run_seed(mq_run(seed));
    CHECK_MESSAGE(r.passed(), "seed " << seed << ": " << (r.passed() ? "" : r.violations.front()));
    produced += r.mq_produced;
    delivered += r.mq_delivered;
    redelivered += r.mq_redelivered;
    acked += r.mq_acked;
    acked_upto += r.mq_acked_upto;
    refused_full += r.mq_refused_full;
    seeks += r.mq_seeks;
    replayed += r.mq_replayed;
  }
  MESSAGE(produced << " produced, " << delivered << " delivered (" << redelivered << " redelivered), " << acked
                   << " acked over " << seeds << " seeds");
  CHECK(produced > 20 * seeds);
  CHECK(redelivered > 0);
  CHECK(acked >= produced);
  MESSAGE(acked_upto << " ack_upto calls confirmed, " << refused_full << " produces refused by a full topic");
  CHECK(acked_upto > 0);
  CHECK(refused_full > 0);
  MESSAGE(seeks << " seeks confirmed, " << replayed << " acked messages delivered again after them");
  CHECK(seeks > 0);
  CHECK(replayed > 0);
}

TEST_CASE("sim: runs with the MQ workload replay identically") {
  for (std::uint64_t seed : {3, 4}) {
    auto divergence = check_determinism(mq_run(seed));
    CHECK_MESSAGE(divergence.empty(), "seed " << seed << ": " << divergence);
  }
}

TEST_CASE("sim: a master that forgets acks when a partition moves is caught by a sweep, and the same seeds pass "
          "without it") {
  // The same 20 seeds pass without the bug (the test above); with it a
  // quarter of them must see an acked message come back.
  constexpr std::uint64_t seeds = 20;
  std::uint64_t caught = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto broken = run_seed(mq_run(seed, true));
    if (broken.passed()) continue;
    ++caught;
    if (caught == 1) MESSAGE("seed " << seed << " caught it: " << broken.violations.front());
  }
  MESSAGE(caught << " of " << seeds << " seeds caught it");
  CHECK(caught >= seeds / 4);
}

TEST_CASE("sim: a master that never frees consumed payloads is caught by the memory check") {
  // The same seeds pass without the leak (the first test): every payload
  // a shell no longer names is freed by the end of the run.
  constexpr std::uint64_t seeds = 5;
  std::uint64_t caught = 0;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    auto broken = run_seed(mq_run(seed, false, true));
    if (broken.passed()) continue;
    ++caught;
    if (caught == 1) MESSAGE("seed " << seed << " caught it: " << broken.violations.front());
  }
  MESSAGE(caught << " of " << seeds << " seeds caught it");
  CHECK(caught == seeds);
}

namespace {

/// What a staged step answered, as the reply body it must be.
template <class T>
T answer_of(std::optional<sluice::result<sluice::wire::message>> reply) {
  REQUIRE(reply.has_value());
  auto body = sluice::mq_reply<T>(*reply);
  REQUIRE_MESSAGE(body.ok(), (body.ok() ? std::string{} : body.error().to_string()));
  return *body;
}

/// A member of group "g" reading topic "t" through client `c`.
sluice::wire::mq_join join_g() {
  sluice::wire::mq_group_config g;
  g.topics = {"t"};
  g.ack_timeout_ms = 30'000;
  g.max_deliveries = 5;
  g.prefetch = 16;
  return sluice::wire::mq_join{"g", 0, g, 30'000};
}

/// The payloads client 0 reads after it polled both partitions of "t",
/// and its partition 0 or 1 moved to client 1, which consumed that
/// message first: whether each read back.
std::vector<bool> read_after_move(bool frees_recalled) {
  using namespace sluice;
  (void)configure_logging("off");
  sim::world_config cfg;
  cfg.seed = 5;
  cfg.owners = 1;
  cfg.clients = 2;
  cfg.mq_frees_recalled = frees_recalled;
  sim::world w{cfg};
  w.run_until(w.now() + 2s);
  wire::mq_topic_config t;
  t.partitions = 2;
  answer_of<wire::mq_topic_created>(sim::test::call(w, 0, wire::mq{wire::mq_create_topic{"t", t}}).first);
  std::vector<std::string> keys;
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto key = "~mq/t/payload-" + std::to_string(p);
    auto bytes = shared_bytes::copy_of(std::string(1000, static_cast<char>('a' + p)));
    auto [put, took] = sim::test::call(w, 0, wire::kv_put{key, {}, 0, 1, ""}, bytes);
    REQUIRE(put.has_value());
    REQUIRE(put->ok());
    wire::mq_message m{key, 1000, {}, {}, true, p};
    auto produced = answer_of<wire::mq_produced>(sim::test::call(w, 0, wire::mq{wire::mq_produce{"t", 0, {m}}}).first);
    REQUIRE(produced.results.size() == 1);
    REQUIRE(produced.results.front().code == errc::ok);
    keys.push_back(key);
  }
  answer_of<wire::mq_joined>(sim::test::call(w, 0, wire::mq{join_g()}).first);
  wire::mq_poll poll{"g", 0, 8, 0, 0, 1, 0, {}};
  auto first = answer_of<wire::mq_polled>(sim::test::call(w, 0, wire::mq{poll}).first);
  REQUIRE(first.deliveries.size() == 2);
  // Client 1 joins: one partition moves to it, with what client 0 was
  // handed there, and client 1 consumes that message at once.
  answer_of<wire::mq_joined>(sim::test::call(w, 1, wire::mq{join_g()}).first);
  auto second = answer_of<wire::mq_polled>(sim::test::call(w, 1, wire::mq{poll}).first);
  REQUIRE(second.deliveries.size() == 1);
  auto& d = second.deliveries.front();
  CHECK(d.delivery_count == 2);
  wire::mq_settle ack;
  ack.group = "g";
  ack.partition = d.partition;
  ack.offset = d.offset;
  ack.generation = d.generation;
  CHECK(answer_of<wire::mq_settled>(sim::test::call(w, 1, wire::mq{ack}).first).count == 1);
  w.run_until(w.now() + 2s);  // the master prunes and frees what it frees
  // Only now does client 0 read the batch its poll returned.
  std::vector<bool> read;
  for (auto& got : first.deliveries) {
    auto [reply, took] = sim::test::call(w, 0, wire::kv_get{got.payload});
    REQUIRE(reply.has_value());
    auto body = reply_body<wire::kv_get_reply>(*reply);
    bool ok = body.ok() && (*reply)->payload.size() == 1000;
    if (!body.ok()) CHECK(body.code() == errc::not_found);
    read.push_back(ok);
  }
  return read;
}

}  // namespace

TEST_CASE("sim: a member whose partition moves before it reads its batch still reads it, though the next holder "
          "consumed the message first") {
  CHECK(read_after_move(false) == std::vector<bool>{true, true});
  // The same steps against a master that frees the recalled payload at
  // once: the moved message's read fails, the other's does not.
  auto broken = read_after_move(true);
  REQUIRE(broken.size() == 2);
  CHECK(broken[0] != broken[1]);
}
