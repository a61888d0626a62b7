#include "runtime/memory/pool.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

using sluice::errc;
using sluice::pool;
using sluice::pool_options;
using sluice::region;

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;

std::unique_ptr<pool> make_pool(std::uint64_t pool_bytes, std::uint64_t segment_bytes) {
  pool_options options;
  options.name = "pool-test";
  options.pool_bytes = pool_bytes;
  options.segment_bytes = segment_bytes;
  auto created = pool::create(options);
  REQUIRE_MESSAGE(created.ok(), created.error().to_string());
  return std::move(*created);
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("pool: a small pool is one segment and a large one is several") {
  auto small = make_pool(100 * kib, 1024 * mib);
  CHECK(small->segment_count() == 1);
  CHECK(small->segment_at(0).size_bytes() == 100 * kib);

  auto even = make_pool(3 * mib, 1 * mib);
  CHECK(even->segment_count() == 3);
  for (std::uint32_t i = 0; i < 3; ++i) CHECK(even->segment_at(i).size_bytes() == 1 * mib);

  auto uneven = make_pool(5 * mib, 2 * mib);
  REQUIRE(uneven->segment_count() == 3);
  CHECK(uneven->segment_at(2).size_bytes() == 1 * mib);
  CHECK(uneven->stats().capacity_bytes == 5 * mib);
  CHECK(uneven->segment_at(0).fd() != uneven->segment_at(1).fd());
}

TEST_CASE("pool: bad options are refused with invalid_argument") {
  pool_options options;
  options.pool_bytes = 0;
  CHECK(pool::create(options).code() == errc::invalid_argument);
  options.pool_bytes = 1 * mib;
  options.segment_bytes = 0;
  CHECK(pool::create(options).code() == errc::invalid_argument);
  // Too many segments is refused before any is created.
  options.pool_bytes = 1ULL << 40;
  options.segment_bytes = 1 * mib;
  auto refused = pool::create(options);
  CHECK(refused.code() == errc::invalid_argument);
  CHECK(contains(refused.error().message(), "segment_bytes"));
}

TEST_CASE("pool: values spill into the next segment when one is full") {
  auto p = make_pool(2 * mib, 1 * mib);
  auto first = p->allocate(600 * kib);
  auto second = p->allocate(600 * kib);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  CHECK(first->segment == 0);
  CHECK(second->segment == 1);
  CHECK(second->length == 600 * kib);

  auto bytes = p->resolve(*second);
  REQUIRE(bytes.ok());
  CHECK(bytes->data() == p->segment_at(1).base() + second->offset);
  CHECK(bytes->size() == 600 * kib);
  std::memset(bytes->data(), 0x5a, bytes->size());
  CHECK(p->segment_at(1).base()[second->offset + 600 * kib - 1] == std::byte{0x5a});
}

TEST_CASE("pool: exhaustion is no_capacity with a message naming sizes, and frees recover") {
  auto p = make_pool(2 * mib, 1 * mib);
  std::vector<region> held;
  for (int i = 0; i < 4; ++i) {
    auto r = p->allocate(512 * kib);
    REQUIRE(r.ok());
    held.push_back(*r);
  }
  auto full = p->allocate(512 * kib);
  REQUIRE(full.code() == errc::no_capacity);
  CHECK(contains(full.error().message(), "512 KiB"));
  CHECK(contains(full.error().message(), "pool-test"));

  auto too_big = p->allocate(3 * mib);
  REQUIRE(too_big.code() == errc::no_capacity);
  CHECK(contains(too_big.error().message(), "segment_bytes"));

  p->free(held[3]);
  auto again = p->allocate(512 * kib);
  REQUIRE(again.ok());
  CHECK(*again == held[3]);
}

TEST_CASE("pool: resolve rejects forged, out-of-range and freed regions") {
  auto p = make_pool(2 * mib, 1 * mib);
  const region small = *p->allocate(1000);
  const region large = *p->allocate(200 * kib);
  CHECK(p->resolve(small).ok());
  CHECK(p->resolve(large).ok());
  CHECK(p->resolve(region{small.segment, small.offset, 10})->size() == 10);  // a prefix is fine

  auto rejected = [&](region r) {
    auto resolved = p->resolve(r);
    return resolved.code() == errc::invalid_argument;
  };
  CHECK(rejected(region{2, small.offset, small.length}));                  // no such segment
  CHECK(rejected(region{UINT32_MAX, 0, 1}));                               // far out of range
  CHECK(rejected(region{small.segment, small.offset + 64, 1}));            // inside a value
  CHECK(rejected(region{small.segment, small.offset, small.length + 1}));  // too long
  CHECK(rejected(region{large.segment, large.offset, UINT64_MAX}));
  CHECK(rejected(region{large.segment, large.offset + 200 * kib, 64}));  // free space
  CHECK(rejected(region{0, 1 * mib, 1}));                                // past the segment's end
  CHECK(rejected(region{0, UINT64_MAX - 63, 64}));

  p->free(small);
  CHECK(rejected(small));
  CHECK(contains(p->resolve(small).error().message(), "live allocation"));
}

TEST_CASE("pool: stats add up over its segments") {
  auto p = make_pool(3 * mib, 1 * mib);
  auto a = p->allocate(800 * kib);
  auto b = p->allocate(800 * kib);
  auto c = p->allocate(100);
  REQUIRE((a.ok() && b.ok() && c.ok()));
  const sluice::pool_stats s = p->stats();
  CHECK(s.segment_count == 3);
  CHECK(s.capacity_bytes == 3 * mib);
  CHECK(s.live_allocations == 3);
  CHECK(s.requested_bytes == 1600 * kib + 100);
  CHECK(s.used_bytes == 1600 * kib + 128);
  std::uint64_t per_segment_used = 0;
  for (std::uint32_t i = 0; i < p->segment_count(); ++i)
    per_segment_used += p->segment_stats(i).used_bytes;
  CHECK(per_segment_used == s.used_bytes);
  CHECK(s.largest_free_extent_bytes <= s.free_bytes);
}

TEST_CASE("pool: a client process reads a value in place through the segment fd") {
  auto p = make_pool(1 * mib, 1 * mib);
  const region r = *p->allocate(13);
  std::memcpy(p->resolve(r)->data(), "hello, client", 13);
  const int fd = p->segment_at(r.segment).fd();
  const std::uint64_t size_bytes = p->segment_at(r.segment).size_bytes();

  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    auto attached = sluice::segment::attach(::dup(fd), size_bytes, sluice::access_mode::read_only);
    if (!attached) ::_exit(1);
    const std::byte* value = (*attached)->base() + r.offset;
    ::_exit(std::memcmp(value, "hello, client", 13) == 0 ? 0 : 2);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
