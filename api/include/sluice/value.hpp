// sluice::value: the bytes of one version of a key, as a get returns them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace sluice {

/// Read-only bytes with shared ownership: copying a value copies a
/// reference, never the bytes. The bytes stay valid as long as any copy
/// of the value lives. 64-byte aligned.
class value {
 public:
  value() = default;
  /// Used by Sluice itself: `owner` keeps `bytes` alive.
  value(std::shared_ptr<const void> owner, std::span<const std::byte> bytes, std::uint64_t version)
      : owner_(std::move(owner)), bytes_(bytes), version_(version) {}

  std::span<const std::byte> bytes() const noexcept { return bytes_; }
  const std::byte* data() const noexcept { return bytes_.data(); }
  std::size_t size() const noexcept { return bytes_.size(); }
  bool empty() const noexcept { return bytes_.empty(); }
  /// The bytes viewed as text (no copy, no validation).
  std::string_view str() const noexcept {
    return {reinterpret_cast<const char*>(bytes_.data()), bytes_.size()};
  }
  std::string to_string() const { return std::string{str()}; }
  /// The version of the key these bytes are; versions only grow.
  std::uint64_t version() const noexcept { return version_; }

 private:
  std::shared_ptr<const void> owner_;
  std::span<const std::byte> bytes_;
  std::uint64_t version_ = 0;
};

}  // namespace sluice
