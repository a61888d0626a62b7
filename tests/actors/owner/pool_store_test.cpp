// The owner's pool store: versions kept in the shared-memory pool, readers
// that keep what they read alive past a drop, values written in place
// through a reservation, and a full pool that refuses without losing what
// it holds.

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "actors/owner/pool_store.hpp"

namespace {

using sluice::errc;
using sluice::pool_store;
using sluice::shared_bytes;

constexpr std::uint64_t pool_bytes = 1 << 20;

std::unique_ptr<pool_store> make_store(std::uint64_t bytes = pool_bytes) {
  sluice::pool_options options;
  options.name = "sluice-test-pool-store";
  options.pool_bytes = bytes;
  options.segment_bytes = bytes;
  auto store = pool_store::create(options);
  REQUIRE(store.ok());
  return std::move(*store);
}

/// `size` bytes of a pattern that depends on `seed`, in memory of their own.
shared_bytes pattern(std::size_t size, int seed) {
  auto buf = sluice::byte_buffer::allocate(size);
  for (std::size_t i = 0; i < size; ++i) buf.data()[i] = static_cast<std::byte>((i * 31 + seed) & 0xff);
  return std::move(buf).freeze();
}

bool same(const shared_bytes& a, const shared_bytes& b) {
  return a.size() == b.size() && (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size()) == 0);
}

}  // namespace

TEST_CASE("pool store: versions are kept, found, listed and dropped, and a version stored twice is refused") {
  auto store = make_store();
  auto v1 = pattern(1000, 1);
  auto v2 = pattern(3000, 2);
  REQUIRE(store->put("k", 1, v1).ok());
  REQUIRE(store->put("k", 2, v2).ok());
  REQUIRE(store->put("other", 7, pattern(10, 3)).ok());
  CHECK(store->latest("k") == 2);
  CHECK(store->latest("nothing") == 0);
  CHECK(store->object_count() == 3);
  auto got = store->get("k", 1);
  REQUIRE(got.has_value());
  CHECK(same(*got, v1));
  // Kept in the pool (a copy of the caller's bytes), where a local client
  // reaches it.
  CHECK(got->data() != v1.data());
  auto where = store->locate(*got);
  REQUIRE(where.has_value());
  CHECK(where->length == 1000);
  CHECK_FALSE(store->locate(v1).has_value());
  auto twice = store->put("k", 2, pattern(5, 9));
  CHECK(twice.code() == errc::conflict);
  CHECK(same(*store->get("k", 2), v2));  // the first one stays
  using entry = std::pair<std::string, std::uint64_t>;
  CHECK(store->inventory() == std::vector<entry>{{"k", 1}, {"k", 2}, {"other", 7}});
  got.reset();
  CHECK(store->drop("k", 2));
  CHECK_FALSE(store->drop("k", 2));
  CHECK_FALSE(store->get("k", 2).has_value());
  CHECK(store->latest("k") == 1);
  CHECK(store->object_count() == 2);
}

TEST_CASE("pool store: a reader keeps a dropped version readable, and its region goes back with the last reference") {
  auto store = make_store();
  REQUIRE(store->put("k", 1, pattern(64 * 1024, 5)).ok());
  auto used_with_value = store->used_bytes();
  CHECK(used_with_value >= 64 * 1024);
  CHECK(store->references("k", 1) == 1);  // the store's own
  auto reader = store->get("k", 1);
  REQUIRE(reader.has_value());
  CHECK(store->references("k", 1) == 2);
  CHECK(store->references("k", 9) == 0);
  REQUIRE(store->drop("k", 1));
  // Still allocated, still the same bytes, for whoever holds them.
  CHECK(store->used_bytes() == used_with_value);
  CHECK(same(*reader, pattern(64 * 1024, 5)));
  reader.reset();
  CHECK(store->used_bytes() == 0);
  CHECK(store->stats().live_allocations == 0);
}

TEST_CASE("pool store: a value written in place through a reservation is kept where it was written") {
  auto store = make_store();
  auto room = store->reserve(4096);
  REQUIRE(room.ok());
  auto* at = room->data();
  auto expected = pattern(4096, 7);
  std::memcpy(sluice::fill_in_place(*room).data(), expected.data(), 4096);
  REQUIRE(store->put("k", 1, *room).ok());
  auto got = store->get("k", 1);
  REQUIRE(got.has_value());
  CHECK(got->data() == at);  // no copy
  CHECK(same(*got, expected));
  // A reservation never put goes back to the pool when it is let go.
  auto before = store->used_bytes();
  {
    auto unused = store->reserve(8192);
    REQUIRE(unused.ok());
    CHECK(store->used_bytes() > before);
  }
  CHECK(store->used_bytes() == before);
}

TEST_CASE("pool store: a full pool refuses with no_capacity and keeps everything stored before") {
  auto store = make_store(256 * 1024);
  REQUIRE(store->put("a", 1, pattern(100 * 1024, 1)).ok());
  REQUIRE(store->put("b", 1, pattern(100 * 1024, 2)).ok());
  auto used = store->used_bytes();
  auto big = store->put("c", 1, pattern(200 * 1024, 3));
  CHECK(big.code() == errc::no_capacity);
  // Nothing of the refused key is left behind, and nothing else moved.
  CHECK(store->latest("c") == 0);
  CHECK(store->object_count() == 2);
  CHECK(store->used_bytes() == used);
  CHECK(same(*store->get("a", 1), pattern(100 * 1024, 1)));
  CHECK(same(*store->get("b", 1), pattern(100 * 1024, 2)));
  CHECK(store->reserve(200 * 1024).code() == errc::no_capacity);
  // A transport's allocator gets nothing then, and uses memory of its own.
  auto allocate = store->payload_allocator();
  CHECK_FALSE(allocate(200 * 1024).has_value());
}

TEST_CASE("pool store: payloads a transport receives into the pool are kept in place") {
  auto store = make_store();
  auto allocate = store->payload_allocator();
  auto slot = allocate(2048);
  REQUIRE(slot.has_value());
  auto expected = pattern(2048, 4);
  std::memcpy(slot->bytes.data(), expected.data(), 2048);
  auto received = slot->frozen();
  slot.reset();
  REQUIRE(store->locate(received).has_value());
  REQUIRE(store->put("k", 3, received).ok());
  CHECK(store->get("k", 3)->data() == received.data());
  // The store outlives nothing it handed out: the allocator keeps the pool.
  store.reset();
  CHECK(same(received, expected));
  auto late = allocate(1024);
  CHECK(late.has_value());
}
