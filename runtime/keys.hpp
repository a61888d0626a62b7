// Keys: what a valid key is, checked where requests enter a node, and the
// slot a key falls in.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/result.hpp"

namespace sluice {

/// Longest key accepted, in bytes. Keys are arbitrary bytes otherwise.
inline constexpr std::size_t max_key_bytes = 4096;

inline result<void> check_key(std::string_view key) {
  if (key.empty()) return fail(errc::invalid_argument, "the key is empty");
  if (key.size() > max_key_bytes) {
    return fail(errc::invalid_argument, "the key is " + std::to_string(key.size()) +
                                            " bytes; the limit is " + std::to_string(max_key_bytes));
  }
  return {};
}

/// How many slots the key space is cut into. An owner may be handed the
/// writes of whole slots (see docs/concepts.md, "Owner-committed puts").
/// Masters and owners must agree on it and on slot_of(): do not change.
inline constexpr std::uint32_t key_slots = 1024;
using key_slot = std::uint16_t;

/// The slot of `key`: a hash of its bytes (XXH3, seed 0) modulo key_slots.
key_slot slot_of(std::string_view key) noexcept;

}  // namespace sluice
