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
#include "tests/sim/staged_world.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::sim;
using namespace sluice::sim::test;

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
