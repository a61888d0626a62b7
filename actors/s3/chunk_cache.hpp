// The gateway's chunk cache: objects cut into fixed-size chunks kept as
// KV values, so hot reads come from the pool, not the disk.
//
// A chunk's key names the object's file identity (size, mtime, inode):
// a file changed behind the gateway's back has a new identity, so its
// old chunks are never read again (the KV evicts them as it evicts any
// value), and no stale byte is served. A change that keeps all three is
// not seen.
//
// cached_read_path wraps another read_path: open() opens the file as
// before (its identity and record come from there, every time), and
// reads go chunk by chunk — a hit serves the pool's bytes in place, a
// miss reads the chunk from the file, keeps it and serves it. The cache
// failing (its owner gone, the pool full) is a miss, never an error:
// the file is the truth.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/s3/read_path.hpp"
#include "sluice/value.hpp"

namespace sluice::s3 {

/// Where chunks are kept: the KV through a client, or a map in tests.
/// Thread-safe.
class chunk_store {
 public:
  virtual ~chunk_store() = default;
  /// The chunk, when held; nullopt on a miss or any failure.
  virtual std::optional<value> get(const std::string& key) = 0;
  /// Keeps `bytes` under `key`. Best effort: false when it was not kept.
  virtual bool put(const std::string& key, std::span<const std::byte> bytes) = 0;

  // What write-back needs beyond a cache: chunks that must not go.
  /// Keeps `bytes` under `key` in `copies` copies on distinct owners, kept
  /// from eviction until drop(): an error when that could not be done.
  virtual result<void> keep(const std::string& key, std::span<const std::byte> bytes, std::uint32_t copies) {
    (void)key, (void)bytes, (void)copies;
    return fail(errc::unavailable, "this chunk store cannot keep chunks");
  }
  /// The chunk kept under `key`, or the error that kept it from coming
  /// (not_found: no copy of it is left).
  virtual result<value> fetch(const std::string& key) {
    (void)key;
    return fail(errc::unavailable, "this chunk store cannot keep chunks");
  }
  /// Lets a kept chunk go. False when there was none.
  virtual result<bool> drop(const std::string& key) {
    (void)key;
    return fail(errc::unavailable, "this chunk store cannot keep chunks");
  }
  /// The keys of chunks starting with `prefix`, at most `limit`.
  virtual result<std::vector<std::string>> keys(const std::string& prefix, std::size_t limit) {
    (void)prefix, (void)limit;
    return fail(errc::unavailable, "this chunk store cannot list chunks");
  }
};

/// Counters, read at any time.
struct chunk_cache_stats {
  std::atomic<std::uint64_t> hits{0};        ///< chunks served from the store
  std::atomic<std::uint64_t> misses{0};      ///< chunks read from files
  std::atomic<std::uint64_t> hit_bytes{0};   ///< of the chunks served from the store
  std::atomic<std::uint64_t> miss_bytes{0};  ///< of the chunks read from files
  std::atomic<std::uint64_t> not_kept{0};    ///< chunks read from files the store did not keep
};

/// Chunks of 64 KiB to 64 MiB; 4 MiB by default.
inline constexpr std::uint64_t chunk_bytes_min = 64 << 10;
inline constexpr std::uint64_t chunk_bytes_max = 64 << 20;
inline constexpr std::uint64_t chunk_bytes_default = 4 << 20;

/// Every chunk key starts with this.
inline constexpr std::string_view chunk_key_prefix = "~s3/";

/// The key of chunk `index` of the version of bucket/key that `identity`
/// names: "~s3/BUCKET/HASH/INDEX", HASH covering the key, the identity
/// and the chunk size.
std::string chunk_key(std::string_view bucket, std::string_view key, const file_identity& identity,
                      std::uint64_t chunk_bytes, std::uint64_t index);

class cached_read_path final : public read_path {
 public:
  /// `inner` and `chunks` must outlive this and every reader it opens.
  /// REQUIRES: chunk_bytes_min <= chunk_bytes <= chunk_bytes_max.
  cached_read_path(read_path& inner, chunk_store& chunks, std::uint64_t chunk_bytes);
  result<opened_object> open(std::string_view bucket, std::string_view key) override;

  std::uint64_t chunk_bytes() const noexcept { return chunk_bytes_; }
  const chunk_cache_stats& stats() const noexcept { return stats_; }

 private:
  read_path& inner_;
  chunk_store& chunks_;
  std::uint64_t chunk_bytes_;
  chunk_cache_stats stats_;
};

}  // namespace sluice::s3
