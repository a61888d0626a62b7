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
  struct free_ctx {
    void operator()(evp_md_ctx_st* ctx) const noexcept;
  };
  std::unique_ptr<evp_md_ctx_st, free_ctx> ctx_;
};

md5_digest md5_of(std::string_view bytes);

/// Lower-case hex of `bytes`.
std::string to_hex(std::span<const std::uint8_t> bytes);
/// Standard base64 (RFC 4648, with padding).
std::string base64_encode(std::string_view bytes);
/// Standard base64 with padding; nullopt for anything else.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace sluice
