// node_id: the identity of one node (a master, owner or client actor
// system) in a cluster. Our own type, never CAF's node_id, which embeds a
// process id and changes between runs.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sluice {

struct node_id {
  /// 0 means "no node" (an unset target, an unknown peer).
  std::uint64_t value = 0;

  constexpr bool valid() const noexcept { return value != 0; }
  friend constexpr auto operator<=>(node_id, node_id) = default;

  /// 16 lowercase hex digits, e.g. "00000000000000a1".
  std::string to_string() const;
  /// Parses what to_string() writes (1 to 16 hex digits). Not 0.
  static std::optional<node_id> parse(std::string_view text);
};

/// The role a node plays. Pinned values: they travel in the hello frame.
enum class role : std::uint8_t {
  unknown = 0,
  master = 1,
  owner = 2,
  client = 3,
};

std::string_view to_string(role r) noexcept;

}  // namespace sluice
