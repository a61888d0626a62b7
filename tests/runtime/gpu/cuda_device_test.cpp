// The CUDA device on real hardware. Cases that need a device exit 77
// (ctest: skipped) where there is none — no driver, no device, or no CUDA
// in this build — and say why; they never pass without running.
// scripts/gpu-check.sh runs them on a GPU machine.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <thread>
#include <vector>

#include "runtime/gpu/device_pool.hpp"

using namespace sluice;
using namespace sluice::gpu;

namespace {

constexpr int skip_exit_code = 77;
/// How long a test waits for the device before it fails: far above any
/// copy here (a few MiB), so only a hang reaches it.
constexpr std::chrono::seconds device_wait_max{10};

/// A CUDA device with at least one usable GPU, or the test is skipped.
std::unique_ptr<device> device_or_skip() {
  auto dev = make_cuda_device();
  auto found = dev->probe();
  if (!found.usable()) {
    std::cout << "SKIP: gpu test: " << found.why_not << std::endl;
    std::exit(skip_exit_code);
  }
  return dev;
}

/// Polls until `token` completes. Test code may wait; role code never does.
gpu_completion wait_for(event_pool& events, std::uint64_t token) {
  auto until = std::chrono::steady_clock::now() + device_wait_max;
  while (std::chrono::steady_clock::now() < until) {
    for (auto& c : events.poll()) {
      if (c.token == token) return c;
    }
    std::this_thread::yield();
  }
  FAIL("the device did not complete the work within 10s");
  return {};
}

std::vector<std::byte> pattern(std::size_t n) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 131 + 17) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("gpu cuda: the probe finds devices or says why not") {
  auto dev = make_cuda_device();
  auto found = dev->probe();
  std::cout << "gpu: " << dev->kind() << ": "
            << (found.usable() ? std::to_string(found.devices.size()) + " device(s)" : found.why_not) << std::endl;
  CHECK(found.usable() == !found.devices.empty());
  if (!built_with_cuda()) CHECK(found.why_not == "no CUDA in this build");
  for (auto& d : found.devices) {
    std::cout << "gpu: device " << d.ordinal << ": " << d.name << ", " << (d.memory_bytes >> 20) << " MiB, ipc "
              << (d.ipc ? "yes" : "no") << std::endl;
    CHECK_FALSE(d.name.empty());
    CHECK(d.memory_bytes > 0);
  }
}

TEST_CASE("gpu cuda: a pool's bytes go to the device and back through its stream and events") {
  auto dev = device_or_skip();
  gpu_section cfg;
  cfg.enabled = true;
  cfg.capacity_bytes = 64 << 20;
  auto pools = open_device_pools(*dev, cfg);
  REQUIRE_MESSAGE(pools, pools.error().to_string());
  auto& p = *(*pools)[0];
  auto a = p.allocate(4 << 20);
  auto b = p.allocate(4 << 20);
  REQUIRE(a);
  REQUIRE(b);
  auto out = pattern(4 << 20);
  std::vector<std::byte> back(out.size());
  REQUIRE(dev->copy_to_device(p.stream(), *p.resolve(*a), out.data(), out.size()));
  REQUIRE(dev->copy_on_device(p.stream(), *p.resolve(*b), *p.resolve(*a), out.size()));
  REQUIRE(dev->copy_to_host(p.stream(), back.data(), *p.resolve(*b), back.size()));
  REQUIRE(p.events().record(p.stream(), 1));
  auto done = wait_for(p.events(), 1);
  CHECK_MESSAGE(done.ok, done.error);
  CHECK(back == out);
}

TEST_CASE("gpu cuda: a stream waits on the device for an event recorded on another") {
  auto dev = device_or_skip();
  auto memory = dev->allocate(0, 1 << 20);
  REQUIRE(memory);
  auto first = dev->create_stream(0);
  auto second = dev->create_stream(0);
  REQUIRE(first);
  REQUIRE(second);
  event_pool events{*dev, 0};
  auto out = pattern(1 << 20);
  std::vector<std::byte> back(out.size());
  REQUIRE(dev->copy_to_device(*first, *memory, out.data(), out.size()));
  auto written = events.record(*first, 1);
  REQUIRE(written);
  REQUIRE(dev->stream_wait(*second, *written));
  REQUIRE(dev->copy_to_host(*second, back.data(), *memory, back.size()));
  REQUIRE(events.record(*second, 2));
  CHECK(wait_for(events, 2).ok);
  CHECK(back == out);
  CHECK(dev->destroy_stream(*first));
  CHECK(dev->destroy_stream(*second));
  CHECK(dev->free(*memory));
}

TEST_CASE("gpu cuda: a pool allocation exports an IPC handle where the device supports IPC") {
  auto dev = device_or_skip();
  auto info = dev->probe().devices[0];
  auto pool = device_pool::create(*dev, info, 2 << 20);
  REQUIRE(pool);
  auto handle = dev->export_ipc((*pool)->base());
  if (!info.ipc) {
    CHECK_FALSE(handle);
    return;
  }
  REQUIRE_MESSAGE(handle, handle.error().to_string());
  CHECK(*handle != ipc_handle{});
  CHECK(dev->export_ipc((*pool)->base() + 64).code() == errc::invalid_argument);
}
