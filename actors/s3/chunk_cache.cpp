#include "actors/s3/chunk_cache.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/assert.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

/// Bytes of the SHA-256 a chunk key keeps: 96 bits, so two versions of
/// objects of one bucket never meet by chance.
constexpr std::size_t key_hash_bytes = 12;

/// One open version of an object, read chunk by chunk. Holds one chunk
/// at a time: the pool's bytes of a hit (a view: its lease ends when the
/// next chunk is loaded or the reader goes), or the bytes of a miss in
/// its own buffer, at most chunk_bytes.
class cached_reader final : public object_reader {
 public:
  cached_reader(std::unique_ptr<object_reader> file, std::string bucket, std::string key,
                std::uint64_t chunk_bytes, chunk_store& chunks, chunk_cache_stats& stats)
      : file_(std::move(file)),
        bucket_(std::move(bucket)),
        key_(std::move(key)),
        chunk_bytes_(chunk_bytes),
        chunks_(chunks),
        stats_(stats) {}

  const object_stat& stat() const override { return file_->stat(); }

  result<std::size_t> read(std::uint64_t offset, std::span<std::byte> into) override {
    auto bytes = view(offset, into.size());
    if (!bytes) return std::move(bytes).error();
    if (!bytes->empty()) std::memcpy(into.data(), bytes->data(), bytes->size());
    return bytes->size();
  }

  result<std::span<const std::byte>> view(std::uint64_t offset, std::size_t max) override {
    auto size = stat().identity.size;
    if (offset >= size || max == 0) return std::span<const std::byte>{};
    auto index = offset / chunk_bytes_;
    if (!loaded_ || index_ != index) {
      if (auto ok = load(index); !ok) return std::move(ok).error();
    }
    auto chunk = current();
    auto at = offset - index * chunk_bytes_;
    SLUICE_ASSERT(at < chunk.size());
    return chunk.subspan(at, std::min<std::uint64_t>(max, chunk.size() - at));
  }

 private:
  std::span<const std::byte> current() const {
    return held_ ? held_->bytes() : std::span<const std::byte>{buffer_.data(), buffer_.size()};
  }

  result<void> load(std::uint64_t index) {
    auto size = stat().identity.size;
    auto first = index * chunk_bytes_;
    SLUICE_ASSERT(first < size);
    auto length = std::min(chunk_bytes_, size - first);
    auto name = chunk_key(bucket_, key_, stat().identity, chunk_bytes_, index);
    loaded_ = false;
    held_.reset();
    if (auto got = chunks_.get(name); got && got->size() == length) {
      held_ = std::move(*got);
      stats_.hits += 1;
      stats_.hit_bytes += length;
    } else {
      buffer_.resize(length);
      for (std::uint64_t done = 0; done < length;) {
        auto n = file_->read(first + done, std::span<std::byte>{buffer_}.subspan(done));
        if (!n) return std::move(n).error();
        if (*n == 0) return fail(errc::aborted, "the object's file became shorter while it was being read");
        done += *n;
      }
      if (!chunks_.put(name, buffer_)) stats_.not_kept += 1;
      stats_.misses += 1;
      stats_.miss_bytes += length;
    }
    index_ = index;
    loaded_ = true;
    SLUICE_ASSERT(current().size() == length);
    return {};
  }

  std::unique_ptr<object_reader> file_;
  std::string bucket_;
  std::string key_;
  std::uint64_t chunk_bytes_;
  chunk_store& chunks_;
  chunk_cache_stats& stats_;
  bool loaded_ = false;
  std::uint64_t index_ = 0;
  std::optional<value> held_;
  std::vector<std::byte> buffer_;
};

}  // namespace

std::string chunk_key(std::string_view bucket, std::string_view key, const file_identity& identity,
                      std::uint64_t chunk_bytes, std::uint64_t index) {
  std::string named;
  named.reserve(bucket.size() + key.size() + 80);
  named.append(bucket).push_back('\0');
  named.append(key).push_back('\0');
  named += std::to_string(identity.size) + ':' + std::to_string(identity.mtime_ns) + ':' +
           std::to_string(identity.inode) + ':' + std::to_string(chunk_bytes);
  auto digest = sha256_of(named);
  std::string out{chunk_key_prefix};
  out.append(bucket).push_back('/');
  out += to_hex(std::span<const std::uint8_t>{digest.data(), key_hash_bytes});
  out += '/' + std::to_string(index);
  return out;
}

cached_read_path::cached_read_path(read_path& inner, chunk_store& chunks, std::uint64_t chunk_bytes)
    : inner_(inner), chunks_(chunks), chunk_bytes_(chunk_bytes) {
  SLUICE_ASSERT(chunk_bytes >= chunk_bytes_min && chunk_bytes <= chunk_bytes_max);
}

result<opened_object> cached_read_path::open(std::string_view bucket, std::string_view key) {
  auto opened = inner_.open(bucket, key);
  if (!opened) return opened;
  // A write-back object not in its file yet is read from its own chunks,
  // already in the pool: keeping them again would hold them twice.
  if (opened->reader->stat().unflushed) return opened;
  opened->reader = std::make_unique<cached_reader>(std::move(opened->reader), std::string{bucket}, std::string{key},
                                                   chunk_bytes_, chunks_, stats_);
  return opened;
}

}  // namespace sluice::s3
