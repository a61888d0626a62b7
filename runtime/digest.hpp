// Content digests and the encodings S3 puts them in: MD5 (ETags,
// Content-MD5), hex and base64. OpenSSL does the hashing; its types stay
// out of this header.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

struct evp_md_ctx_st;

namespace sluice {

struct md5_hasher_free_ctx {
  void operator()(evp_md_ctx_st* ctx) const noexcept;
};

using md5_digest = std::array<std::uint8_t, 16>;

/// An incremental MD5. A resource: not copyable. Not thread-safe.
class md5_hasher {
 public:
  md5_hasher();
  ~md5_hasher();
  md5_hasher(const md5_hasher&) = delete;
  md5_hasher& operator=(const md5_hasher&) = delete;

  void update(std::span<const std::byte> bytes);
  void update(std::string_view bytes);
  /// The digest of everything given so far. REQUIRES: called once.
  md5_digest finish();

 private:
  std::unique_ptr<evp_md_ctx_st, md5_hasher_free_ctx> ctx_;
};

md5_digest md5_of(std::string_view bytes);

using sha256_digest = std::array<std::uint8_t, 32>;

/// An incremental SHA-256 (SigV4 payload hashes). Not copyable, not thread-safe.
class sha256_hasher {
 public:
  sha256_hasher();
  ~sha256_hasher();
  sha256_hasher(const sha256_hasher&) = delete;
  sha256_hasher& operator=(const sha256_hasher&) = delete;

  void update(std::span<const std::byte> bytes);
  /// REQUIRES: called once.
  sha256_digest finish();

 private:
  std::unique_ptr<evp_md_ctx_st, md5_hasher_free_ctx> ctx_;
};

sha256_digest sha256_of(std::string_view bytes);
/// HMAC-SHA256 of `message` under `key` (SigV4 signing).
sha256_digest hmac_sha256(std::string_view key, std::string_view message);
/// Compares in time that depends on the length only (signatures).
bool equal_in_constant_time(std::string_view a, std::string_view b);

/// Lower-case hex of `bytes`.
std::string to_hex(std::span<const std::uint8_t> bytes);
/// Standard base64 (RFC 4648, with padding).
std::string base64_encode(std::string_view bytes);
/// Standard base64 with padding; nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace sluice
