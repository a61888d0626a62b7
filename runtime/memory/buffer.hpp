// Byte buffers that move through the data plane without copies.
//
// byte_buffer is a resource: one owner, mutable, aligned (64 bytes by
// default, so tensors can be consumed in place and Cap'n Proto words are
// always aligned). shared_bytes is a value: an immutable view with shared
// ownership of whatever holds the bytes (a heap buffer today; a region of
// a shared-memory segment later). Copying a shared_bytes copies a pointer,
// never the bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>

namespace sluice {

/// Alignment of every payload allocation (design.md: tensors in place).
inline constexpr std::size_t payload_alignment = 64;

class shared_bytes;

class byte_buffer {
 public:
  byte_buffer() = default;
  /// Allocates `size` bytes aligned to `alignment` (a power of two).
  /// The bytes are not initialised.
  static byte_buffer allocate(std::size_t size, std::size_t alignment = payload_alignment);

  byte_buffer(byte_buffer&&) noexcept = default;
  byte_buffer& operator=(byte_buffer&&) noexcept = default;
  byte_buffer(const byte_buffer&) = delete;
  byte_buffer& operator=(const byte_buffer&) = delete;

  std::byte* data() noexcept { return data_.get(); }
  const std::byte* data() const noexcept { return data_.get(); }
  std::size_t size() const noexcept { return size_; }
  std::span<std::byte> span() noexcept { return {data_.get(), size_}; }

  /// Gives up unique ownership and returns an immutable shared view.
  shared_bytes freeze() &&;

 private:
  struct free_deleter {
    void operator()(std::byte* p) const noexcept;
  };
  std::unique_ptr<std::byte, free_deleter> data_;
  std::size_t size_ = 0;
};

class shared_bytes {
 public:
  shared_bytes() = default;
  /// A view of `bytes` kept alive by `owner`.
  shared_bytes(std::shared_ptr<const void> owner, std::span<const std::byte> bytes)
      : owner_(std::move(owner)), data_(bytes.data()), size_(bytes.size()) {}

  /// Copies `bytes` into a fresh aligned buffer.
  static shared_bytes copy_of(std::span<const std::byte> bytes);
  static shared_bytes copy_of(std::string_view text);

  const std::byte* data() const noexcept { return data_; }
  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::span<const std::byte> span() const noexcept { return {data_, size_}; }
  std::string_view as_string_view() const noexcept {
    return {reinterpret_cast<const char*>(data_), size_};
  }
  /// What keeps the bytes alive; shared with every copy and slice.
  const std::shared_ptr<const void>& owner() const noexcept { return owner_; }

  /// A sub-view sharing ownership. REQUIRES: offset + length <= size().
  shared_bytes slice(std::size_t offset, std::size_t length) const;

 private:
  std::shared_ptr<const void> owner_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

inline std::span<const std::byte> as_bytes(std::string_view text) noexcept {
  return {reinterpret_cast<const std::byte*>(text.data()), text.size()};
}

}  // namespace sluice
