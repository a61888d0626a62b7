// Which bucket names and object keys the gateway accepts. Keys become
// paths under a bucket's directory, so anything that could leave it, or
// that a directory cannot hold, is refused before the store sees it.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

#include "actors/s3/s3_error.hpp"

namespace sluice::s3 {

/// S3's rules: 3-63 characters of a-z, 0-9, '.', '-', starting and ending
/// with a letter or digit, no "..", not shaped like an IP address.
bool valid_bucket_name(std::string_view name);

/// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates).
bool valid_utf8(std::string_view text);

/// nullopt when `key` may name an object: 1..key_bytes_max bytes of UTF-8,
/// no NUL, not absolute, no empty, "." or ".." segment (so no trailing
/// '/'), no segment over 255 bytes or starting with the store's hidden
/// prefix.
std::optional<s3_error> check_key(std::string_view key, std::size_t key_bytes_max);

}  // namespace sluice::s3
