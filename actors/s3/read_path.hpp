// Where the gateway's reads come from. GET, HEAD, the source of a copy
// and the ETags of listings all go through read_path::open, so a cache
// (the KV chunk cache, next) slots in between the protocol and the store
// by implementing this interface around another read_path: it keys
// chunks by the file identity that open() reports, and a changed
// identity is a changed object.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "actors/s3/http_types.hpp"
#include "runtime/storage/bucket_store.hpp"

namespace sluice::s3 {

/// One version of an object, opened: its identity, its record with the
/// ETag always present, and a reader of exactly that version's bytes.
struct opened_object {
  file_identity identity{};
  object_meta meta{};
  std::unique_ptr<object_reader> reader{};
};

class read_path {
 public:
  virtual ~read_path() = default;
  /// not_found when there is no such object. Thread-safe.
  virtual result<opened_object> open(std::string_view bucket, std::string_view key) = 0;
};

/// Reads straight from the store. A file changed behind the store's back
/// has no record for its identity: its MD5 is computed once, here, and
/// written beside it for the next reader.
class store_read_path final : public read_path {
 public:
  /// `store` must outlive this.
  explicit store_read_path(bucket_store& store) : store_(store) {}
  result<opened_object> open(std::string_view bucket, std::string_view key) override;

 private:
  bucket_store& store_;
};

/// The MD5 (hex) of every byte `reader` holds, read in `chunk_bytes` pieces.
result<std::string> md5_of_reader(object_reader& reader, std::size_t chunk_bytes);

/// Streams `length` bytes of `reader` from `first`. A file that turns out
/// shorter fails the read (the shell then cuts the connection).
std::unique_ptr<body_source> make_range_source(std::unique_ptr<object_reader> reader, std::uint64_t first,
                                               std::uint64_t length);

}  // namespace sluice::s3
