// What an owner says about its GPU pools through the embedding API. On a
// machine without a usable CUDA device (no driver, no device, or a build
// without CUDA) the owner starts all the same and answers unavailable
// with the probe's reason; on a GPU machine it has its pools.
#include <doctest/doctest.h>

#include <string>

#include "runtime/gpu/device.hpp"
#include "sluice/node.hpp"

namespace {

struct cluster {
  std::unique_ptr<sluice::node> master;
  std::unique_ptr<sluice::node> owner;
};

cluster start(const std::string& owner_config) {
  sluice::node_options m;
  m.listen = "127.0.0.1:0";
  auto master = sluice::node::start_master(m);
  REQUIRE(master.ok());
  sluice::node_options o;
  o.listen = "127.0.0.1:0";
  o.master = (*master)->address();
  o.config_text = owner_config;
  auto owner = sluice::node::start_owner(o);
  REQUIRE_MESSAGE(owner.ok(), owner.error().to_string());
  return {std::move(*master), std::move(*owner)};
}

}  // namespace

TEST_CASE("gpu: an owner without [owner.gpu] answers that it has no GPU pools") {
  auto c = start("[owner]\ncapacity = \"16MiB\"\n");
  auto pools = c.owner->gpu_pools();
  REQUIRE_FALSE(pools.ok());
  CHECK(pools.code() == sluice::errc::unavailable);
  CHECK(pools.error().message() == "no GPU pools on this owner: no [owner.gpu] section in this owner's configuration");
}

TEST_CASE("gpu: an owner with [owner.gpu] starts with or without a device and says which") {
  auto c = start("[owner]\ncapacity = \"16MiB\"\n[owner.gpu]\ndevices = [0]\ncapacity = \"4MiB\"\n");
  auto found = sluice::gpu::make_cuda_device()->probe();
  auto pools = c.owner->gpu_pools();
  if (!found.usable()) {
    REQUIRE_FALSE(pools.ok());
    CHECK(pools.code() == sluice::errc::unavailable);
    CHECK(pools.error().message() == "no GPU pools on this owner: " + found.why_not);
    return;
  }
  REQUIRE_MESSAGE(pools.ok(), pools.error().to_string());
  REQUIRE(pools->size() == 1);
  CHECK((*pools)[0].device == 0);
  CHECK((*pools)[0].capacity_bytes == 4 << 20);
  CHECK((*pools)[0].used_bytes == 0);
  CHECK_FALSE((*pools)[0].name.empty());
}

TEST_CASE("gpu: an owner asked for a device the host lacks runs without GPU pools and names the device") {
  auto c = start("[owner]\ncapacity = \"16MiB\"\n[owner.gpu]\ndevices = [63]\ncapacity = \"4MiB\"\n");
  auto found = sluice::gpu::make_cuda_device()->probe();
  auto pools = c.owner->gpu_pools();
  REQUIRE_FALSE(pools.ok());
  CHECK(pools.code() == sluice::errc::unavailable);
  if (found.usable()) {
    CHECK(pools.error().message().find("device 63 is not there") != std::string::npos);
  } else {
    CHECK(pools.error().message() == "no GPU pools on this owner: " + found.why_not);
  }
}

TEST_CASE("gpu: a master has no GPU pools") {
  sluice::node_options m;
  m.listen = "127.0.0.1:0";
  auto master = sluice::node::start_master(m);
  REQUIRE(master.ok());
  CHECK((*master)->gpu_pools().code() == sluice::errc::invalid_argument);
}
