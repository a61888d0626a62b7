// The rdma path in the simulator: owners whose pools are registered with
// the simulated fabric read each other's values with one-sided reads, the
// link state says so, and when reads fail the values come over tcp,
// whole, and the rdma path is demoted.

#include <doctest/doctest.h>

#include <caf/send.hpp>

#include <optional>

#include "actors/client/client.hpp"
#include "runtime/log.hpp"
#include "sim/checker.hpp"
#include "sim/world.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::sim;

/// Three owners with rdma paths; client 0 talks to owner 0, client 1 to owner 1.
world_config staged(std::uint64_t seed) {
  (void)configure_logging("off");
  world_config cfg;
  cfg.seed = seed;
  cfg.owners = 3;
  cfg.clients = 2;
  cfg.client_owners = {0, 1};
  cfg.rdma = true;
  return cfg;
}

/// Sends `request` through client `c` and runs the world until it is
/// answered (or `within` passes); returns the answer and how long it took.
std::pair<std::optional<result<wire::message>>, sim_duration> call(world& w, int c, wire::body request,
                                                                   shared_bytes payload = {},
                                                                   sim_duration within = 10s) {
  auto answer = std::make_shared<std::optional<result<wire::message>>>();
  api_call a;
  a.request = std::move(request);
  a.payload = std::move(payload);
  a.timeout = std::chrono::duration_cast<std::chrono::microseconds>(within);
  a.done = [answer](result<wire::message> r) { *answer = std::move(r); };
  auto started = w.now();
  caf::anon_send(w.actor_of(w.client_index(c)), api_atom::value, std::move(a));
  auto give_up = started + within + 1s;
  while (!answer->has_value() && w.now() < give_up) w.run_until(w.now() + 10ms);
  return {*answer, w.now() - started};
}

/// How owner `from` reaches owner `to`, as the master's status says.
std::optional<wire::link_state> link_of(world& w, int from, int to) {
  auto [reply, took] = call(w, 0, wire::cluster_status{});
  if (!reply || !*reply) return std::nullopt;
  auto status = reply_body<wire::cluster_status_reply>(*reply);
  if (!status) return std::nullopt;
  std::optional<node_id> to_id;
  for (auto& m : status->members) {
    if (m.name == w.name_of(w.owner_index(to))) to_id = m.id;
  }
  for (auto& m : status->members) {
    if (m.name != w.name_of(w.owner_index(from))) continue;
    for (auto& l : m.links) {
      if (to_id && l.peer == *to_id) return l;
    }
  }
  return std::nullopt;
}


std::optional<wire::path_state> path(const wire::link_state& l, const std::string& kind) {
  for (auto& p : l.paths) {
    if (p.kind == kind) return p;
  }
  return std::nullopt;
}

}  // namespace

TEST_CASE("sim: a get of a value another owner holds moves over the rdma path, and the link state says so") {
  world w{staged(21)};
  w.run_until(w.now() + 2s);
  auto value = make_value("r", put_id{1, 1}, 100'000);
  auto [put, put_took] = call(w, 1, wire::kv_put{"r", {}, 0, 1, ""}, value);
  REQUIRE(put.has_value());
  REQUIRE(put->ok());

  auto [got, took] = call(w, 0, wire::kv_get{"r"});
  REQUIRE(got.has_value());
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());
  CHECK((*got)->payload.as_string_view() == value.as_string_view());
  CHECK(w.rdma_reads().first > 0);
  CHECK(w.rdma_reads().second == 0);

  w.run_until(w.now() + 1s);  // a heartbeat reports the links
  auto link = link_of(w, 0, 1);
  REQUIRE(link.has_value());
  CHECK(link->active == "rdma");
  auto rdma = path(*link, "rdma");
  REQUIRE(rdma.has_value());
  CHECK(rdma->health == "up");
  CHECK(rdma->bytes == value.size());
  CHECK(path(*link, "tcp")->bytes < value.size());
}

TEST_CASE("sim: when every rdma read fails, gets come over tcp whole and the rdma path is demoted") {
  auto cfg = staged(22);
  cfg.rdma_fail_pm = 1000;
  world w{cfg};
  w.run_until(w.now() + 2s);
  auto value = make_value("f", put_id{1, 1}, 100'000);
  auto [put, put_took] = call(w, 1, wire::kv_put{"f", {}, 0, 1, ""}, value);
  REQUIRE(put.has_value());
  REQUIRE(put->ok());

  auto [got, took] = call(w, 0, wire::kv_get{"f"});
  REQUIRE(got.has_value());
  REQUIRE_MESSAGE(got->ok(), got->error().to_string());
  CHECK((*got)->payload.as_string_view() == value.as_string_view());
  CHECK(took < 2s);
  CHECK(w.rdma_reads().first == 0);
  CHECK(w.rdma_reads().second > 0);

  w.run_until(w.now() + 1s);
  auto link = link_of(w, 0, 1);
  REQUIRE(link.has_value());
  CHECK(link->active == "tcp");
  auto rdma = path(*link, "rdma");
  REQUIRE(rdma.has_value());
  CHECK(rdma->health != "up");
  CHECK(rdma->last_error.find("simulated") != std::string::npos);
  CHECK(path(*link, "tcp")->bytes >= value.size());
}
