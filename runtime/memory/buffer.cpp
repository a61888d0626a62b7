#include "runtime/memory/buffer.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/assert.hpp"

namespace sluice {

void byte_buffer::free_deleter::operator()(std::byte* p) const noexcept {
  std::free(p);
}

byte_buffer byte_buffer::allocate(std::size_t size, std::size_t alignment) {
  SLUICE_ASSERT(alignment != 0 && (alignment & (alignment - 1)) == 0);
  // aligned_alloc needs a size that is a multiple of the alignment, and a
  // zero-byte buffer still gets a unique, aligned address.
  std::size_t rounded = size == 0 ? alignment : (size + alignment - 1) / alignment * alignment;
  void* p = std::aligned_alloc(alignment, rounded);
  if (p == nullptr) throw std::bad_alloc{};
  byte_buffer out;
  out.data_.reset(static_cast<std::byte*>(p));
  out.size_ = size;
  return out;
}

shared_bytes byte_buffer::freeze() && {
  std::shared_ptr<std::byte> owner(data_.release(), free_deleter{});
  const std::byte* p = owner.get();
  std::size_t n = size_;
  size_ = 0;
  return shared_bytes{std::shared_ptr<const void>(std::move(owner), p), {p, n}};
}

shared_bytes shared_bytes::copy_of(std::span<const std::byte> bytes) {
  auto buf = byte_buffer::allocate(bytes.size());
  if (!bytes.empty()) std::memcpy(buf.data(), bytes.data(), bytes.size());
  return std::move(buf).freeze();
}

shared_bytes shared_bytes::copy_of(std::string_view text) {
  return copy_of(as_bytes(text));
}

shared_bytes shared_bytes::slice(std::size_t offset, std::size_t length) const {
  SLUICE_ASSERT(offset <= size_);
  SLUICE_ASSERT(length <= size_ - offset);
  return shared_bytes{owner_, {data_ + offset, length}};
}

}  // namespace sluice
