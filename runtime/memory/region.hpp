// region: where a value lives in an owner's pool — the descriptor
// {segment, offset, length} that travels on the wire instead of the bytes
// (design.md, "The wire"). A value type.
//
// A region that arrives from a peer is untrusted: resolve it through
// pool::resolve, which checks it names a live allocation, before touching
// the bytes it points at.
#pragma once

#include <cstdint>

namespace sluice {

struct region {
  std::uint32_t segment = 0;  ///< Index of the segment in its pool.
  std::uint64_t offset = 0;   ///< Start of the value, from the segment's base; 64-byte aligned.
  std::uint64_t length = 0;   ///< The value's length in bytes.

  friend bool operator==(const region&, const region&) = default;
};

}  // namespace sluice
