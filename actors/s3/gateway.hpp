// The S3 gateway's protocol core: a request in, a response (or a sink for
// the request's body) out. Plain deterministic code: no sockets, no
// threads, no clock of its own — time comes in through the options, the
// upload ids from a seeded rng, the bytes from a bucket_store and a
// read_path. The HTTP shell (api/src/s3_server.cpp) drives it; tests
// drive it directly.
//
// Thread safety: start() and the sinks it returns may be used from
// several threads at once (one sink by one thread); the upload table is
// the only shared state and has its own lock.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/s3/http_types.hpp"
#include "actors/s3/read_path.hpp"
#include "actors/s3/s3_error.hpp"
#include "actors/s3/sigv4.hpp"
#include "actors/s3/users.hpp"
#include "runtime/storage/bucket_store.hpp"

namespace sluice::s3 {

/// Every bound the protocol keeps, with its reason.
struct gateway_limits {
  std::uint64_t object_bytes_max = 5ull << 30;  ///< S3's limit for one PUT
  std::uint64_t part_bytes_max = 5ull << 30;    ///< S3's limit for one part
  std::uint64_t part_bytes_min = 5ull << 20;    ///< S3's, for every part but the last
  std::uint32_t part_number_max = 10'000;       ///< S3's
  std::size_t uploads_max = 1000;               ///< multipart uploads in progress, all buckets
  std::size_t xml_body_bytes_max = 2ull << 20;  ///< Delete (1000 keys) and Complete (10,000 parts) fit
  std::size_t user_meta_bytes_max = 2048;       ///< x-amz-meta-* names and values, S3's limit
  std::size_t keys_per_list_max = 1000;         ///< S3's max-keys ceiling
  std::size_t keys_per_delete_max = 1000;       ///< S3's, for DeleteObjects
  std::size_t key_bytes_max = 1024;             ///< S3's
  std::size_t copy_chunk_bytes = 1 << 20;       ///< copies and assembly move this much at a time
};

struct gateway_options {
  gateway_limits limits{};
  /// The gateway's host name for virtual-host addressing (bucket.DOMAIN);
  /// empty: path style only.
  std::string domain{};
  std::string region{"us-east-1"};
  /// Requests must be signed (SigV4) with this key; nullopt (and no
  /// `users`): anonymous access, nothing is checked.
  std::optional<credentials> auth{};
  /// Requests must be signed by one of these users, and their grants
  /// allow what each request does. Excludes `auth`. Must outlive the
  /// gateway.
  user_directory* users{};
  /// Seeds the upload ids.
  std::uint64_t seed{};
  /// Wall-clock time in ns since the epoch (multipart initiation times).
  /// REQUIRED.
  std::function<std::int64_t()> now_ns{};
};

class gateway {
 public:
  /// `store` and `reads` must outlive the gateway and every sink it returns.
  gateway(bucket_store& store, read_path& reads, gateway_options options);
  ~gateway();
  gateway(const gateway&) = delete;
  gateway& operator=(const gateway&) = delete;

  started start(const request_head& head);

  /// An error the shell found before the core saw the request (a header
  /// section too large, a body past its limit, a timeout), as S3 writes it.
  response shell_error(s3_code code, std::string message, std::string_view resource);

  struct state;

 private:
  std::unique_ptr<state> state_;
};

}  // namespace sluice::s3
