#include <doctest/doctest.h>

#include <vector>

#include "runtime/gpu/device_pool.hpp"
#include "runtime/gpu/fake_device.hpp"

using namespace sluice;
using namespace sluice::gpu;

namespace {

gpu_section section(std::vector<std::uint32_t> devices, std::uint64_t capacity_bytes) {
  gpu_section s;
  s.enabled = true;
  s.devices = std::move(devices);
  s.capacity_bytes = capacity_bytes;
  return s;
}

}  // namespace

TEST_CASE("gpu pool: open allocates one pool on each listed device, once") {
  fake_device dev{{.device_count = 2, .memory_bytes = 8 << 20}};
  auto pools = open_device_pools(dev, section({1, 0}, 4 << 20));
  REQUIRE(pools);
  REQUIRE(pools->size() == 2);
  CHECK((*pools)[0]->info().ordinal == 1);
  CHECK((*pools)[1]->info().ordinal == 0);
  CHECK((*pools)[0]->capacity_bytes() == 4 << 20);
  CHECK(dev.allocated_bytes(0) == 4 << 20);
  CHECK(dev.allocated_bytes(1) == 4 << 20);
  // Values come out of the pool, not from the device.
  REQUIRE((*pools)[0]->allocate(1 << 20));
  CHECK(dev.allocated_bytes(1) == 4 << 20);
  pools->clear();
  CHECK(dev.allocated_bytes(0) == 0);
  CHECK(dev.allocated_bytes(1) == 0);
}

TEST_CASE("gpu pool: without a driver open answers unavailable with the reason") {
  fake_device dev{{.why_not = "no CUDA driver"}};
  auto pools = open_device_pools(dev, section({0}, 1 << 20));
  REQUIRE_FALSE(pools);
  CHECK(pools.code() == errc::unavailable);
  CHECK(pools.error().message() == "no CUDA driver");
}

TEST_CASE("gpu pool: a device that is not there makes open answer unavailable and keep nothing") {
  fake_device dev{{.device_count = 1, .memory_bytes = 8 << 20}};
  auto pools = open_device_pools(dev, section({0, 3}, 1 << 20));
  REQUIRE_FALSE(pools);
  CHECK(pools.code() == errc::unavailable);
  CHECK(pools.error().message() == "device 3 is not there: this host has 1 CUDA device");
  CHECK(dev.allocated_bytes(0) == 0);
}

TEST_CASE("gpu pool: a capacity the device lacks makes open answer unavailable and keep nothing") {
  fake_device dev{{.device_count = 2, .memory_bytes = 4 << 20}};
  auto pools = open_device_pools(dev, section({0, 1}, 8 << 20));
  REQUIRE_FALSE(pools);
  CHECK(pools.code() == errc::unavailable);
  INFO(pools.error().message());
  CHECK(pools.error().message().find("cannot allocate the 8 MiB GPU pool on device 0") == 0);
  CHECK(dev.allocated_bytes(0) == 0);
}

TEST_CASE("gpu pool: values are carved by the host pool's allocator, 64-byte aligned, until it is full") {
  fake_device dev{{.device_count = 1, .memory_bytes = 4 << 20}};
  auto pool = device_pool::create(dev, dev.probe().devices[0], (1 << 20) + 100);
  REQUIRE(pool);
  CHECK((*pool)->capacity_bytes() == (1 << 20) + 64);
  std::vector<device_region> regions;
  for (;;) {
    auto r = (*pool)->allocate(100 << 10);
    if (!r) {
      CHECK(r.code() == errc::no_capacity);
      break;
    }
    CHECK(r->offset % allocation_alignment_bytes == 0);
    CHECK(r->device == 0);
    regions.push_back(*r);
  }
  CHECK(regions.size() == 10);
  for (auto& r : regions) (*pool)->free(r);
  CHECK((*pool)->stats().used_bytes == 0);
  CHECK((*pool)->allocate(1 << 20));
}

TEST_CASE("gpu pool: resolve refuses regions that name no live value") {
  fake_device dev;
  auto pool = device_pool::create(dev, dev.probe().devices[0], 1 << 20);
  REQUIRE(pool);
  auto r = (*pool)->allocate(1000);
  REQUIRE(r);
  auto address = (*pool)->resolve(*r);
  REQUIRE(address);
  CHECK(*address == (*pool)->base() + r->offset);
  CHECK((*pool)->resolve({.device = 0, .offset = r->offset, .length = 1001}).code() == errc::invalid_argument);
  CHECK((*pool)->resolve({.device = 0, .offset = r->offset + 64, .length = 1}).code() == errc::invalid_argument);
  CHECK((*pool)->resolve({.device = 1, .offset = r->offset, .length = 1}).code() == errc::invalid_argument);
  (*pool)->free(*r);
  CHECK((*pool)->resolve(*r).code() == errc::invalid_argument);
}

TEST_CASE("gpu pool: a copy to the device and back through the pool's stream completes through its events") {
  fake_device dev;
  auto pool = device_pool::create(dev, dev.probe().devices[0], 1 << 20);
  REQUIRE(pool);
  auto& p = **pool;
  auto r = p.allocate(4096);
  REQUIRE(r);
  std::vector<std::byte> out(4096), back(4096);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(i * 7);
  auto at = *p.resolve(*r);
  REQUIRE(dev.copy_to_device(p.stream(), at, out.data(), out.size()));
  REQUIRE(dev.copy_to_host(p.stream(), back.data(), at, back.size()));
  REQUIRE(p.events().record(p.stream(), 42));
  CHECK(p.events().poll().empty());
  dev.drain();
  auto done = p.events().poll();
  REQUIRE(done.size() == 1);
  CHECK(done[0].token == 42);
  CHECK(done[0].ok);
  CHECK(back == out);
}
