#include "actors/s3/read_path.hpp"

#include <algorithm>
#include <vector>

#include "runtime/assert.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

/// Reads for hashing go in pieces of this size: large enough to be cheap
/// per byte, small enough that a whole object is never in memory.
constexpr std::size_t hash_chunk_bytes = 1 << 20;

class range_source final : public body_source {
 public:
  range_source(std::unique_ptr<object_reader> reader, std::uint64_t first, std::uint64_t length)
      : reader_(std::move(reader)), next_(first), left_(length) {}

  result<std::size_t> read(std::span<std::byte> into) override {
    if (left_ == 0) return std::size_t{0};
    auto want = static_cast<std::size_t>(std::min<std::uint64_t>(into.size(), left_));
    auto n = reader_->read(next_, into.first(want));
    if (!n) return n;
    if (*n == 0) return fail(errc::aborted, "the object's file became shorter while it was being sent");
    SLUICE_ASSERT(*n <= want);
    next_ += *n;
    left_ -= *n;
    return n;
  }

  result<std::span<const std::byte>> view(std::size_t max) override {
    if (left_ == 0) return std::span<const std::byte>{};
    auto bytes = reader_->view(next_, static_cast<std::size_t>(std::min<std::uint64_t>(max, left_)));
    if (!bytes) return bytes;
    SLUICE_ASSERT(bytes->size() <= left_);
    next_ += bytes->size();
    left_ -= bytes->size();
    return bytes;
  }

 private:
  std::unique_ptr<object_reader> reader_;
  std::uint64_t next_;
  std::uint64_t left_;
};

}  // namespace

result<std::string> md5_of_reader(object_reader& reader, std::size_t chunk_bytes) {
  md5_hasher hasher;
  std::vector<std::byte> buffer(chunk_bytes);
  std::uint64_t offset = 0;
  for (;;) {
    auto n = reader.read(offset, buffer);
    if (!n) return std::move(n).error();
    if (*n == 0) break;
    hasher.update(std::span<const std::byte>{buffer.data(), *n});
    offset += *n;
  }
  auto digest = hasher.finish();
  return to_hex(digest);
}

result<opened_object> store_read_path::open(std::string_view bucket, std::string_view key) {
  auto reader = store_.open(bucket, key);
  if (!reader) return std::move(reader).error();
  opened_object out{.identity = (*reader)->stat().identity};
  if ((*reader)->stat().meta) {
    out.meta = *(*reader)->stat().meta;
  } else {
    // Changed behind our back (or never ours): the stored headers described
    // other bytes, so only the new ETag is kept.
    auto etag = md5_of_reader(**reader, hash_chunk_bytes);
    if (!etag) return std::move(etag).error();
    out.meta.etag = std::move(*etag);
    // Best effort: a record that cannot be written is computed again next time.
    (void)store_.write_meta(bucket, key, out.identity, out.meta);
  }
  out.reader = std::move(*reader);
  return out;
}

std::unique_ptr<body_source> make_range_source(std::unique_ptr<object_reader> reader, std::uint64_t first,
                                               std::uint64_t length) {
  return std::make_unique<range_source>(std::move(reader), first, length);
}

}  // namespace sluice::s3
