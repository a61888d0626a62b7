#include "runtime/memory/buffer.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>

namespace {

bool aligned(const void* p, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

}  // namespace

TEST_CASE("buffer: allocations are 64-byte aligned whatever their size") {
  for (std::size_t size : {0, 1, 63, 64, 65, 4096, 1 << 20}) {
    auto buf = sluice::byte_buffer::allocate(size);
    REQUIRE(buf.data() != nullptr);
    CHECK(buf.size() == size);
    CHECK(aligned(buf.data(), sluice::payload_alignment));
    CHECK(buf.span().size() == size);
  }
  CHECK(sluice::payload_alignment == 64);
}

TEST_CASE("buffer: a larger alignment can be asked for") {
  auto buf = sluice::byte_buffer::allocate(100, 4096);
  CHECK(aligned(buf.data(), 4096));
}

TEST_CASE("buffer: freezing keeps the bytes without copying them") {
  auto buf = sluice::byte_buffer::allocate(5);
  std::memcpy(buf.data(), "hello", 5);
  const std::byte* where = buf.data();
  sluice::shared_bytes frozen = std::move(buf).freeze();
  CHECK(frozen.size() == 5);
  CHECK(frozen.data() == where);
  CHECK(frozen.as_string_view() == "hello");
  CHECK(aligned(frozen.data(), sluice::payload_alignment));
}

TEST_CASE("buffer: a copy is aligned and holds the same bytes") {
  auto copy = sluice::shared_bytes::copy_of(std::string_view("payload"));
  CHECK(copy.as_string_view() == "payload");
  CHECK(aligned(copy.data(), sluice::payload_alignment));
  auto empty = sluice::shared_bytes::copy_of(std::string_view(""));
  CHECK(empty.empty());
}

TEST_CASE("buffer: a slice shares ownership with the bytes it views") {
  auto whole = sluice::shared_bytes::copy_of(std::string_view("abcdefgh"));
  auto middle = whole.slice(2, 4);
  CHECK(middle.as_string_view() == "cdef");
  CHECK(middle.data() == whole.data() + 2);
  CHECK(middle.owner() == whole.owner());
  CHECK(whole.owner().use_count() == 2);

  // The slice keeps the bytes alive after the original view is gone.
  whole = sluice::shared_bytes{};
  CHECK(middle.owner().use_count() == 1);
  CHECK(middle.as_string_view() == "cdef");
}

TEST_CASE("buffer: copying a view copies a pointer, not the bytes") {
  auto a = sluice::shared_bytes::copy_of(std::string_view("xyz"));
  sluice::shared_bytes b = a;
  CHECK(b.data() == a.data());
  CHECK(a.owner().use_count() == 2);
  auto empty_slice = a.slice(3, 0);
  CHECK(empty_slice.empty());
}
