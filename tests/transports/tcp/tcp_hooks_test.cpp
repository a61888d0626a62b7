// The hooks an owner hands its tcp transport to run on the I/O thread:
// the fast path and the relay, offered the frames of clients' links only.

#include <doctest/doctest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/wire/codec.hpp"
#include "tests/transports/tcp/tcp_pair.hpp"
#include "tests/transports/test_sink.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace sluice::transport {

using namespace testing;

TEST_CASE("tcp: the fast path is offered the frames of clients' links only, after their hello") {
  linked_pair p;  // a_link: a client's; a second link: an owner's
  std::atomic<int> offered{0};
  std::atomic<link_id> offered_on{0};
  // Set before either link carries a frame.
  p.b.set_fast_path(
      [&](link_id link, const wire::inbound_frame&, std::optional<wire::message>&) -> std::optional<fast_taken> {
        ++offered;
        offered_on = link;
        return std::nullopt;  // not taken: the sink gets it
      },
      {});
  auto owners = p.a.connect(p.address);
  REQUIRE(owners.ok());
  REQUIRE(p.sink_a.wait_link_up(*owners));
  auto owners_at_b = p.sink_b.wait_up(1);
  REQUIRE(owners_at_b.has_value());
  auto hello_from = [](role r) {
    wire::envelope env;
    env.body = wire::hello{r, wire::protocol_version, "peer", ""};
    return wire::encode(env, {});
  };
  auto plain = [] {
    wire::envelope env;
    env.body = wire::ok_reply{};
    return wire::encode(env, {});
  };
  REQUIRE(p.a.send(p.a_link, hello_from(role::client)).ok());
  REQUIRE(p.a.send(*owners, hello_from(role::owner)).ok());
  for (int i = 0; i < 3; ++i) {
    REQUIRE(p.a.send(p.a_link, plain()).ok());
    REQUIRE(p.a.send(*owners, plain()).ok());
  }
  REQUIRE(p.sink_b.wait_received(p.b_link, 4));
  REQUIRE(p.sink_b.wait_received(*owners_at_b, 4));
  // The three frames after the client's hello, none of the owner's.
  CHECK(offered == 3);
  CHECK(offered_on == p.b_link);
  // Each hello was decoded once and handed on decoded.
  auto client_messages = p.sink_b.messages(p.b_link);
  REQUIRE_FALSE(client_messages.empty());
  REQUIRE(std::holds_alternative<wire::hello>(client_messages.front().env.body));
  CHECK(std::get<wire::hello>(client_messages.front().env.body).sender_role == role::client);
  auto owner_messages = p.sink_b.messages(*owners_at_b);
  REQUIRE(owner_messages.size() == 1);
  CHECK(std::get<wire::hello>(owner_messages.front().env.body).sender_role == role::owner);
  CHECK(p.sink_b.frames(*owners_at_b).size() == 3);
}

TEST_CASE("tcp: the relay passes client frames to a link of its own or onward, and a refused one reaches the sink") {
  linked_pair p;  // a_link: the caller's; a second link: another client's
  constexpr link_id elsewhere = make_link_id(99, 7);  // a link of another transport
  std::atomic<int> offered{0};
  std::mutex onward_mutex;
  std::vector<std::pair<link_id, std::string>> onward;
  std::atomic<link_id> other_at_b{0};
  auto text_of = [](const shared_bytes& bytes) { return std::string{bytes.as_string_view()}; };
  // What each frame's payload says is where the relay sends it.
  p.b.set_relay(
      [&](link_id, const wire::inbound_frame& frame) -> std::optional<relayed_frame> {
        ++offered;
        auto what = text_of(frame.payload);
        auto copy = [&] {
          wire::envelope env;
          env.body = wire::ok_reply{};
          return wire::encode(env, frame.payload);
        };
        if (what == "own") return relayed_frame{other_at_b.load(), copy()};
        if (what == "onward" || what == "refused") return relayed_frame{elsewhere, copy()};
        if (what == "drop") return relayed_frame{};
        return std::nullopt;
      },
      [&](link_id to, wire::outbound_frame frame) -> result<void> {
        auto what = text_of(frame.payload);
        if (what == "refused") return error{errc::overloaded, "refused"};
        std::lock_guard guard{onward_mutex};
        onward.emplace_back(to, what);
        return {};
      });
  auto other = p.a.connect(p.address);
  REQUIRE(other.ok());
  REQUIRE(p.sink_a.wait_link_up(*other));
  auto up = p.sink_b.wait_up(1);
  REQUIRE(up.has_value());
  other_at_b = *up;
  auto hello = [] {
    wire::envelope env;
    env.body = wire::hello{role::client, wire::protocol_version, "peer", ""};
    return wire::encode(env, {});
  };
  auto saying = [](std::string_view what) {
    wire::envelope env;
    env.body = wire::ok_reply{};
    return wire::encode(env, shared_bytes::copy_of(what));
  };
  REQUIRE(p.a.send(p.a_link, hello()).ok());
  REQUIRE(p.a.send(*other, hello()).ok());
  for (auto what : {"own", "onward", "refused", "drop", "plain"}) REQUIRE(p.a.send(p.a_link, saying(what)).ok());
  // The hello and the two frames the relay did not take.
  REQUIRE(p.sink_b.wait_received(p.b_link, 3));
  REQUIRE(p.sink_a.wait_frames(*other, 1));
  CHECK(offered == 5);  // every frame after the hello
  auto at_other = p.sink_a.frames(*other);
  REQUIRE(at_other.size() == 1);
  CHECK(text_of(at_other.front().payload) == "own");
  {
    std::lock_guard guard{onward_mutex};
    REQUIRE(onward.size() == 1);
    CHECK(onward.front().first == elsewhere);
    CHECK(onward.front().second == "onward");
  }
  auto frames = p.sink_b.frames(p.b_link);
  REQUIRE(frames.size() == 2);
  CHECK(text_of(frames[0].payload) == "refused");
  CHECK(text_of(frames[1].payload) == "plain");
}

}  // namespace sluice::transport
