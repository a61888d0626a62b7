// Keys: what a valid key is, checked where requests enter a node.
#pragma once

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

}  // namespace sluice
