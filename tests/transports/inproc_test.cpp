#include <doctest/doctest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "tests/transports/test_sink.hpp"
#include "transports/inproc/inproc_transport.hpp"

namespace sluice::transport {
namespace {

using namespace testing;

constexpr std::uint16_t tag_a = 3;
constexpr std::uint16_t tag_b = 4;

// Two transports on one hub, b listening as "master", a linked to it.
struct linked_pair {
  inproc_hub hub;
  recording_sink sink_a;
  recording_sink sink_b;
  inproc_transport a;
  inproc_transport b;
  link_id a_link = 0;
  link_id b_link = 0;

  explicit linked_pair(transport_limits limits_a = {}, transport_limits limits_b = {})
      : a(tag_a, sink_a, hub, limits_a), b(tag_b, sink_b, hub, limits_b) {
    REQUIRE(b.listen("master").value() == "master");
    a_link = a.connect("master").value();
    REQUIRE(sink_a.wait_link_up(a_link));
    b_link = sink_b.wait_up().value();
  }
};

}  // namespace

TEST_CASE("inproc: a connected pair exchanges frames both ways") {
  linked_pair p;
  CHECK(p.a.scheme() == "inproc");
  CHECK(p.a_link == make_link_id(tag_a, 1));
  CHECK(link_tag(p.b_link) == tag_b);
  CHECK(p.sink_a.peer(p.a_link) == "master");
  CHECK(p.sink_b.peer(p.b_link)->starts_with("inproc:"));

  REQUIRE(p.a.send(p.a_link, make_frame(7, patterned(100, 7))).ok());
  REQUIRE(p.b.send(p.b_link, make_frame(8, patterned(200, 8))).ok());
  REQUIRE(p.sink_b.wait_frames(p.b_link, 1));
  REQUIRE(p.sink_a.wait_frames(p.a_link, 1));
  CHECK(envelope_intact(p.sink_b.frames(p.b_link).at(0), 7));
  CHECK(is_patterned(p.sink_b.frames(p.b_link).at(0).payload, 100, 7));
  CHECK(envelope_intact(p.sink_a.frames(p.a_link).at(0), 8));
  CHECK(is_patterned(p.sink_a.frames(p.a_link).at(0).payload, 200, 8));
}

TEST_CASE("inproc: a frame reaches the peer without a copy") {
  linked_pair p;
  auto frame = make_frame(1, patterned(1 << 20, 1), 4);
  const std::byte* head = frame.head.data();
  const std::byte* payload = frame.payload.data();
  REQUIRE(p.a.send(p.a_link, frame).ok());
  REQUIRE(p.sink_b.wait_frames(p.b_link, 1));
  auto got = p.sink_b.frames(p.b_link).at(0);
  CHECK(got.payload.data() == payload);
  CHECK(got.envelope.data() == head + wire::frame_header_bytes);
  CHECK(envelope_intact(got, 1, 4));
}

TEST_CASE("inproc: frames of 0, 1, 4096 and 10 MiB payload bytes arrive intact and in order") {
  linked_pair p;
  const std::vector<std::size_t> sizes{0, 1, 4096, 10u << 20, 0};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(p.a.send(p.a_link, make_frame(i, patterned(sizes[i], i))).ok());
  }
  constexpr std::size_t small = 1000;
  for (std::size_t i = 0; i < small; ++i) {
    REQUIRE(p.a.send(p.a_link, make_frame(100 + i, patterned(i % 32, i))).ok());
  }
  REQUIRE(p.sink_b.wait_frames(p.b_link, sizes.size() + small));
  auto frames = p.sink_b.frames(p.b_link);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    CHECK(envelope_intact(frames[i], i));
    CHECK(is_patterned(frames[i].payload, sizes[i], i));
  }
  for (std::size_t i = 0; i < small; ++i) {
    REQUIRE(envelope_intact(frames[sizes.size() + i], 100 + i));
  }
  CHECK(p.sink_b.orderly());
}

TEST_CASE("inproc: listening twice on one name fails with conflict") {
  inproc_hub hub;
  recording_sink sink;
  inproc_transport a{tag_a, sink, hub};
  inproc_transport b{tag_b, sink, hub};
  REQUIRE(a.listen("owner").ok());
  CHECK(a.listen("owner").code() == errc::conflict);
  CHECK(b.listen("owner").code() == errc::conflict);
  CHECK(b.listen("owner-2").ok());
  CHECK(b.listen("").code() == errc::invalid_argument);
}

TEST_CASE("inproc: connecting to an unknown name fails with unavailable") {
  inproc_hub hub;
  recording_sink sink;
  inproc_transport a{tag_a, sink, hub};
  auto link = a.connect("nobody");
  REQUIRE(link.code() == errc::unavailable);
  CHECK(link.error().message().find("nobody") != std::string::npos);
  CHECK(sink.links_seen() == 0);
}

TEST_CASE("inproc: close reports aborted here and unavailable at the peer") {
  linked_pair p;
  p.a.close(p.a_link);
  auto here = p.sink_a.wait_down(p.a_link);
  auto there = p.sink_b.wait_down(p.b_link);
  REQUIRE(here.has_value());
  REQUIRE(there.has_value());
  CHECK(*here == error{errc::aborted, "closed locally"});
  CHECK(*there == error{errc::unavailable, "peer closed the link"});
  p.a.close(p.a_link);
  p.b.close(p.b_link);
  CHECK(p.sink_a.downs(p.a_link) == 1);
  CHECK(p.sink_b.downs(p.b_link) == 1);
  CHECK(p.a.send(p.a_link, make_frame(1)).code() == errc::unavailable);
  CHECK(p.b.send(p.b_link, make_frame(1)).code() == errc::unavailable);
  CHECK(p.sink_a.orderly());
  CHECK(p.sink_b.orderly());
}

TEST_CASE("inproc: shutdown closes both ends and frees the listener name") {
  linked_pair p;
  p.b.shutdown();
  auto there = p.sink_a.wait_down(p.a_link);
  REQUIRE(there.has_value());
  CHECK(there->code() == errc::unavailable);
  auto here = p.sink_b.wait_down(p.b_link);
  REQUIRE(here.has_value());
  CHECK(here->code() == errc::aborted);
  CHECK(p.a.connect("master").code() == errc::unavailable);
  CHECK(p.b.listen("other").code() == errc::unavailable);
  CHECK(p.b.connect("other").code() == errc::unavailable);
  p.b.shutdown();  // idempotent

  recording_sink sink_c;
  inproc_transport c{5, sink_c, p.hub};
  REQUIRE(c.listen("master").ok());
  auto link = p.a.connect("master").value();
  CHECK(p.sink_a.wait_link_up(link));
}

TEST_CASE("inproc: a frame with a bad magic closes the link on both ends with a protocol error") {
  linked_pair p;
  auto good = make_frame(1);
  auto bytes = byte_buffer::allocate(good.head.size());
  std::memcpy(bytes.data(), good.head.data(), good.head.size());
  bytes.data()[0] = std::byte{'X'};
  auto sent = p.a.send(p.a_link, wire::outbound_frame{std::move(bytes).freeze(), {}});
  CHECK(sent.code() == errc::protocol);
  auto there = p.sink_b.wait_down(p.b_link);
  REQUIRE(there.has_value());
  CHECK(there->code() == errc::protocol);
  auto here = p.sink_a.wait_down(p.a_link);
  REQUIRE(here.has_value());
  CHECK(here->code() == errc::protocol);
  CHECK(p.sink_b.frames(p.b_link).empty());
}

TEST_CASE("inproc: a frame over the receiver's payload limit closes the link with a protocol error") {
  transport_limits small;
  small.frame.max_payload_bytes = 1000;
  linked_pair p{{}, small};
  REQUIRE(p.a.send(p.a_link, make_frame(1, patterned(1000, 1))).ok());
  CHECK(p.a.send(p.a_link, make_frame(2, patterned(1001, 2))).code() == errc::protocol);
  auto there = p.sink_b.wait_down(p.b_link);
  REQUIRE(there.has_value());
  CHECK(there->code() == errc::protocol);
  CHECK(p.sink_b.frames(p.b_link).size() == 1);
}

TEST_CASE("inproc: a frame whose header does not describe it is refused and the link stays up") {
  linked_pair p;
  auto frame = make_frame(1, patterned(10, 1));
  frame.payload = patterned(9, 1);
  CHECK(p.a.send(p.a_link, frame).code() == errc::invalid_argument);
  CHECK(p.a.send(p.a_link, wire::outbound_frame{shared_bytes::copy_of("short"), {}}).code() ==
        errc::invalid_argument);
  REQUIRE(p.a.send(p.a_link, make_frame(2)).ok());
  CHECK(p.sink_b.wait_frames(p.b_link, 1));
  CHECK(p.sink_b.downs(p.b_link) == 0);
}

TEST_CASE("inproc: a frame the sink rejects closes the link on both ends") {
  inproc_hub hub;
  recording_sink sink_a;
  recording_sink sink_b;
  sink_b.on_frame_hook = [](link_id, const wire::inbound_frame& frame) -> result<void> {
    if (sequence_of(frame) == 2) return fail(errc::protocol, "envelope does not decode");
    return {};
  };
  inproc_transport a{tag_a, sink_a, hub};
  inproc_transport b{tag_b, sink_b, hub};
  REQUIRE(b.listen("b").ok());
  auto link = a.connect("b").value();
  REQUIRE(a.send(link, make_frame(1)).ok());
  REQUIRE(a.send(link, make_frame(2)).ok());  // accepted for delivery, then rejected by the sink
  CHECK(a.send(link, make_frame(3)).code() == errc::unavailable);
  auto accepted = sink_b.wait_up().value();
  auto there = sink_b.wait_down(accepted);
  REQUIRE(there.has_value());
  CHECK(*there == error{errc::protocol, "envelope does not decode"});
  auto here = sink_a.wait_down(link);
  REQUIRE(here.has_value());
  CHECK(here->code() == errc::unavailable);
  CHECK(sink_b.frames(accepted).size() == 2);
}

TEST_CASE("inproc: a sink may send and close from inside its callbacks") {
  inproc_hub hub;
  recording_sink sink_a;
  recording_sink sink_b;
  inproc_transport a{tag_a, sink_a, hub};
  inproc_transport b{tag_b, sink_b, hub};
  // b echoes every frame back on the same link; a closes after the fifth echo.
  sink_b.on_frame_hook = [&b](link_id link, const wire::inbound_frame& frame) -> result<void> {
    (void)b.send(link, make_frame(sequence_of(frame) + 1000));
    return {};
  };
  sink_a.on_frame_hook = [&a](link_id link, const wire::inbound_frame& frame) -> result<void> {
    if (sequence_of(frame) == 1004) a.close(link);
    return {};
  };
  REQUIRE(b.listen("echo").ok());
  auto link = a.connect("echo").value();
  for (std::uint64_t i = 0; i < 10; ++i) (void)a.send(link, make_frame(i));
  REQUIRE(sink_a.wait_frames(link, 5));
  CHECK(sink_a.wait_down(link)->code() == errc::aborted);
  CHECK(sink_a.frames(link).size() == 5);
  CHECK(sink_a.orderly());
  CHECK(sink_b.orderly());
}

TEST_CASE("inproc: frames from several threads keep each thread's order") {
  linked_pair p;
  constexpr std::uint64_t threads = 4;
  constexpr std::uint64_t per_thread = 500;
  std::vector<std::thread> senders;
  for (std::uint64_t t = 0; t < threads; ++t) {
    senders.emplace_back([&p, t] {
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        auto frame = make_frame(t * 1'000'000 + i, patterned(i % 100, i));
        while (!p.a.send(p.a_link, frame).ok()) std::this_thread::yield();
      }
    });
  }
  for (auto& s : senders) s.join();
  REQUIRE(p.sink_b.wait_frames(p.b_link, threads * per_thread));
  std::vector<std::uint64_t> next(threads, 0);
  for (const auto& frame : p.sink_b.frames(p.b_link)) {
    auto sequence = sequence_of(frame);
    auto t = sequence / 1'000'000;
    REQUIRE(t < threads);
    REQUIRE(sequence % 1'000'000 == next[t]);
    ++next[t];
  }
  CHECK(p.sink_b.orderly());
}

TEST_CASE("inproc: closing from both sides at once reports one down per end") {
  for (int round = 0; round < 50; ++round) {
    linked_pair p;
    std::thread other{[&p] { p.b.close(p.b_link); }};
    p.a.close(p.a_link);
    other.join();
    REQUIRE(p.sink_a.wait_down(p.a_link).has_value());
    REQUIRE(p.sink_b.wait_down(p.b_link).has_value());
    CHECK(p.sink_a.downs(p.a_link) == 1);
    CHECK(p.sink_b.downs(p.b_link) == 1);
  }
}

TEST_CASE("inproc: a frame larger than max_queued_bytes is refused with overloaded") {
  transport_limits tight;
  tight.max_queued_bytes = 4096;
  linked_pair p{tight, {}};
  CHECK(p.a.send(p.a_link, make_frame(1, patterned(4096, 1))).code() == errc::overloaded);
  CHECK(p.a.send(p.a_link, make_frame(2, patterned(1000, 2))).ok());
  CHECK(p.sink_b.wait_frames(p.b_link, 1));
}

TEST_CASE("inproc: send on an unknown link fails with unavailable") {
  inproc_hub hub;
  recording_sink sink;
  inproc_transport a{tag_a, sink, hub};
  CHECK(a.send(make_link_id(tag_a, 9), make_frame(1)).code() == errc::unavailable);
  CHECK(a.send(make_link_id(tag_b, 1), make_frame(1)).code() == errc::unavailable);
  a.close(make_link_id(tag_a, 9));  // ignored
}

TEST_CASE("inproc: a transport can link to its own listener") {
  inproc_hub hub;
  recording_sink sink;
  inproc_transport t{tag_a, sink, hub};
  REQUIRE(t.listen("self").ok());
  auto link = t.connect("self").value();
  REQUIRE(sink.wait_link_up(link));
  auto accepted = sink.wait_up(1).value();
  CHECK(accepted != link);
  REQUIRE(t.send(link, make_frame(1)).ok());
  CHECK(sink.wait_frames(accepted, 1));
  t.shutdown();
  CHECK(sink.downs(link) == 1);
  CHECK(sink.downs(accepted) == 1);
  CHECK(sink.orderly());
}

}  // namespace sluice::transport
