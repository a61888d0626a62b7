#include "runtime/digest.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "runtime/assert.hpp"

namespace sluice {

void md5_hasher_free_ctx::operator()(evp_md_ctx_st* ctx) const noexcept { EVP_MD_CTX_free(ctx); }

md5_hasher::md5_hasher() : ctx_(EVP_MD_CTX_new()) {
  SLUICE_ASSERT(ctx_ != nullptr);
  // MD5 is what S3 ETags are defined by; it is not used for security here.
  SLUICE_ASSERT(EVP_DigestInit_ex(ctx_.get(), EVP_md5(), nullptr) == 1);
}

md5_hasher::~md5_hasher() = default;

void md5_hasher::update(std::span<const std::byte> bytes) {
  SLUICE_ASSERT(EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) == 1);
}

void md5_hasher::update(std::string_view bytes) {
  SLUICE_ASSERT(EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) == 1);
}

md5_digest md5_hasher::finish() {
  md5_digest out{};
  unsigned int length = 0;
  SLUICE_ASSERT(EVP_DigestFinal_ex(ctx_.get(), out.data(), &length) == 1);
  SLUICE_ASSERT(length == out.size());
  return out;
}

md5_digest md5_of(std::string_view bytes) {
  md5_hasher h;
  h.update(bytes);
  return h.finish();
}

sha256_hasher::sha256_hasher() : ctx_(EVP_MD_CTX_new()) {
  SLUICE_ASSERT(ctx_ != nullptr);
  SLUICE_ASSERT(EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr) == 1);
}

sha256_hasher::~sha256_hasher() = default;

void sha256_hasher::update(std::span<const std::byte> bytes) {
  SLUICE_ASSERT(EVP_DigestUpdate(ctx_.get(), bytes.data(), bytes.size()) == 1);
}

sha256_digest sha256_hasher::finish() {
  sha256_digest out{};
  unsigned int length = 0;
  SLUICE_ASSERT(EVP_DigestFinal_ex(ctx_.get(), out.data(), &length) == 1);
  SLUICE_ASSERT(length == out.size());
  return out;
}

sha256_digest sha256_of(std::string_view bytes) {
  sha256_hasher h;
  h.update(std::span<const std::byte>{reinterpret_cast<const std::byte*>(bytes.data()), bytes.size()});
  return h.finish();
}

sha256_digest hmac_sha256(std::string_view key, std::string_view message) {
  sha256_digest out{};
  unsigned int length = 0;
  auto* done = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                    reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(), &length);
  SLUICE_ASSERT(done != nullptr);
  SLUICE_ASSERT(length == out.size());
  return out;
}

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string to_hex(std::span<const std::uint8_t> bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (auto b : bytes) {
    out += digits[b >> 4];
    out += digits[b & 0xf];
  }
  return out;
}

namespace {
constexpr char base64_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    std::uint32_t n = static_cast<std::uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<std::uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<std::uint8_t>(bytes[i + 2]);
    out += base64_alphabet[(n >> 18) & 63];
    out += base64_alphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? base64_alphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? base64_alphabet[n & 63] : '=';
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int j = 0; j < 4; ++j) {
      char c = text[i + j];
      bool last_group = i + 4 == text.size();
      if (c == '=' && last_group && j >= 2) {
        v[j] = 0;
        ++pad;
        continue;
      }
      if (pad > 0) return std::nullopt;  // data after padding
      v[j] = base64_value(c);
      if (v[j] < 0) return std::nullopt;
    }
    std::uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

}  // namespace sluice
