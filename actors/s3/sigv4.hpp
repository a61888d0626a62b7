// AWS Signature Version 4 for S3: checking the Authorization header and
// presigned URLs against one access key and its secret, or the secret of
// whichever key the request names. Pure: the time is passed in.
//
// What is checked: the algorithm (AWS4-HMAC-SHA256), the access key, the
// credential scope (date, this gateway's region, "s3", "aws4_request"),
// that Host is signed, the request time (15 minutes either way; a
// presigned URL's X-Amz-Expires, at most 7 days), and the signature over
// the canonical request. The payload hash the client declared
// (x-amz-content-sha256) is signed too; whether the body matches it is
// checked as the body streams (see verified.payload_sha256), and an
// aws-chunked body's chunk signatures chain from this one (verified.chunks).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "actors/s3/aws_chunked.hpp"
#include "actors/s3/request.hpp"
#include "actors/s3/s3_error.hpp"

namespace sluice::s3 {

struct credentials {
  std::string access_key{};
  std::string secret_key{};
};

struct verified {
  /// The body's SHA-256 (hex) the signature covers; nullopt when the
  /// client signed UNSIGNED-PAYLOAD (or a presigned URL), or streams.
  std::optional<std::string> payload_sha256{};
  /// For an aws-chunked body (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): what
  /// its chunk signatures chain from.
  std::optional<chunk_chain> chunks{};
};

/// Checks `r`'s signature. `now_s`: seconds since the epoch.
std::variant<verified, s3_error> verify_sigv4(const parsed_request& r, const credentials& c, std::string_view region,
                                              std::int64_t now_s);

/// The secret of an access key; nullopt for a key nobody holds.
using secret_lookup = std::function<std::optional<std::string>(std::string_view access_key)>;

/// Checks `r`'s signature against the secret of the access key it names.
std::variant<verified, s3_error> verify_sigv4(const parsed_request& r, const secret_lookup& secret_of,
                                              std::string_view region, std::int64_t now_s);

/// The canonical request (SigV4 task 1) of `r` over `signed_headers`
/// (lower case, sorted). Query parameters named in `excluded` are left out.
std::string canonical_request(const parsed_request& r, const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, std::string_view excluded);

/// The SigV4 signing key (raw bytes) derived from `secret` for `date`
/// (YYYYMMDD) and `region`, service s3.
std::string sigv4_signing_key(std::string_view secret, std::string_view date, std::string_view region);

/// The hex signature of `string_to_sign` under the key derived from
/// `secret` for `date` (YYYYMMDD) and `region`.
std::string sigv4_signature(std::string_view secret, std::string_view date, std::string_view region,
                            std::string_view string_to_sign);

}  // namespace sluice::s3
