#include "actors/s3/names.hpp"

#include <string>

#include "runtime/storage/bucket_store.hpp"

namespace sluice::s3 {
namespace {
/// The longest file name Linux filesystems hold (NAME_MAX).
constexpr std::size_t segment_bytes_max = 255;

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool looks_like_ipv4(std::string_view name) {
  int dots = 0;
  for (char c : name) {
    if (c == '.') {
      ++dots;
    } else if (c < '0' || c > '9') {
      return false;
    }
  }
  return dots == 3;
}
}  // namespace

bool valid_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 63) return false;
  if (!is_lower_alnum(name.front()) || !is_lower_alnum(name.back())) return false;
  for (char c : name) {
    if (!is_lower_alnum(c) && c != '.' && c != '-') return false;
  }
  return name.find("..") == std::string_view::npos && !looks_like_ipv4(name);
}

bool valid_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : 9;
    if (extra == 9 || i + extra >= text.size()) return false;
    std::uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1f) : extra == 2 ? (c & 0x0f) : (c & 0x07);
    for (std::size_t j = 1; j <= extra; ++j) {
      auto d = static_cast<unsigned char>(text[i + j]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static constexpr std::uint32_t min_of[] = {0, 0x80, 0x800, 0x10000};
    if (cp < min_of[extra] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

std::optional<s3_error> check_key(std::string_view key, std::size_t key_bytes_max) {
  if (key.size() > key_bytes_max) {
    return s3_error{s3_code::key_too_long, "Your key is too long: at most " + std::to_string(key_bytes_max) + " bytes."};
  }
  if (key.empty()) return s3_error{s3_code::invalid_argument, "An object key cannot be empty."};
  if (!valid_utf8(key)) return s3_error{s3_code::invalid_argument, "Object keys must be valid UTF-8."};
  if (key.find('\0') != std::string_view::npos) {
    return s3_error{s3_code::invalid_argument, "Object keys cannot contain a NUL byte."};
  }
  std::string_view rest = key;
  for (;;) {
    auto slash = rest.find('/');
    auto segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") {
      return s3_error{s3_code::invalid_argument,
                      "This gateway stores keys as paths: a key cannot start with '/', hold '//', "
                      "or have a '.' or '..' segment."};
    }
    if (segment.size() > segment_bytes_max) {
      return s3_error{s3_code::key_too_long, "Each '/'-separated part of a key is at most 255 bytes."};
    }
    if (segment.starts_with(hidden_prefix)) {
      return s3_error{s3_code::invalid_argument, "Key segments starting with '.sluice-' are reserved."};
    }
    if (slash == std::string_view::npos) return std::nullopt;
    if (slash + 1 == rest.size()) return std::nullopt;  // "dir/": a directory marker
    rest.remove_prefix(slash + 1);
  }
}

}  // namespace sluice::s3
