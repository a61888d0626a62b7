// Paths between owners in the simulator: with the path between two owners
// cut, slowed or lossy, the real role code still moves values between
// them — through a third owner when it must — and says so in its status.

#include <doctest/doctest.h>

#include <caf/send.hpp>

#include <optional>

#include "actors/client/client.hpp"
#include "runtime/log.hpp"
#include "sim/checker.hpp"
#include "sim/world.hpp"
#include "tests/sim/staged_world.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::sim;
using namespace sluice::sim::test;

/// Three owners; client 0 talks to owner 0, client 1 to owner 1.
world_config staged(std::uint64_t seed) {
  (void)configure_logging("off");
  world_config cfg;
  cfg.seed = seed;
  cfg.owners = 3;
  cfg.clients = 2;
  cfg.client_owners = {0, 1};
  return cfg;
}

}  // namespace

TEST_CASE("sim: a get between two owners whose path is cut goes through the third owner, then back over tcp") {
  world w{staged(11)};
  w.run_until(w.now() + 2s);
  auto value = make_value("k", put_id{1, 1}, 100'000);  // seven pieces of 16 KiB
  auto [put, put_took] = call(w, 1, wire::kv_put{"k", {}, 0, 1, ""}, value);
  REQUIRE(put.has_value());
  REQUIRE(put->ok());

  auto cut = w.net().cut_pair(w.owner_index(0), w.owner_index(1));
  auto [got, took] = call(w, 0, wire::kv_get{"k"});
  REQUIRE(got.has_value());
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());
  CHECK((*got)->payload.as_string_view() == value.as_string_view());
  // One try over the cut path ([links] timeout, 1 s), then the relay.
  CHECK(took < 2s);

  w.run_until(w.now() + 1s);  // a heartbeat reports the links
  auto link = link_of(w, 0, 1);
  REQUIRE(link.has_value());
  CHECK(link->active == "relay");
  CHECK(link->via.value != 0);
  REQUIRE(link->paths.size() == 2);
  CHECK(link->paths[0].kind == "tcp");
  CHECK(link->paths[0].health == "down");
  CHECK(link->paths[1].health == "up");

  // Healed, the tcp path is retried (after its backoff) and taken again.
  w.net().heal(cut);
  w.run_until(w.now() + 5s);
  auto back = link_of(w, 0, 1);
  REQUIRE(back.has_value());
  CHECK(back->active == "tcp");
  CHECK(back->paths[0].health == "up");
}

TEST_CASE("sim: a put placed on an owner whose path from the putter is cut is stored through a relay") {
  world w{staged(12)};
  w.run_until(w.now() + 2s);
  w.net().cut_pair(w.owner_index(0), w.owner_index(1));
  auto value = make_value("p", put_id{0, 1}, 40'000);
  // Through owner 0, placed on owner 1 by name: the store goes via owner 2.
  auto [put, took] = call(w, 0, wire::kv_put{"p", {}, 0, 1, w.name_of(w.owner_index(1))}, value);
  REQUIRE(put.has_value());
  REQUIRE_MESSAGE(put->ok(), put->error().to_string());
  auto [got, got_took] = call(w, 1, wire::kv_get{"p"});
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK((*got)->payload.as_string_view() == value.as_string_view());
}

TEST_CASE("sim: with only two owners and their path cut, a get fails typed within its deadline") {
  auto cfg = staged(13);
  cfg.owners = 2;
  world w{cfg};
  w.run_until(w.now() + 2s);
  auto value = make_value("k", put_id{1, 1}, 1000);
  REQUIRE(call(w, 1, wire::kv_put{"k", {}, 0, 1, ""}, value).first->ok());
  w.net().cut_pair(w.owner_index(0), w.owner_index(1));
  auto [got, took] = call(w, 0, wire::kv_get{"k"}, {}, 3s);
  REQUIRE(got.has_value());
  REQUIRE_FALSE(got->ok());
  CHECK((got->code() == errc::timeout || got->code() == errc::unavailable));
  CHECK(took <= 3s);
}

TEST_CASE("sim: on a slow and lossy path between two owners values still arrive whole") {
  world w{staged(14)};
  w.run_until(w.now() + 2s);
  w.net().slow_pair(w.owner_index(0), w.owner_index(1), 50ms);
  auto value = make_value("s", put_id{1, 1}, 100'000);
  REQUIRE(call(w, 1, wire::kv_put{"s", {}, 0, 1, ""}, value).first->ok());
  auto [got, took] = call(w, 0, wire::kv_get{"s"});
  REQUIRE(got.has_value());
  REQUIRE(got->ok());
  CHECK((*got)->payload.as_string_view() == value.as_string_view());
  CHECK(took >= 100ms);  // a round trip over the slowed path at least

  w.net().lossy_pair(w.owner_index(0), w.owner_index(1), 300);
  auto lossy = make_value("l", put_id{1, 2}, 100'000);
  REQUIRE(call(w, 1, wire::kv_put{"l", {}, 0, 1, ""}, lossy).first->ok());
  auto [again, again_took] = call(w, 0, wire::kv_get{"l"});
  REQUIRE(again.has_value());
  REQUIRE_MESSAGE(again->ok(), again->error().to_string());
  CHECK((*again)->payload.as_string_view() == lossy.as_string_view());
  CHECK(w.net().retransmitted() > 0);
}

namespace {

/// The master's status entry of owner `o`.
std::optional<wire::member_status> member_of(world& w, int o) {
  auto [reply, took] = call(w, 1, wire::cluster_status{});
  if (!reply || !*reply) return std::nullopt;
  auto status = reply_body<wire::cluster_status_reply>(*reply);
  if (!status) return std::nullopt;
  for (auto& m : status->members) {
    if (m.name == w.name_of(w.owner_index(o))) return m;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("sim: an owner cut off from the master stays up through another owner, and puts and gets through it go on") {
  world w{staged(14)};
  w.run_until(w.now() + 2s);
  auto cut = w.net().cut_pair(w.master_index(), w.owner_index(0));
  // Well past the heartbeat timeout (3 s): owner 0 never goes down, and
  // the master hears it through one of the other two.
  for (int second = 0; second < 10; ++second) {
    w.run_until(w.now() + 1s);
    auto m = member_of(w, 0);
    REQUIRE(m.has_value());
    REQUIRE_MESSAGE(m->state == wire::member_state::up, "owner-0 went down " << second << " s into the cut");
    if (second >= 2) {
      CHECK(m->master_via.value != 0);
      CHECK(m->master_via != w.id_of(w.owner_index(0)));
    }
  }
  // A put through owner 0 (placed and committed through the relay) and
  // its get, twice, with the value on owner 0 and on owner 1.
  for (int i = 0; i < 2; ++i) {
    auto key = "cut/" + std::to_string(i);
    auto value = make_value(key, put_id{0, static_cast<std::uint64_t>(i + 1)}, 30'000);
    auto prefer = i == 0 ? std::string{} : w.name_of(w.owner_index(1));
    auto [put, put_took] = call(w, 0, wire::kv_put{key, {}, 0, 1, prefer}, value);
    REQUIRE(put.has_value());
    REQUIRE_MESSAGE(put->ok(), put->error().to_string());
    auto [got, got_took] = call(w, 0, wire::kv_get{key});
    REQUIRE(got.has_value());
    REQUIRE_MESSAGE(got->ok(), got->error().to_string());
    CHECK((*got)->payload.as_string_view() == value.as_string_view());
  }
  // Healed, owner 0 goes back to its own link.
  w.net().heal(cut);
  w.run_until(w.now() + 8s);
  auto back = member_of(w, 0);
  REQUIRE(back.has_value());
  CHECK(back->state == wire::member_state::up);
  CHECK(back->master_via.value == 0);
}

TEST_CASE("sim: without relays an owner cut off from the master goes down, and comes back once the cut heals") {
  auto cfg = staged(15);
  cfg.no_relays = true;
  world w{cfg};
  w.run_until(w.now() + 2s);
  auto cut = w.net().cut_pair(w.master_index(), w.owner_index(0));
  w.run_until(w.now() + 6s);
  auto m = member_of(w, 0);
  REQUIRE(m.has_value());
  CHECK(m->state == wire::member_state::down);
  w.net().heal(cut);
  w.run_until(w.now() + 6s);
  auto back = member_of(w, 0);
  REQUIRE(back.has_value());
  CHECK(back->state == wire::member_state::up);
}
