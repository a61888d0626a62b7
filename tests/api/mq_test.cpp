// MQ through the public API (sluice/mq.hpp), against an in-process
// cluster: topics, produce and consume with acks, redelivery, groups
// sharing partitions, backpressure, dedupe, seek, lag and bad input.

#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/dict.hpp"
#include "sluice/mq.hpp"
#include "sluice/node.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;

struct fixture {
  std::unique_ptr<sluice::local_cluster> cluster;
  std::unique_ptr<sluice::client> c;

  fixture() {
    auto started = sluice::local_cluster::start();
    REQUIRE_MESSAGE(started.ok(), (started ? "" : started.error().to_string()));
    cluster = std::move(*started);
    c = connect();
  }

  std::unique_ptr<sluice::client> connect() {
    auto k = cluster->connect();
    REQUIRE_MESSAGE(k.ok(), (k ? "" : k.error().to_string()));
    return std::move(*k);
  }
};

std::string text_of(const sluice::mq_message& m) {
  REQUIRE_MESSAGE(m.payload.ok(), (m.payload ? "" : m.payload.error().to_string()));
  return std::string{m.payload->str()};
}

/// Polls until `n` messages came or `limit` passed.
std::vector<sluice::mq_message> poll_n(sluice::mq_consumer& consumer, std::size_t n,
                                       std::chrono::milliseconds limit = 5s) {
  std::vector<sluice::mq_message> out;
  auto end = std::chrono::steady_clock::now() + limit;
  while (out.size() < n && std::chrono::steady_clock::now() < end) {
    auto batch = consumer.poll({.max_messages = n - out.size(), .wait = 200ms});
    REQUIRE_MESSAGE(batch.ok(), (batch ? "" : batch.error().to_string()));
    for (auto& m : *batch) out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

TEST_CASE_FIXTURE(fixture, "mq: a produced message is consumed once, in order, and acked messages never return") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("jobs").value());
  CHECK_FALSE(q.create_topic("jobs").value());  // the same options again: nothing to do
  for (int i = 0; i < 10; ++i) {
    auto at = q.produce("jobs", "job-" + std::to_string(i));
    REQUIRE_MESSAGE(at.ok(), (at ? "" : at.error().to_string()));
    CHECK(at->partition == 0);
    CHECK(at->offset == static_cast<std::uint64_t>(i));
  }
  auto consumer = q.subscribe("workers", {"jobs"}).value();
  auto got = poll_n(consumer, 10);
  REQUIRE(got.size() == 10);
  for (int i = 0; i < 10; ++i) {
    CHECK(got[static_cast<std::size_t>(i)].offset == static_cast<std::uint64_t>(i));
    CHECK(text_of(got[static_cast<std::size_t>(i)]) == "job-" + std::to_string(i));
    CHECK(got[static_cast<std::size_t>(i)].delivery_count == 1);
    REQUIRE(consumer.ack(got[static_cast<std::size_t>(i)]).ok());
  }
  // Acked twice: the message is no longer held.
  CHECK(consumer.ack(got[0]).code() == errc::not_found);
  auto more = consumer.poll({.wait = 100ms});
  REQUIRE(more.ok());
  CHECK(more->empty());
  auto lag = q.lag("workers").value();
  REQUIRE(lag.size() == 1);
  CHECK(lag[0].committed == 10);
  CHECK(lag[0].messages == 0);
}

TEST_CASE_FIXTURE(fixture, "mq: ack_and_poll acks a batch and polls the next in one call, and a refused ack polls nothing") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("pairs").ok());
  for (int i = 0; i < 6; ++i) REQUIRE(q.produce("pairs", std::to_string(i)).ok());
  auto consumer = q.subscribe("g", {"pairs"}).value();
  auto first = poll_n(consumer, 3);
  REQUIRE(first.size() == 3);
  auto second = consumer.ack_and_poll(first, {.max_messages = 3, .wait = 1s});
  REQUIRE_MESSAGE(second.ok(), (second ? "" : second.error().to_string()));
  REQUIRE(second->size() == 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(text_of((*second)[i]) == std::to_string(3 + i));
  auto lag = q.lag("g").value();
  REQUIRE(lag.size() == 1);
  CHECK(lag[0].committed == 3);
  CHECK(lag[0].in_flight == 3);

  // An ack of a message acked already is refused: the call fails with its
  // error and delivers nothing, and the ack before it stands.
  for (int i = 6; i < 8; ++i) REQUIRE(q.produce("pairs", std::to_string(i)).ok());
  std::vector<sluice::mq_message> mixed;
  for (auto* m : {&(*second)[0], &first[0]}) {
    mixed.push_back(sluice::mq_message{m->topic, m->partition, m->offset, m->delivery_count, sluice::value{},
                                       m->generation, {}});
  }
  auto refused = consumer.ack_and_poll(mixed, {.max_messages = 3, .wait = 1s});
  CHECK(refused.code() == errc::not_found);
  lag = q.lag("g").value();
  CHECK(lag[0].committed == 4);
  CHECK(lag[0].next == 6);  // nothing more went out
  CHECK(lag[0].in_flight == 2);

  auto third = consumer.ack_and_poll(std::span{*second}.subspan(1), {.max_messages = 3, .wait = 1s});
  REQUIRE_MESSAGE(third.ok(), (third ? "" : third.error().to_string()));
  REQUIRE(third->size() == 2);
  CHECK(text_of((*third)[0]) == "6");
  CHECK(text_of((*third)[1]) == "7");
  // Nothing to poll: the acks still go in, the call waits and comes back empty.
  auto last = consumer.ack_and_poll(*third, {.wait = 100ms});
  REQUIRE(last.ok());
  CHECK(last->empty());
  lag = q.lag("g").value();
  CHECK(lag[0].committed == 8);
  CHECK(lag[0].messages == 0);

  std::vector<sluice::mq_message> too_many(1025);
  CHECK(consumer.ack_and_poll(too_many).code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(fixture, "mq: a waiting poll is woken by a produce, not by its deadline") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("wake").ok());
  auto consumer = q.subscribe("g", {"wake"}).value();
  auto other = connect();
  sluice::mq producer{*other};
  auto started = std::chrono::steady_clock::now();
  auto polled = std::async(std::launch::async, [&] { return consumer.poll({.wait = 10s}); });
  std::this_thread::sleep_for(200ms);
  REQUIRE(producer.produce("wake", "now").ok());
  auto batch = polled.get();
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE(batch.ok());
  REQUIRE(batch->size() == 1);
  CHECK(text_of(batch->front()) == "now");
  CHECK(took < 5s);  // far below the 10 s wait: the produce woke it
}

TEST_CASE_FIXTURE(fixture, "mq: a nacked message comes back with its delivery count raised") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("retry").ok());
  REQUIRE(q.produce("retry", "payload").ok());
  auto consumer = q.subscribe("g", {"retry"}).value();
  auto first = poll_n(consumer, 1);
  REQUIRE(first.size() == 1);
  REQUIRE(consumer.nack(first[0]).ok());
  auto second = poll_n(consumer, 1);
  REQUIRE(second.size() == 1);
  CHECK(second[0].offset == first[0].offset);
  CHECK(second[0].delivery_count == 2);
  CHECK(text_of(second[0]) == "payload");
  // The first delivery's generation still names the partition's holder,
  // but that delivery is settled: only the new one may be acked.
  REQUIRE(consumer.ack(second[0]).ok());
}

TEST_CASE_FIXTURE(fixture, "mq: unacked messages of a member that leaves go to another member, acked ones do not") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("handoff").ok());
  for (int i = 0; i < 6; ++i) REQUIRE(q.produce("handoff", std::to_string(i)).ok());
  auto second_client = connect();
  sluice::mq q2{*second_client};
  auto a = q.subscribe("g", {"handoff"}, {.prefetch = 6}).value();
  auto got = poll_n(a, 6);
  REQUIRE(got.size() == 6);
  for (int i = 0; i < 3; ++i) REQUIRE(a.ack(got[static_cast<std::size_t>(i)]).ok());
  auto b = q2.subscribe("g", {"handoff"}, {.prefetch = 6}).value();
  REQUIRE(a.close().ok());
  auto redelivered = poll_n(b, 3);
  REQUIRE(redelivered.size() == 3);
  std::set<std::uint64_t> offsets;
  for (auto& m : redelivered) {
    offsets.insert(m.offset);
    CHECK(m.delivery_count == 2);
    REQUIRE(b.ack(m).ok());
  }
  CHECK(offsets == std::set<std::uint64_t>{3, 4, 5});
  auto none = b.poll({.wait = 100ms});
  REQUIRE(none.ok());
  CHECK(none->empty());
}

TEST_CASE_FIXTURE(fixture, "mq: two members of a group never hold the same partition") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("wide", {.partitions = 4}).ok());
  for (int i = 0; i < 40; ++i) REQUIRE(q.produce("wide", std::to_string(i)).ok());
  auto other = connect();
  sluice::mq q2{*other};
  auto a = q.subscribe("g", {"wide"}).value();
  auto b = q2.subscribe("g", {"wide"}).value();
  std::map<std::uint32_t, std::set<int>> holders;  // partition -> which member got it
  std::size_t seen = 0;
  auto end = std::chrono::steady_clock::now() + 10s;
  while (seen < 40 && std::chrono::steady_clock::now() < end) {
    int who = 0;
    for (auto* m : {&a, &b}) {
      auto batch = m->poll({.wait = 50ms});
      REQUIRE(batch.ok());
      for (auto& msg : *batch) {
        holders[msg.partition].insert(who);
        REQUIRE(m->ack(msg).ok());
        ++seen;
      }
      ++who;
    }
  }
  CHECK(seen == 40);
  REQUIRE(holders.size() == 4);
  std::set<int> members;
  for (auto& [p, who] : holders) {
    CHECK(who.size() == 1);
    members.insert(*who.begin());
  }
  CHECK(members.size() == 2);  // the partitions are spread over both
}

TEST_CASE_FIXTURE(fixture, "mq: a producer of a full topic waits for an ack, then goes on") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("tight", {.max_messages = 2}).ok());
  auto consumer = q.subscribe("g", {"tight"}).value();
  REQUIRE(q.produce("tight", "a").ok());
  REQUIRE(q.produce("tight", "b").ok());
  auto other = connect();
  sluice::mq producer{*other};
  // Full and nobody acks: the produce waits out its deadline.
  auto refused = producer.produce("tight", "c", {.timeout = 500ms});
  CHECK(refused.code() == errc::overloaded);
  auto waiting = std::async(std::launch::async, [&] { return producer.produce("tight", "d", {.timeout = 10s}); });
  auto got = poll_n(consumer, 2);
  REQUIRE(got.size() == 2);
  CHECK(waiting.wait_for(300ms) == std::future_status::timeout);  // still full: two unacked
  REQUIRE(consumer.ack(got[0]).ok());
  auto at = waiting.get();
  REQUIRE_MESSAGE(at.ok(), (at ? "" : at.error().to_string()));
  CHECK(at->offset == 2);
  auto last = poll_n(consumer, 1);
  REQUIRE(last.size() == 1);
  CHECK(text_of(last[0]) == "d");
}

TEST_CASE_FIXTURE(fixture, "mq: a full topic that rejects answers overloaded at once") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("strict", {.max_messages = 1, .when_full = sluice::full_policy::reject}).ok());
  auto consumer = q.subscribe("g", {"strict"}).value();
  REQUIRE(q.produce("strict", "a").ok());
  auto started = std::chrono::steady_clock::now();
  CHECK(q.produce("strict", "b", {.timeout = 10s}).code() == errc::overloaded);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
}

TEST_CASE_FIXTURE(fixture, "mq: a message id produced twice is appended once") {
  sluice::mq q{*c, "producer-1"};
  REQUIRE(q.create_topic("once", {.dedupe_window = 60s}).ok());
  auto first = q.produce("once", "x", {.message_id = "m-1"}).value();
  CHECK_FALSE(first.duplicate);
  // Another process with the same producer name retries.
  sluice::mq again{*c, "producer-1"};
  auto second = again.produce("once", "x", {.message_id = "m-1"}).value();
  CHECK(second.duplicate);
  CHECK(second.offset == first.offset);
  CHECK(q.produce("once", "y", {.message_id = "m-2"}).value().offset == first.offset + 1);
  auto topics = q.topics().value();
  REQUIRE(topics.size() == 1);
  CHECK(topics[0].partitions[0].end == 2);
}

TEST_CASE_FIXTURE(fixture, "mq: seek replays a partition from an offset") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("replay", {.max_messages = 100}).ok());
  for (int i = 0; i < 5; ++i) REQUIRE(q.produce("replay", std::to_string(i)).ok());
  auto consumer = q.subscribe("g", {"replay"}).value();
  // A second group keeps the messages held while the first replays.
  auto keeper = q.subscribe("keeper", {"replay"}).value();
  auto got = poll_n(consumer, 5);
  REQUIRE(got.size() == 5);
  REQUIRE(consumer.ack_upto("replay", 0, 4).value() == 5);
  REQUIRE(consumer.seek("replay", 0, 2).ok());
  auto again = poll_n(consumer, 3);
  REQUIRE(again.size() == 3);
  CHECK(again[0].offset == 2);
  CHECK(text_of(again[0]) == "2");
  CHECK(consumer.seek("replay", 0, 99).code() == errc::invalid_argument);
}

TEST_CASE_FIXTURE(fixture, "mq: payloads stay until every group acked, then go") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("shared").ok());
  auto a = q.subscribe("a", {"shared"}).value();
  auto b = q.subscribe("b", {"shared"}).value();
  REQUIRE(q.produce("shared", "both").ok());
  auto from_a = poll_n(a, 1);
  REQUIRE(from_a.size() == 1);
  REQUIRE(a.ack(from_a[0]).ok());
  CHECK(c->count("~mq/shared/").value() == 1);  // b has not acked
  auto from_b = poll_n(b, 1);
  REQUIRE(from_b.size() == 1);
  CHECK(text_of(from_b[0]) == "both");
  REQUIRE(b.ack(from_b[0]).ok());
  auto end = std::chrono::steady_clock::now() + 5s;
  while (c->count("~mq/shared/").value() != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(c->count("~mq/shared/").value() == 0);
  CHECK(q.topics().value()[0].partitions[0].start == 1);
}

TEST_CASE_FIXTURE(fixture, "mq: bad input gets clear errors") {
  sluice::mq q{*c};
  CHECK(q.produce("nope", "x").code() == errc::not_found);
  CHECK(q.create_topic("bad/name").code() == errc::invalid_argument);
  CHECK(q.create_topic("zero", {.partitions = 0}).code() == errc::invalid_argument);
  REQUIRE(q.create_topic("small", {.max_message_bytes = 4}).ok());
  CHECK(q.create_topic("small", {.partitions = 2}).code() == errc::conflict);
  CHECK(q.produce("small", "too large").code() == errc::invalid_argument);
  CHECK(q.produce("small", "ok", {.partition = 7}).code() == errc::invalid_argument);
  CHECK(q.subscribe("g", {"nope"}).code() == errc::not_found);
  auto consumer = q.subscribe("g", {"small"}).value();
  sluice::mq_message forged{"small", 0, 0, 1, sluice::value{}, 1};
  CHECK(consumer.ack(forged).code() == errc::not_found);
  forged.partition = 3;
  CHECK_FALSE(consumer.ack(forged).ok());
  CHECK(q.lag("nope").code() == errc::not_found);
  // Nothing a refused produce wrote stays behind.
  CHECK(c->count("~mq/").value() == 0);
  CHECK(q.delete_topic("nope").code() == errc::not_found);
}

TEST_CASE_FIXTURE(fixture, "mq: a dict with a tensor is one message, read back as the same fields") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("frames").ok());
  std::vector<float> pixels(1 << 16);
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<float>(i) * 0.5f;
  sluice::dict_builder d;
  REQUIRE(d.add_int64("step", 42).ok());
  REQUIRE(d.add_string("camera", "left").ok());
  sluice::tensor_info info{.dtype = sluice::dtype_float32, .shape = {256, 256}};
  REQUIRE(d.add_tensor("image", info, std::as_bytes(std::span{pixels})).ok());
  auto at = q.produce("frames", d);
  REQUIRE_MESSAGE(at.ok(), (at ? "" : at.error().to_string()));
  auto consumer = q.subscribe("viewers", {"frames"}).value();
  auto got = poll_n(consumer, 1);
  REQUIRE(got.size() == 1);
  REQUIRE(got[0].payload.ok());
  auto dict = sluice::dict_view::parse(got[0].payload->bytes());
  REQUIRE_MESSAGE(dict.ok(), (dict ? "" : dict.error().to_string()));
  CHECK(dict->find("step")->as_int64().value() == 42);
  CHECK(dict->find("camera")->as_string().value() == "left");
  auto image = dict->find("image")->as_tensor();
  REQUIRE(image.ok());
  auto data = image->data;
  REQUIRE(data.size() == pixels.size() * sizeof(float));
  CHECK(std::memcmp(data.data(), pixels.data(), data.size()) == 0);
  CHECK(consumer.ack(got[0]).ok());
}

TEST_CASE("mq: a reserved message is written in place and produced") {
  // An owner that listens, so the client reaches it through shared memory.
  sluice::local_cluster_options listening;
  listening.listen = "127.0.0.1:0";
  auto cluster = sluice::local_cluster::start(listening);
  REQUIRE_MESSAGE(cluster.ok(), (cluster ? "" : cluster.error().to_string()));
  sluice::client_options shm;
  shm.transport = sluice::client_transport::shared_memory;
  auto local = sluice::client::connect((*cluster)->client_address(), shm);
  REQUIRE_MESSAGE(local.ok(), (local ? "" : local.error().to_string()));
  sluice::mq q{**local};
  REQUIRE(q.create_topic("blobs", {.max_message_bytes = 1 << 20}).ok());
  auto room = q.reserve("blobs", 1 << 20);
  REQUIRE_MESSAGE(room.ok(), (room ? "" : room.error().to_string()));
  auto bytes = room->bytes();
  REQUIRE(bytes.size() == std::size_t{1} << 20);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 7);
  const auto* written_at = bytes.data();
  auto at = q.produce(std::move(*room));
  REQUIRE_MESSAGE(at.ok(), (at ? "" : at.error().to_string()));
  CHECK(at->offset == 0);
  auto consumer = q.subscribe("readers", {"blobs"}).value();
  auto got = poll_n(consumer, 1);
  REQUIRE(got.size() == 1);
  auto read = got[0].payload->bytes();
  REQUIRE(read.size() == bytes.size());
  bool same = true;
  for (std::size_t i = 0; i < read.size(); ++i) same = same && read[i] == static_cast<std::byte>(i * 7);
  CHECK(same);
  // On the owner's host the reservation was the pool memory the consumer reads.
  CHECK(static_cast<const void*>(read.data()) == static_cast<const void*>(written_at));
  CHECK(q.reserve("blobs", (1 << 20) + 1).code() == errc::invalid_argument);
  CHECK(q.reserve("nope", 8).code() == errc::not_found);
}

TEST_CASE_FIXTURE(fixture, "mq: a batch is appended in order with one result per message") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("batch", {.partitions = 2, .max_message_bytes = 16, .dedupe_window = 60s}).ok());
  std::vector<std::string> texts;
  for (int i = 0; i < 2000; ++i) texts.push_back("m" + std::to_string(i));
  texts[5] = std::string(17, 'x');  // over the topic's largest message
  std::vector<sluice::mq_item> items;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    items.push_back({std::as_bytes(std::span{texts[i].data(), texts[i].size()}), {}, "id" + std::to_string(i),
                     static_cast<std::uint32_t>(i % 2)});
  }
  auto done = q.produce_batch("batch", items);
  REQUIRE(done.size() == items.size());
  CHECK(done[5].code() == errc::invalid_argument);
  std::map<std::uint32_t, std::uint64_t> next;
  for (std::size_t i = 0; i < done.size(); ++i) {
    if (i == 5) continue;
    REQUIRE_MESSAGE(done[i].ok(), (done[i] ? "" : done[i].error().to_string()));
    CHECK(done[i]->partition == i % 2);
    CHECK(done[i]->offset == next[done[i]->partition]++);  // in order, per partition
  }
  // The same ids again: duplicates, nothing appended.
  std::vector<sluice::mq_item> again(items.begin(), items.begin() + 3);
  auto dup = q.produce_batch("batch", again);
  CHECK(dup[0]->duplicate);
  CHECK(dup[1]->duplicate);
  CHECK(dup[1]->offset == done[1]->offset);
  auto topics = q.topics().value();
  REQUIRE(topics.size() == 1);
  CHECK(topics[0].partitions[0].end + topics[0].partitions[1].end == 1999);
  CHECK(q.produce_batch("nope", again)[2].code() == errc::not_found);
  CHECK(q.produce_batch("batch", {}).empty());
}

TEST_CASE("mq: a payload no message names is freed after the orphan grace, a named one stays") {
  sluice::local_cluster_options o;
  o.config_text = "[master]\nmq_orphan_grace = \"1s\"\n";
  auto cluster = sluice::local_cluster::start(o);
  REQUIRE_MESSAGE(cluster.ok(), (cluster ? "" : cluster.error().to_string()));
  auto c = (*cluster)->connect().value();
  sluice::mq q{*c};
  REQUIRE(q.create_topic("jobs").ok());
  REQUIRE(q.produce("jobs", "named").ok());
  // What a producer that died between its two steps leaves behind.
  REQUIRE(c->put("~mq/jobs/dead-producer/0", "orphan").ok());
  CHECK(c->count("~mq/").value() == 2);
  auto end = std::chrono::steady_clock::now() + 15s;
  while (c->exists("~mq/jobs/dead-producer/0").value() && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(100ms);
  }
  CHECK_FALSE(c->exists("~mq/jobs/dead-producer/0").value());
  CHECK(c->count("~mq/").value() == 1);
  auto consumer = q.subscribe("g", {"jobs"}).value();
  auto got = poll_n(consumer, 1);
  REQUIRE(got.size() == 1);
  CHECK(text_of(got[0]) == "named");
}

TEST_CASE_FIXTURE(fixture, "mq: a message out of deliveries goes to the dead-letter topic with its origin, payload shared") {
  sluice::mq q{*c};
  REQUIRE(q.create_topic("jobs.dead").ok());
  REQUIRE(q.create_topic("jobs", {.dead_letter = "jobs.dead"}).ok());
  CHECK(q.topics().value()[0].options.dead_letter == "jobs.dead");
  auto workers = q.subscribe("workers", {"jobs"}, {.max_deliveries = 2}).value();
  REQUIRE(q.produce("jobs", "poison", {.message_id = "job-1"}).ok());
  REQUIRE(q.produce("jobs", "fine").ok());
  for (std::uint32_t round = 1; round <= 2; ++round) {
    auto got = poll_n(workers, 1);
    REQUIRE(got.size() == 1);
    CHECK(got[0].offset == 0);
    CHECK(got[0].delivery_count == round);
    CHECK(got[0].message_id == "job-1");
    REQUIRE(workers.nack(got[0]).ok());
  }
  // Dead after its second nack: the group goes on with the next message.
  auto next = poll_n(workers, 1);
  REQUIRE(next.size() == 1);
  CHECK(next[0].offset == 1);
  CHECK(text_of(next[0]) == "fine");
  REQUIRE(workers.ack(next[0]).ok());

  auto triage = q.subscribe("triage", {"jobs.dead"}).value();
  auto dead = poll_n(triage, 1);
  REQUIRE(dead.size() == 1);
  CHECK(dead[0].topic == "jobs.dead");
  CHECK(dead[0].message_id == "jobs/0/0@workers");
  CHECK(text_of(dead[0]) == "poison");
  // One payload object for both messages; "jobs" has let go of its shell.
  auto end = std::chrono::steady_clock::now() + 5s;
  while (q.topics().value()[0].partitions[0].start != 2 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  auto topics = q.topics().value();
  REQUIRE(topics.size() == 2);
  CHECK(topics[0].name == "jobs");
  CHECK(topics[0].partitions[0].start == 2);
  CHECK(c->count("~mq/jobs/").value() == 1);
  REQUIRE(triage.ack(dead[0]).ok());
  while (c->count("~mq/jobs/").value() != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(c->count("~mq/jobs/").value() == 0);
}

TEST_CASE_FIXTURE(fixture, "mq: without a dead-letter topic a dead message is dropped and its payload freed") {
  sluice::mq q{*c};
  CHECK(q.create_topic("self", {.dead_letter = "self"}).code() == errc::invalid_argument);
  REQUIRE(q.create_topic("lonely", {.dead_letter = "not.there"}).ok());
  auto g = q.subscribe("g", {"lonely"}, {.max_deliveries = 1}).value();
  REQUIRE(q.produce("lonely", "x").ok());
  auto got = poll_n(g, 1);
  REQUIRE(got.size() == 1);
  REQUIRE(g.nack(got[0]).ok());
  CHECK(poll_n(g, 1, 300ms).empty());
  auto end = std::chrono::steady_clock::now() + 5s;
  while (c->count("~mq/lonely/").value() != 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  CHECK(c->count("~mq/lonely/").value() == 0);
}
