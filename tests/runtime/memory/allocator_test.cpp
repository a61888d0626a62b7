#include "runtime/memory/allocator.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <vector>

#include "runtime/rng.hpp"

namespace {

using sluice::allocator;
using sluice::allocator_stats;

constexpr std::uint64_t kib = 1024;
constexpr std::uint64_t mib = 1024 * kib;

/// What the allocator should have granted for a request of `size_bytes`.
std::uint64_t granted_for(std::uint64_t size_bytes) {
  if (size_bytes <= sluice::small_bytes_max) return allocator::class_bytes_for(size_bytes);
  return (size_bytes + 63) / 64 * 64;
}

/// The accounting identities every allocator state must satisfy.
void check_accounting(const allocator_stats& s) {
  CHECK(s.free_bytes + s.slab_bytes + s.extent_used_bytes == s.capacity_bytes);
  CHECK(s.largest_free_extent_bytes <= s.free_bytes);
  CHECK(s.requested_bytes <= s.used_bytes);
  CHECK(s.used_bytes <= s.capacity_bytes);
  CHECK(s.fragmentation >= 0.0);
  CHECK(s.fragmentation < 1.0);
  std::uint64_t slab_objects = 0;
  for (const auto& c : s.classes) slab_objects += c.live_objects;
  CHECK(slab_objects <= s.live_allocations);
}

/// A size drawn from a mix like a KV cache's: mostly small, some large.
std::uint64_t draw_size(sluice::rng& random) {
  const std::uint64_t kind = random.uniform(100);
  if (kind < 60) return random.uniform(4 * kib + 1);
  if (kind < 85) return random.uniform(sluice::small_bytes_max + 1);
  return sluice::small_bytes_max + 1 + random.uniform(2 * mib);
}

}  // namespace

TEST_CASE("allocator: every offset is 64-byte aligned and inside the range") {
  allocator a(16 * mib);
  for (std::uint64_t size :
       {0ULL, 1ULL, 63ULL, 64ULL, 65ULL, 1000ULL, 65536ULL, 65537ULL, 1ULL << 20}) {
    auto offset = a.allocate(size);
    REQUIRE(offset.has_value());
    CHECK(*offset % sluice::allocation_alignment_bytes == 0);
    CHECK(*offset + granted_for(size) <= a.capacity_bytes());
    CHECK(a.size_of(*offset) == size);
  }
}

TEST_CASE("allocator: size classes are multiples of 64 and waste under a quarter") {
  std::uint64_t previous = 0;
  for (std::uint64_t size = 1; size <= sluice::small_bytes_max; ++size) {
    const std::uint64_t c = allocator::class_bytes_for(size);
    CHECK_MESSAGE(c % 64 == 0, "size " << size);
    CHECK(c >= size);
    CHECK(c >= previous);
    CHECK_MESSAGE((c - size) < std::max<std::uint64_t>(64, c / 4), "size " << size);
    previous = c;
  }
  CHECK(allocator::class_bytes_for(0) == 64);
  CHECK(allocator::class_bytes_for(sluice::small_bytes_max) == sluice::small_bytes_max);
}

TEST_CASE("allocator: a zero-byte allocation gets a distinct slot of its own") {
  allocator a(1 * mib);
  auto first = a.allocate(0);
  auto second = a.allocate(0);
  REQUIRE(first.has_value());
  REQUIRE(second.has_value());
  CHECK(*first != *second);
  CHECK(a.size_of(*first) == 0);
  CHECK(a.stats().used_bytes == 128);
  CHECK(a.stats().requested_bytes == 0);
}

TEST_CASE("allocator: a randomized workload never overlaps live allocations") {
  constexpr std::uint64_t seed = 20240601;
  constexpr int operations = 6000;
  MESSAGE("seed " << seed);
  sluice::rng random(seed);
  allocator a(64 * mib);
  std::map<std::uint64_t, std::uint64_t> live;  // offset -> requested size: the model
  std::vector<std::uint64_t> offsets;           // the same offsets, for random picks
  std::uint64_t requested_total = 0;

  for (int op = 0; op < operations; ++op) {
    const bool allocate = offsets.empty() || random.chance(55, 100);
    if (allocate) {
      const std::uint64_t size = draw_size(random);
      auto offset = a.allocate(size);
      if (!offset) continue;  // full for now; frees come later
      REQUIRE(*offset % 64 == 0);
      REQUIRE(*offset + granted_for(size) <= a.capacity_bytes());
      auto next = live.lower_bound(*offset);
      REQUIRE((next == live.end() || *offset + granted_for(size) <= next->first));
      if (next != live.begin()) {
        auto previous = std::prev(next);
        REQUIRE(previous->first + granted_for(previous->second) <= *offset);
      }
      live.emplace(*offset, size);
      offsets.push_back(*offset);
      requested_total += size;
    } else {
      const std::uint64_t pick = random.uniform(offsets.size());
      const std::uint64_t offset = offsets[pick];
      REQUIRE(a.size_of(offset) == live.at(offset));
      a.free(offset);
      CHECK_FALSE(a.size_of(offset).has_value());
      requested_total -= live.at(offset);
      live.erase(offset);
      offsets[pick] = offsets.back();
      offsets.pop_back();
    }
    if (op % 500 == 0) {
      const allocator_stats s = a.stats();
      CHECK(s.live_allocations == live.size());
      CHECK(s.requested_bytes == requested_total);
      check_accounting(s);
    }
  }
  for (std::uint64_t offset : offsets) a.free(offset);
  const allocator_stats s = a.stats();
  CHECK(s.live_allocations == 0);
  CHECK(s.used_bytes == 0);
  CHECK(s.slab_bytes == 0);
  CHECK(s.free_bytes == a.capacity_bytes());
  CHECK(s.largest_free_extent_bytes == a.capacity_bytes());
  CHECK(s.fragmentation == 0.0);
}

TEST_CASE("allocator: exhaustion returns nullopt and recovers after frees") {
  allocator a(4 * mib);
  std::vector<std::uint64_t> blocks;
  while (auto offset = a.allocate(1 * mib)) blocks.push_back(*offset);
  CHECK(blocks.size() == 4);
  CHECK_FALSE(a.allocate(1).has_value());
  CHECK_FALSE(a.allocate(0).has_value());
  CHECK(a.stats().free_bytes == 0);

  a.free(blocks[2]);
  auto again = a.allocate(1 * mib);
  REQUIRE(again.has_value());
  CHECK(*again == blocks[2]);
}

TEST_CASE("allocator: sizes beyond the capacity are refused, not wrapped") {
  allocator a(1 * mib);
  CHECK_FALSE(a.allocate(1 * mib + 1).has_value());
  CHECK_FALSE(a.allocate(std::numeric_limits<std::uint64_t>::max()).has_value());
  CHECK_FALSE(a.allocate(std::numeric_limits<std::uint64_t>::max() - 10).has_value());
  CHECK(a.allocate(1 * mib).has_value());
}

TEST_CASE("allocator: freed neighbours coalesce into one extent") {
  allocator a(1 * mib);
  const std::uint64_t quarter = 256 * kib;
  auto first = a.allocate(quarter);
  auto second = a.allocate(quarter);
  auto third = a.allocate(quarter);
  auto fourth = a.allocate(quarter);
  REQUIRE((first && second && third && fourth));

  a.free(*second);
  a.free(*fourth);
  allocator_stats s = a.stats();
  CHECK(s.free_bytes == 2 * quarter);
  CHECK(s.largest_free_extent_bytes == quarter);
  CHECK(s.fragmentation == doctest::Approx(0.5));
  CHECK_FALSE(a.allocate(2 * quarter).has_value());

  a.free(*third);  // joins the free extents on both sides
  s = a.stats();
  CHECK(s.largest_free_extent_bytes == 3 * quarter);
  CHECK(s.fragmentation == 0.0);

  a.free(*first);
  CHECK(a.stats().largest_free_extent_bytes == 1 * mib);
  CHECK(a.allocate(1 * mib) == 0ULL);
}

TEST_CASE("allocator: best fit picks the smallest free extent that holds the value") {
  allocator a(2 * mib);
  auto big_hole = a.allocate(512 * kib);
  auto keep1 = a.allocate(128 * kib);
  auto small_hole = a.allocate(256 * kib);
  auto keep2 = a.allocate(128 * kib);
  REQUIRE((big_hole && keep1 && small_hole && keep2));
  a.free(*big_hole);
  a.free(*small_hole);
  CHECK(a.allocate(200 * kib) == small_hole);
}

TEST_CASE("allocator: values up to 64 KiB come from slabs and larger ones from extents") {
  allocator a(256 * mib);  // large enough for full-size slabs
  auto small = a.allocate(sluice::small_bytes_max);
  REQUIRE(small.has_value());
  allocator_stats s = a.stats();
  CHECK(s.classes.back().object_bytes == sluice::small_bytes_max);
  CHECK(s.classes.back().live_objects == 1);
  CHECK(s.classes.back().slabs == 1);
  CHECK(s.slab_bytes == sluice::slab_bytes_max);
  CHECK(s.extent_used_bytes == 0);

  auto large = a.allocate(sluice::small_bytes_max + 1);
  REQUIRE(large.has_value());
  s = a.stats();
  CHECK(s.extent_used_bytes == sluice::small_bytes_max + 64);
  CHECK(s.classes.back().live_objects == 1);
  CHECK(s.used_bytes == 2 * sluice::small_bytes_max + 64);
  CHECK(s.requested_bytes == 2 * sluice::small_bytes_max + 1);
  check_accounting(s);
}

TEST_CASE("allocator: small values of one class share a slab until it fills") {
  allocator a(16 * mib);
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < 100; ++i) offsets.push_back(*a.allocate(100));
  allocator_stats s = a.stats();
  const auto& cls = s.classes[1];  // the 128-byte class
  CHECK(cls.object_bytes == 128);
  CHECK(cls.live_objects == 100);
  CHECK(cls.slabs == 1);
  for (std::size_t i = 1; i < offsets.size(); ++i) CHECK(offsets[i] == offsets[0] + i * 128);
  CHECK(s.used_bytes == 100 * 128);
  CHECK(s.requested_bytes == 100 * 100);
}

TEST_CASE("allocator: a slab whose objects are all free goes back to the extent space") {
  allocator a(4 * mib);
  std::vector<std::uint64_t> offsets;
  for (int i = 0; i < 100; ++i) offsets.push_back(*a.allocate(100));
  CHECK(a.stats().slab_bytes > 0);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) a.free(offsets[i]);
  CHECK(a.stats().classes[1].slabs == 1);  // one object still holds it
  a.free(offsets.back());
  const allocator_stats s = a.stats();
  CHECK(s.classes[1].slabs == 0);
  CHECK(s.slab_bytes == 0);
  CHECK(s.free_bytes == 4 * mib);
  CHECK(s.largest_free_extent_bytes == 4 * mib);
}

TEST_CASE("allocator: a small value still fits in the last bytes when no whole slab does") {
  allocator a(1 * mib);
  auto large = a.allocate(1 * mib - 128);  // leaves 128 bytes, less than any slab
  REQUIRE(large.has_value());
  auto offset = a.allocate(100);
  REQUIRE(offset.has_value());
  CHECK(a.size_of(*offset) == 100);
  allocator_stats s = a.stats();
  CHECK(s.slab_bytes == 0);
  CHECK(s.free_bytes == 0);
  CHECK(s.extent_used_bytes == 1 * mib);
  CHECK_FALSE(a.allocate(0).has_value());
  a.free(*offset);
  a.free(*large);
  CHECK(a.stats().free_bytes == 1 * mib);
}

TEST_CASE("allocator: in a small range the big classes skip slabs") {
  // A slab is at most 1/256 of the range (16 KiB here): a 64 KiB slab of
  // one object would only waste space, so such values are extents.
  allocator a(4 * mib);
  auto big = a.allocate(sluice::small_bytes_max);
  auto tiny = a.allocate(100);
  REQUIRE((big && tiny));
  const allocator_stats s = a.stats();
  CHECK(s.extent_used_bytes == sluice::small_bytes_max);
  CHECK(s.classes.back().slabs == 0);
  CHECK(s.classes[1].slabs == 1);
  CHECK(s.slab_bytes <= 4 * mib / sluice::slab_capacity_divisor);
  check_accounting(s);
}

TEST_CASE("allocator: size_of rejects interior, freed and out-of-range offsets") {
  allocator a(8 * mib);
  const std::uint64_t small = *a.allocate(1000);  // class 1024
  const std::uint64_t large = *a.allocate(100 * kib);
  CHECK(a.size_of(small) == 1000);
  CHECK(a.size_of(large) == 100 * kib);

  CHECK_FALSE(a.size_of(small + 64).has_value());         // inside the object
  CHECK_FALSE(a.size_of(small + 1024).has_value());       // the next slot, never allocated
  CHECK_FALSE(a.size_of(large + 64).has_value());         // inside the extent
  CHECK_FALSE(a.size_of(large + 100 * kib).has_value());  // free space after it
  CHECK_FALSE(a.size_of(a.capacity_bytes()).has_value());
  CHECK_FALSE(a.size_of(std::numeric_limits<std::uint64_t>::max()).has_value());

  a.free(small);
  a.free(large);
  CHECK_FALSE(a.size_of(small).has_value());
  CHECK_FALSE(a.size_of(large).has_value());
}

TEST_CASE("allocator: freeing an offset that is not allocated stops the process") {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    ::dup2(null_fd, STDERR_FILENO);  // the assertion's message is expected
    allocator a(1 * mib);
    const std::uint64_t offset = *a.allocate(1000);
    a.free(offset + 64);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}
