// aws-chunked request bodies: SigV4 streaming uploads, where the body is
// cut into chunks and each chunk carries its own signature, chained from
// the request's (the "seed") signature. Sent with
//   x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD
//   Content-Encoding: aws-chunked
//   x-amz-decoded-content-length: <payload bytes>
//
// The body, as a grammar (CRLF is "\r\n"):
//   body       = *chunk last-chunk [CRLF]
//   chunk      = size ";chunk-signature=" signature CRLF size-bytes CRLF
//   last-chunk = "0" ";chunk-signature=" signature CRLF
//   size       = 1*16 HEXDIG                    ; the data bytes, not the framing
//   signature  = 64 lowercase HEXDIG
// and chunk n's signature is the SigV4 HMAC, under the request's signing
// key, of
//   "AWS4-HMAC-SHA256-PAYLOAD" LF amz-date LF scope LF
//   signature(n-1) LF hex(sha256("")) LF hex(sha256(data n))
// with signature(0) the seed. The chain fixes the chunks' order and
// content: a chunk changed, dropped, repeated or moved fails its check.
//
// Trust: everything here is untrusted input. Every chunk header is
// bounded (header_bytes_max), no chunk may carry more than the declared
// payload length leaves, and every signature is checked (in constant
// time) before the decoder accepts the bytes after it. Payload bytes are
// handed on as they arrive, before their chunk's signature can be
// checked: whoever takes them must not commit anything until finish()
// says the whole body was good.
//
// Plain code, no I/O. Not thread-safe: one request's body, fed in order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "actors/s3/s3_error.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {

/// The x-amz-content-sha256 value of a signed aws-chunked body. Never change: S3's.
inline constexpr std::string_view streaming_signed_payload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";

/// What chaining the chunk signatures takes from the request's signature.
struct chunk_chain {
  std::string signing_key{};     ///< the SigV4 signing key (raw bytes) of the request's date and region
  std::string amz_date{};        ///< "20130524T000000Z"
  std::string scope{};           ///< "20130524/us-east-1/s3/aws4_request"
  std::string seed_signature{};  ///< the request's signature (hex)
};

/// Chunk n's signature (hex), given signature n-1 and the chunk's data digest.
std::string chunk_signature(const chunk_chain& chain, std::string_view previous_signature,
                            const sha256_digest& data_sha256);

struct aws_chunked_limits {
  /// One chunk header line: a 16-digit size and the signature take 99
  /// bytes; room for extensions a client adds, not for a hostile line.
  std::size_t header_bytes_max = 4096;
};

class aws_chunked_decoder {
 public:
  /// `chain`: check every chunk's signature against it; nullopt (an
  /// anonymous gateway, which has no secret) checks the framing only.
  /// `payload_bytes`: x-amz-decoded-content-length.
  aws_chunked_decoder(std::optional<chunk_chain> chain, std::uint64_t payload_bytes, aws_chunked_limits limits = {});

  /// What one step took from the input: `consumed` bytes of it, of which
  /// `payload` (a subspan of the input) is chunk data to hand on.
  struct step {
    std::size_t consumed{};
    std::span<const std::byte> payload{};
    std::optional<s3_error> error{};  ///< the body is bad: stop, drop what was handed on
  };

  /// Decodes from the front of `input`. Call again with the rest until
  /// all of it is consumed; each step consumes at least one byte of a
  /// non-empty input, or fails.
  step next(std::span<const std::byte> input);

  /// After the body's last byte: nullopt when it ended right after the
  /// last chunk and carried exactly payload_bytes, every signature good.
  std::optional<s3_error> finish() const;

  std::uint64_t payload_seen() const { return payload_seen_; }

 private:
  enum class state { header, data, data_end, last_end, done };
  std::optional<s3_error> parse_header();
  std::optional<s3_error> check_chunk();

  std::optional<chunk_chain> chain_;
  std::uint64_t payload_bytes_;
  aws_chunked_limits limits_;
  state state_ = state::header;
  std::string header_{};
  std::string claimed_signature_{};
  std::string previous_signature_{};
  std::uint64_t data_left_ = 0;
  std::uint64_t payload_seen_ = 0;
  std::size_t crlf_seen_ = 0;
  std::optional<sha256_hasher> hasher_{};
};

}  // namespace sluice::s3
