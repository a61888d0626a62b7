#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "runtime/gpu/event_pool.hpp"
#include "runtime/gpu/fake_device.hpp"

using namespace sluice;
using namespace sluice::gpu;

namespace {

std::vector<std::uint64_t> tokens(const std::vector<gpu_completion>& done) {
  std::vector<std::uint64_t> out;
  for (auto& c : done) {
    CHECK(c.ok);
    out.push_back(c.token);
  }
  return out;
}

struct fixture {
  fake_device dev;
  stream_handle stream = *dev.create_stream(0);
};

}  // namespace

TEST_CASE("gpu event pool: a record beyond the bound answers overloaded") {
  fixture f;
  event_pool pool{f.dev, 0, 4};
  for (std::uint64_t t = 1; t <= 4; ++t) REQUIRE(pool.record(f.stream, t));
  auto refused = pool.record(f.stream, 5);
  CHECK(refused.code() == errc::overloaded);
  CHECK(pool.outstanding() == 4);
  CHECK(pool.created() == 4);
  CHECK(pool.events_max() == 4);
}

TEST_CASE("gpu event pool: the default bound is gpu_events_max") {
  fixture f;
  event_pool pool{f.dev, 0};
  CHECK(pool.events_max() == gpu_events_max);
  for (std::uint64_t t = 0; t < gpu_events_max; ++t) REQUIRE(pool.record(f.stream, t));
  CHECK(pool.record(f.stream, gpu_events_max).code() == errc::overloaded);
}

TEST_CASE("gpu event pool: nothing is reused while the work before it may still run") {
  fixture f;
  event_pool pool{f.dev, 0, 2};
  auto first = pool.record(f.stream, 1);
  auto second = pool.record(f.stream, 2);
  REQUIRE(first);
  REQUIRE(second);
  CHECK(*first != *second);
  // Nothing ran: a poll finds nothing, and nothing is free to record on.
  CHECK(pool.poll().empty());
  CHECK(pool.free_count() == 0);
  CHECK(pool.record(f.stream, 3).code() == errc::overloaded);
  CHECK(f.dev.advance() == 1);  // the first record only
  CHECK(tokens(pool.poll()) == std::vector<std::uint64_t>{1});
  auto reused = pool.record(f.stream, 3);
  REQUIRE(reused);
  CHECK(*reused == *first);  // the one found done, not the one still pending
  CHECK(pool.created() == 2);
}

TEST_CASE("gpu event pool: an event is reused only after a poll found it done") {
  fixture f;
  event_pool pool{f.dev, 0, 8};
  auto first = pool.record(f.stream, 1);
  REQUIRE(first);
  f.dev.drain();
  // Done on the device, but no poll has seen it: the next record takes a
  // fresh event.
  auto second = pool.record(f.stream, 2);
  REQUIRE(second);
  CHECK(*second != *first);
  f.dev.drain();
  CHECK(tokens(pool.poll()) == std::vector<std::uint64_t>{1, 2});
  CHECK(pool.free_count() == 2);
  auto third = pool.record(f.stream, 3);
  REQUIRE(third);
  CHECK(*third == *first);  // the oldest freed goes first
  CHECK(pool.created() == 2);
}

TEST_CASE("gpu event pool: completions come back in record order, each once") {
  fake_device dev;
  auto slow = *dev.create_stream(0);
  auto fast = *dev.create_stream(0);
  event_pool pool{dev, 0, 16};
  auto memory = *dev.allocate(0, 4096);
  std::vector<std::byte> host(4096);
  // Token 1 waits behind two copies on `slow`; tokens 2 and 3 are on `fast`.
  REQUIRE(dev.copy_to_host(slow, host.data(), memory, 4096));
  REQUIRE(dev.copy_to_host(slow, host.data(), memory, 4096));
  REQUIRE(pool.record(slow, 1));
  REQUIRE(pool.record(fast, 2));
  REQUIRE(pool.record(fast, 3));
  CHECK(dev.advance(2) == 2);  // slow's first copy, fast's first record
  CHECK(tokens(pool.poll()) == std::vector<std::uint64_t>{2});
  dev.drain();
  CHECK(tokens(pool.poll()) == std::vector<std::uint64_t>{1, 3});
  CHECK(pool.poll().empty());
  CHECK(pool.outstanding() == 0);
}

TEST_CASE("gpu event pool: a poll queries at most the number asked for, oldest first") {
  fixture f;
  event_pool pool{f.dev, 0, 8};
  for (std::uint64_t t = 1; t <= 5; ++t) REQUIRE(pool.record(f.stream, t));
  f.dev.drain();
  CHECK(tokens(pool.poll(2)) == std::vector<std::uint64_t>{1, 2});
  CHECK(tokens(pool.poll(2)) == std::vector<std::uint64_t>{3, 4});
  CHECK(tokens(pool.poll(2)) == std::vector<std::uint64_t>{5});
}

TEST_CASE("gpu event pool: a failed event is reported with its reason and never reused") {
  fixture f;
  event_pool pool{f.dev, 0, 2};
  auto bad = pool.record(f.stream, 1);
  REQUIRE(bad);
  REQUIRE(pool.record(f.stream, 2));
  f.dev.fail_event(*bad, "an illegal address was encountered");
  f.dev.drain();
  auto done = pool.poll();
  REQUIRE(done.size() == 2);
  CHECK(done[0].token == 1);
  CHECK_FALSE(done[0].ok);
  CHECK(done[0].error == "an illegal address was encountered");
  CHECK(done[1].ok);
  CHECK(pool.created() == 1);
  auto next = pool.record(f.stream, 3);
  REQUIRE(next);
  CHECK(*next != *bad);
}

TEST_CASE("gpu event pool: a record the device refuses leaves the pool as it was") {
  fixture f;
  event_pool pool{f.dev, 0, 2};
  CHECK(pool.record(stream_handle{12345}, 1).code() == errc::invalid_argument);
  CHECK(pool.outstanding() == 0);
  CHECK(pool.free_count() == pool.created());
  REQUIRE(pool.record(f.stream, 2));
  REQUIRE(pool.record(f.stream, 3));
  CHECK(pool.created() == 2);
}
