// actor_sink: frames a transport hands over "held" reach the role actor
// together, in order, at the end of the transport's wake-up, and before
// anything the sink delivers after them.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include "actors/common/actor_sink.hpp"
#include "runtime/log.hpp"
#include "runtime/wire/codec.hpp"

namespace {

namespace wire = sluice::wire;
using namespace std::chrono_literals;

wire::inbound_frame frame_of(std::uint64_t request_id) {
  wire::envelope env;
  env.request_id = request_id;
  env.source = sluice::node_id{99};
  env.body = wire::locate{"key-" + std::to_string(request_id)};
  auto frame = wire::encode(env);
  return wire::inbound_frame{
      frame.head.slice(wire::frame_header_bytes, frame.head.size() - wire::frame_header_bytes), frame.payload};
}

struct sink_fixture {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  sluice::actor_sink sink{sluice::get_logger("test")};
  sink_fixture() { sink.bind(caf::actor_cast<caf::actor>(self)); }

  /// Whether a message is waiting (waits briefly: the sink sends to a
  /// mailbox, which is synchronous here, but be lenient).
  bool nothing_waiting() {
    bool none = true;
    self->receive([&](caf::message&) { none = false; }, caf::after(20ms) >> [] {});
    return none;
  }
};

}  // namespace

TEST_CASE("actor sink: held frames arrive as one batch, in order, at the end of the wake-up") {
  sink_fixture f;
  REQUIRE(static_cast<bool>(f.sink.on_frame_held(1, frame_of(10))));
  REQUIRE(static_cast<bool>(f.sink.on_frame_held(2, frame_of(11))));
  REQUIRE(static_cast<bool>(f.sink.on_frame_held(1, frame_of(12))));
  CHECK(f.nothing_waiting());
  f.sink.end_of_frames();
  std::vector<std::uint64_t> ids, links;
  f.self->receive([&](sluice::inbound_batch_atom, std::vector<sluice::inbound_item>& batch) {
    for (auto& item : batch) {
      links.push_back(item.link);
      ids.push_back(item.msg.env.request_id);
    }
  });
  CHECK(ids == std::vector<std::uint64_t>{10, 11, 12});
  CHECK(links == std::vector<std::uint64_t>{1, 2, 1});
  f.sink.end_of_frames();  // nothing held: nothing sent
  CHECK(f.nothing_waiting());
}

TEST_CASE("actor sink: a held frame goes before the link's later events") {
  sink_fixture f;
  REQUIRE(static_cast<bool>(f.sink.on_frame_held(3, frame_of(20))));
  f.sink.on_link_down(3, sluice::error{sluice::errc::unavailable, "gone"});
  std::vector<std::string> seen;
  for (int i = 0; i < 2; ++i) {
    f.self->receive(
        [&](sluice::inbound_atom, std::uint64_t link, sluice::wire::message& msg) {
          CHECK(link == 3);
          CHECK(msg.env.request_id == 20);
          seen.emplace_back("frame");
        },
        [&](sluice::link_down_atom, std::uint64_t link, const sluice::error&) {
          CHECK(link == 3);
          seen.emplace_back("down");
        });
  }
  CHECK(seen == std::vector<std::string>{"frame", "down"});
}

TEST_CASE("actor sink: an undecodable held frame is refused at once") {
  sink_fixture f;
  auto bad = frame_of(30);
  std::vector<std::byte> junk(bad.envelope.size(), std::byte{0xff});
  bad.envelope = sluice::shared_bytes::copy_of(std::span<const std::byte>{junk});
  CHECK_FALSE(static_cast<bool>(f.sink.on_frame_held(4, std::move(bad))));
  f.sink.end_of_frames();
  CHECK(f.nothing_waiting());
}

TEST_CASE("actor sink: before its actor is bound it holds a bounded number of frames, refuses more, and delivers what it held") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  sluice::actor_sink sink{sluice::get_logger("test")};
  constexpr auto bound = sluice::actor_sink::early_messages_max;
  for (std::uint64_t i = 1; i <= bound; ++i) REQUIRE(static_cast<bool>(sink.on_frame(1, frame_of(i))));
  auto refused = sink.on_frame(1, frame_of(bound + 1));
  REQUIRE_FALSE(static_cast<bool>(refused));
  CHECK(refused.code() == sluice::errc::overloaded);
  sink.bind(caf::actor_cast<caf::actor>(self));
  std::uint64_t next = 1;
  bool more = true;
  while (more) {
    self->receive(
        [&](sluice::inbound_atom, std::uint64_t, wire::message& msg) {
          CHECK(msg.env.request_id == next);
          ++next;
        },
        caf::after(200ms) >> [&] { more = false; });
  }
  CHECK(next == bound + 1);
}
