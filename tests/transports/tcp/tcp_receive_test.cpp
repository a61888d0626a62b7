// Where the tcp transport puts received payload bytes: into the slot a
// request posted for its reply, into memory the payload allocator hands
// out, or into a buffer of its own.

#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "runtime/wire/codec.hpp"
#include "tests/transports/tcp/tcp_pair.hpp"

namespace sluice::transport {
namespace {

using namespace testing;

/// Writable memory and the receive_slot over it.
struct slot_memory {
  shared_bytes bytes;
  receive_slot slot;
  explicit slot_memory(std::size_t size) : bytes(byte_buffer::allocate(size).freeze()) {
    slot = receive_slot{bytes.owner(), {const_cast<std::byte*>(bytes.data()), bytes.size()}};
  }
};

/// A reply to request `request_id` carrying `payload`.
wire::outbound_frame reply_frame(std::uint64_t request_id, shared_bytes payload) {
  wire::envelope env;
  env.reply_to = request_id;
  env.body = wire::fetch_reply{1};
  return wire::encode(env, std::move(payload));
}

TEST_CASE("tcp: a reply's payload posted for with expect_payload is received straight into the slot") {
  linked_pair p;
  slot_memory into{3 << 20};
  REQUIRE(p.a.expect_payload(p.a_link, 7, into.slot));
  REQUIRE(p.b.send(p.b_link, reply_frame(7, patterned(3 << 20, 4))).ok());
  REQUIRE(p.sink_a.wait_frames(p.a_link, 1));
  auto frame = p.sink_a.frames(p.a_link).at(0);
  CHECK(frame.payload.data() == into.bytes.data());
  CHECK(is_patterned(into.bytes, 3 << 20, 4));
  CHECK(wire::decode(frame).ok());
}

TEST_CASE("tcp: replies in flight at once each land in their own slot, whatever order they come in") {
  linked_pair p;
  constexpr std::uint64_t pieces = 8;
  std::vector<slot_memory> slots;
  for (std::uint64_t i = 0; i < pieces; ++i) slots.emplace_back(100'000 + i);
  for (std::uint64_t i = 0; i < pieces; ++i) REQUIRE(p.a.expect_payload(p.a_link, 100 + i, slots[i].slot));
  for (std::uint64_t i = pieces; i-- > 0;) {
    REQUIRE(p.b.send(p.b_link, reply_frame(100 + i, patterned(100'000 + i, i))).ok());
  }
  REQUIRE(p.sink_a.wait_frames(p.a_link, pieces));
  auto frames = p.sink_a.frames(p.a_link);
  for (std::uint64_t i = 0; i < pieces; ++i) {
    CAPTURE(i);
    CHECK(is_patterned(slots[i].bytes, 100'000 + i, i));
    CHECK(frames[pieces - 1 - i].payload.data() == slots[i].bytes.data());
  }
}

TEST_CASE("tcp: a reply whose payload differs in size from its slot arrives in a buffer of its own") {
  linked_pair p;
  slot_memory into{100};
  std::fill_n(into.slot.bytes.data(), 100, std::byte{0x5a});
  REQUIRE(p.a.expect_payload(p.a_link, 9, into.slot));
  REQUIRE(p.b.send(p.b_link, reply_frame(9, patterned(200, 1))).ok());
  REQUIRE(p.sink_a.wait_frames(p.a_link, 1));
  auto frame = p.sink_a.frames(p.a_link).at(0);
  CHECK(frame.payload.data() != into.bytes.data());
  CHECK(is_patterned(frame.payload, 200, 1));
  CHECK(std::all_of(into.bytes.data(), into.bytes.data() + 100, [](std::byte b) { return b == std::byte{0x5a}; }));
}

TEST_CASE("tcp: a slot withdrawn with forget_payload is left alone") {
  linked_pair p;
  slot_memory into{4096};
  std::fill_n(into.slot.bytes.data(), 4096, std::byte{0});
  REQUIRE(p.a.expect_payload(p.a_link, 11, into.slot));
  p.a.forget_payload(p.a_link, 11);
  REQUIRE(p.b.send(p.b_link, reply_frame(11, patterned(4096, 2))).ok());
  REQUIRE(p.sink_a.wait_frames(p.a_link, 1));
  CHECK(p.sink_a.frames(p.a_link).at(0).payload.data() != into.bytes.data());
  CHECK(std::all_of(into.bytes.data(), into.bytes.data() + 4096, [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("tcp: expect_payload refuses unknown links, request id 0 and empty slots") {
  linked_pair p;
  slot_memory into{64};
  CHECK_FALSE(p.a.expect_payload(make_link_id(tag_a, 999), 1, into.slot));
  CHECK_FALSE(p.a.expect_payload(p.a_link, 0, into.slot));
  CHECK_FALSE(p.a.expect_payload(p.a_link, 1, receive_slot{}));
}

TEST_CASE("tcp: payloads nobody asked for land in memory the payload allocator hands out") {
  linked_pair p;
  slot_memory arena{1 << 20};
  std::size_t handed = 0;
  p.b.set_payload_allocator([&arena, &handed](std::uint64_t bytes) -> std::optional<receive_slot> {
    if (bytes > arena.slot.bytes.size()) return std::nullopt;  // too big: the transport's own memory
    ++handed;
    return receive_slot{arena.slot.owner, arena.slot.bytes.first(bytes)};
  });
  REQUIRE(p.a.send(p.a_link, make_frame(1, patterned(500'000, 3))).ok());
  REQUIRE(p.a.send(p.a_link, make_frame(2, patterned(2 << 20, 5))).ok());
  REQUIRE(p.sink_b.wait_frames(p.b_link, 2));
  auto frames = p.sink_b.frames(p.b_link);
  CHECK(handed == 1);
  CHECK(frames[0].payload.data() == arena.bytes.data());
  CHECK(is_patterned(frames[0].payload, 500'000, 3));
  CHECK(frames[1].payload.data() != arena.bytes.data());
  CHECK(is_patterned(frames[1].payload, 2 << 20, 5));
}

}  // namespace
}  // namespace sluice::transport
