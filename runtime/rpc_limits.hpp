// RPC rules shared by the client library and the owner: what a valid
// served name is (checked where requests enter a node: the client library
// before sending, the owner on arrival), and from what size arguments and
// results travel through the owner's pool rather than through the rings.
#pragma once

#include <string>
#include <string_view>

#include "sluice/result.hpp"

namespace sluice {

/// Arguments or results of at least this many encoded bytes are written
/// once into the owner's pool and read in place there (docs/rpc.md,
/// "Large arguments"); smaller ones ride in the shm rings, where two small
/// copies cost less than the round trip that reserves pool memory.
inline constexpr std::size_t rpc_pool_bytes_min = 64 * 1024;

/// Longest served name, in bytes. Names are identifiers people type (in
/// `sluice rpc call NAME`), not data: 255 is plenty and keeps registry
/// entries small.
inline constexpr std::size_t rpc_name_bytes_max = 255;

/// Letters, digits and `_ . - / : @`: a name never needs quoting in a
/// shell and prints unambiguously in listings.
inline bool rpc_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-' || c == '/' || c == ':' || c == '@';
}

inline result<void> check_rpc_name(std::string_view name) {
  if (name.empty()) return fail(errc::invalid_argument, "the rpc name is empty");
  if (name.size() > rpc_name_bytes_max) {
    return fail(errc::invalid_argument, "the rpc name is " + std::to_string(name.size()) +
                                            " bytes; the limit is " + std::to_string(rpc_name_bytes_max));
  }
  for (char c : name) {
    if (!rpc_name_char(c)) {
      return fail(errc::invalid_argument, "the rpc name '" + std::string{name} +
                                              "' has a character other than letters, digits and _ . - / : @");
    }
  }
  return {};
}

}  // namespace sluice
