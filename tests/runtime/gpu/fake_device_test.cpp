#include <doctest/doctest.h>

#include <numeric>
#include <vector>

#include "runtime/gpu/fake_device.hpp"

using namespace sluice;
using namespace sluice::gpu;

namespace {

std::vector<std::byte> pattern(std::size_t n, int seed) {
  std::vector<std::byte> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((i * 31 + static_cast<std::size_t>(seed)) & 0xff);
  return out;
}

}  // namespace

TEST_CASE("gpu fake: a copy to the device lands only when the fake advances") {
  fake_device dev;
  auto memory = dev.allocate(0, 4096);
  REQUIRE(memory);
  auto stream = dev.create_stream(0);
  REQUIRE(stream);
  auto bytes = pattern(4096, 1);
  REQUIRE(dev.copy_to_device(*stream, *memory, bytes.data(), bytes.size()));
  CHECK(dev.read(*memory, 4096) == std::vector<std::byte>(4096));
  CHECK(dev.queued() == 1);
  CHECK(dev.advance() == 1);
  CHECK(dev.read(*memory, 4096) == bytes);
  CHECK(dev.advance() == 0);
}

TEST_CASE("gpu fake: an event is done once the work queued before its record has run") {
  fake_device dev;
  auto memory = dev.allocate(0, 1024);
  auto stream = dev.create_stream(0);
  auto event = dev.create_event(0);
  REQUIRE(memory);
  REQUIRE(stream);
  REQUIRE(event);
  CHECK(*dev.query(*event) == event_state::done);  // never recorded
  std::vector<std::byte> back(1024);
  REQUIRE(dev.copy_to_host(*stream, back.data(), *memory, back.size()));
  REQUIRE(dev.record(*event, *stream));
  CHECK(*dev.query(*event) == event_state::pending);
  CHECK(dev.advance() == 1);  // the copy
  CHECK(*dev.query(*event) == event_state::pending);
  CHECK(dev.advance() == 1);  // the record
  CHECK(*dev.query(*event) == event_state::done);
}

TEST_CASE("gpu fake: a stream that waits for an event runs nothing after the wait until the event is done") {
  fake_device dev;
  auto a = dev.allocate(0, 256);
  auto b = dev.allocate(0, 256);
  auto first = dev.create_stream(0);
  auto second = dev.create_stream(0);
  auto event = dev.create_event(0);
  REQUIRE(a);
  REQUIRE(b);
  auto bytes = pattern(256, 7);
  // first: host → a, then the event; second: wait, then a → b.
  REQUIRE(dev.copy_to_device(*first, *a, bytes.data(), bytes.size()));
  REQUIRE(dev.record(*event, *first));
  REQUIRE(dev.stream_wait(*second, *event));
  REQUIRE(dev.copy_on_device(*second, *b, *a, 256));
  CHECK(dev.drain() == 4);
  CHECK(dev.read(*b, 256) == bytes);
}

TEST_CASE("gpu fake: a copy outside an allocation is refused when it is queued") {
  fake_device dev;
  auto memory = dev.allocate(0, 128);
  auto stream = dev.create_stream(0);
  REQUIRE(memory);
  std::vector<std::byte> bytes(256);
  CHECK(dev.copy_to_device(*stream, *memory, bytes.data(), 256).code() == errc::invalid_argument);
  CHECK(dev.copy_to_device(*stream, *memory + 64, bytes.data(), 128).code() == errc::invalid_argument);
  CHECK(dev.copy_to_host(*stream, bytes.data(), 12, 1).code() == errc::invalid_argument);
  CHECK(dev.copy_to_device(stream_handle{999}, *memory, bytes.data(), 1).code() == errc::invalid_argument);
  CHECK(dev.queued() == 0);
}

TEST_CASE("gpu fake: an allocation beyond the device's memory answers no_capacity") {
  fake_device dev{{.device_count = 1, .memory_bytes = 1 << 20}};
  auto first = dev.allocate(0, 768 << 10);
  REQUIRE(first);
  CHECK(dev.allocate(0, 512 << 10).code() == errc::no_capacity);
  CHECK(dev.allocate(1, 64).code() == errc::invalid_argument);
  REQUIRE(dev.free(*first));
  CHECK(dev.allocate(0, 512 << 10));
  CHECK(dev.free(*first).code() == errc::invalid_argument);
}

TEST_CASE("gpu fake: without a usable device the probe says why and every call answers unavailable") {
  fake_device dev{{.why_not = "no CUDA driver"}};
  auto found = dev.probe();
  CHECK_FALSE(found.usable());
  CHECK(found.devices.empty());
  CHECK(found.why_not == "no CUDA driver");
  CHECK(dev.allocate(0, 64).code() == errc::unavailable);
  CHECK(dev.create_stream(0).code() == errc::unavailable);
  CHECK(dev.create_event(0).code() == errc::unavailable);
}

TEST_CASE("gpu fake: an IPC handle opens the allocation it was exported from") {
  fake_device dev;
  auto memory = dev.allocate(0, 64);
  REQUIRE(memory);
  auto handle = dev.export_ipc(*memory);
  REQUIRE(handle);
  auto opened = dev.open_ipc(0, *handle);
  REQUIRE(opened);
  CHECK(*opened == *memory);
  CHECK(dev.close_ipc(*opened));
  CHECK(dev.close_ipc(*opened).code() == errc::invalid_argument);
  CHECK(dev.export_ipc(*memory + 64).code() == errc::invalid_argument);
}
