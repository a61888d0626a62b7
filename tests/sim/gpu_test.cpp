// Owners with [owner.gpu] in the simulator, on fake devices: each pool is
// one device allocation, made when the owner starts and given back when
// it stops, however often it crashes and restarts.

#include <doctest/doctest.h>

#include "runtime/gpu/fake_device.hpp"
#include "runtime/log.hpp"
#include "sim/world.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::sim;

world_config with_gpus(std::uint32_t devices) {
  (void)configure_logging("off");
  world_config cfg;
  cfg.seed = 31;
  cfg.owners = 2;
  cfg.clients = 1;
  cfg.gpu_devices = devices;
  cfg.gpu_capacity = 4ULL << 20;
  return cfg;
}

}  // namespace

TEST_CASE("sim: owners with [owner.gpu] allocate one pool per fake device at start, once") {
  world w{with_gpus(2)};
  w.run_until(w.now() + 2s);
  for (int o = 0; o < 2; ++o) {
    const auto* gpu = w.gpu_of(w.owner_index(o));
    REQUIRE(gpu != nullptr);
    CHECK(gpu->allocated_bytes(0) == 4ULL << 20);
    CHECK(gpu->allocated_bytes(1) == 4ULL << 20);
  }
  CHECK(w.gpu_of(w.master_index()) == nullptr);
}

TEST_CASE("sim: an owner that crashes gives its GPU pools back, and takes them again when it restarts") {
  world w{with_gpus(1)};
  w.run_until(w.now() + 1s);
  auto owner = w.owner_index(0);
  const auto* gpu = w.gpu_of(owner);
  REQUIRE(gpu != nullptr);
  for (int round = 0; round < 3; ++round) {
    CHECK(gpu->allocated_bytes(0) == 4ULL << 20);
    w.crash(owner);
    CHECK(gpu->allocated_bytes(0) == 0);
    w.restart(owner, false);
    w.run_until(w.now() + 1s);
  }
  CHECK(gpu->allocated_bytes(0) == 4ULL << 20);
}

TEST_CASE("sim: owners without [owner.gpu] have no GPU") {
  world w{with_gpus(0)};
  w.run_until(w.now() + 1s);
  CHECK(w.gpu_of(w.owner_index(0)) == nullptr);
}
