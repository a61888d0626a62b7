// Who may use the gateway, when it has users: each a name, an access key
// with its secret, and grants per bucket. The gateway checks a request's
// signature against the secret of the key it names, then the signer's
// grant on every bucket the request touches (a copy's source too).
// Where users are kept (sqlite, for the launcher) is behind
// user_directory.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/s3/request.hpp"
#include "actors/s3/s3_error.hpp"
#include "actors/s3/sigv4.hpp"

namespace sluice::s3 {

/// What a grant allows on a bucket; write includes read.
enum class bucket_access : std::uint8_t { none = 0, read = 1, write = 2 };

/// "none", "read", "write".
std::string_view to_string(bucket_access a);
std::optional<bucket_access> parse_bucket_access(std::string_view text);

/// The bucket name a grant for every bucket uses.
inline constexpr std::string_view any_bucket = "*";

struct s3_user {
  std::string name{};
  credentials keys{};
  /// (bucket or "*", access): a bucket's own grant wins over "*".
  std::vector<std::pair<std::string, bucket_access>> grants{};

  bucket_access access_to(std::string_view bucket) const;
};

class user_directory {
 public:
  virtual ~user_directory() = default;
  /// The user whose access key this is, if any. Thread-safe.
  virtual std::optional<s3_user> find(std::string_view access_key) = 0;
};

/// Whether `user` may make request `r`: nullopt when it may, else the
/// AccessDenied to answer. Reads (GET, HEAD) need read on the bucket,
/// anything else write; a copy needs read on its source's bucket too.
/// ListBuckets is open to every user (it lists the buckets they may
/// read); CreateBucket needs write on the new name (or "*").
std::optional<s3_error> check_grants(const parsed_request& r, const s3_user& user);

}  // namespace sluice::s3
