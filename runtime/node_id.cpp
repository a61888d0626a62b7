#include "runtime/node_id.hpp"

#include <charconv>

namespace sluice {

std::string node_id::to_string() const {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  std::uint64_t v = value;
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = digits[v & 0xf];
    v >>= 4;
  }
  return out;
}

std::optional<node_id> node_id::parse(std::string_view text) {
  if (text.empty() || text.size() > 16) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 16);
  if (ec != std::errc{} || end != text.data() + text.size() || v == 0) return std::nullopt;
  return node_id{v};
}

std::string_view to_string(role r) noexcept {
  switch (r) {
    case role::unknown: return "unknown";
    case role::master: return "master";
    case role::owner: return "owner";
    case role::client: return "client";
  }
  return "unknown";
}

}  // namespace sluice
