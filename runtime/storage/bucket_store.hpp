// bucket_store: named directories of objects, each object a file with a
// small metadata record beside it. The S3 gateway depends on this
// interface only; the real implementation (posix_bucket_store) keeps
// every object as a file in a backing directory, which stays the source
// of truth: other programs may read and write those files too.
//
// Keys are relative paths: '/' separates directories. REQUIRES (checked,
// invalid_argument otherwise): no empty, "." or ".." segment, no NUL, no
// leading '/'. A key ending in '/' is a directory marker: an empty object
// that is the directory itself (how S3 clients make an empty directory). Segments starting with `hidden_prefix` are the store's own
// (temp files, staged uploads): ordinary listings never show them.
//
// Thread safety: every method may be called from any thread; readers and
// writers are used by one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/result.hpp"

namespace sluice {

/// Names the store keeps for itself start with this. Never change: files
/// already on disk carry it.
inline constexpr std::string_view hidden_prefix = ".sluice-";

/// Whether some '/'-separated segment of `key` is one of the store's own.
inline bool has_hidden_segment(std::string_view key) {
  for (std::size_t at = 0; at <= key.size();) {
    auto end = key.find('/', at);
    if (end == std::string_view::npos) end = key.size();
    if (key.substr(at, end - at).starts_with(hidden_prefix)) return true;
    at = end + 1;
  }
  return false;
}

/// What identifies one version of a file's content: a change to any of
/// them means the content may have changed.
struct file_identity {
  std::uint64_t size{};
  std::int64_t mtime_ns{};
  std::uint64_t inode{};
  friend bool operator==(const file_identity&, const file_identity&) = default;
};

/// The record kept beside an object. Header names are lower case.
struct object_meta {
  std::string etag{};  ///< hex MD5, or "hex-N" for a multipart object; no quotes
  std::vector<std::pair<std::string, std::string>> headers{};
  friend bool operator==(const object_meta&, const object_meta&) = default;
};

/// An object as found: `meta` is present only when the record beside the
/// file was written for this very identity (a file changed behind the
/// store's back has none until someone writes a new record).
struct object_stat {
  file_identity identity{};
  std::optional<object_meta> meta{};
  /// The object is not in its file yet (a write-back store keeps it in
  /// memory until it is flushed): its reader's bytes lie in memory.
  bool unflushed = false;
};

struct listed_object {
  std::string key{};
  object_stat stat{};
};

struct bucket_info {
  std::string name{};
  std::int64_t created_ns{};
};

/// One open version of an object: it keeps reading the bytes it opened
/// even when a writer replaces the object meanwhile.
class object_reader {
 public:
  virtual ~object_reader() = default;
  virtual const object_stat& stat() const = 0;
  /// Reads up to into.size() bytes at `offset`; fewer only at the end.
  virtual result<std::size_t> read(std::uint64_t offset, std::span<std::byte> into) = 0;
  /// Up to `max` bytes at `offset` where they lie already (a cache's
  /// memory), valid until the next call on this reader: sent from there,
  /// not copied. Empty: this reader has no such bytes; use read().
  virtual result<std::span<const std::byte>> view(std::uint64_t offset, std::size_t max) {
    (void)offset;
    (void)max;
    return std::span<const std::byte>{};
  }
};

/// A new version being written. Nothing is visible until commit(), which
/// makes the bytes and `meta` durable and visible at once: a reader sees
/// the old object or the new one, never part of one. Dropping a writer
/// without commit leaves nothing behind.
class object_writer {
 public:
  virtual ~object_writer() = default;
  virtual result<void> write(std::span<const std::byte> bytes) = 0;
  /// The new version's modification time, instead of the time of its
  /// commit (a write-back store flushing an object acknowledged earlier).
  /// Before commit(); a store without modification times ignores it.
  virtual result<void> set_mtime(std::int64_t mtime_ns) {
    (void)mtime_ns;
    return {};
  }
  virtual result<file_identity> commit(const object_meta& meta) = 0;
};

class bucket_store {
 public:
  virtual ~bucket_store() = default;

  /// Every bucket, by name.
  virtual result<std::vector<bucket_info>> buckets() = 0;
  virtual result<std::optional<bucket_info>> find_bucket(std::string_view bucket) = 0;
  /// conflict: it exists. permission_denied: this store cannot create buckets.
  virtual result<void> create_bucket(std::string_view bucket) = 0;
  /// not_found; conflict: not empty; permission_denied: not removable.
  virtual result<void> remove_bucket(std::string_view bucket) = 0;

  /// nullopt: no such object (or the bucket is gone).
  virtual result<std::optional<object_stat>> stat(std::string_view bucket, std::string_view key) = 0;
  /// not_found when there is no such object.
  virtual result<std::unique_ptr<object_reader>> open(std::string_view bucket, std::string_view key) = 0;
  virtual result<std::unique_ptr<object_writer>> create(std::string_view bucket, std::string_view key) = 0;
  /// False when there was nothing to remove.
  virtual result<bool> remove(std::string_view bucket, std::string_view key) = 0;
  /// Replaces the record beside `key`, only while the file still has
  /// identity `of` (conflict otherwise).
  virtual result<void> write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                                  const object_meta& meta) = 0;
  /// Up to `limit` objects whose keys start with `prefix` and sort after
  /// `start_after` (bytewise), in key order. Hidden names are left out
  /// unless `prefix` itself starts with one.
  virtual result<std::vector<listed_object>> list(std::string_view bucket, std::string_view prefix,
                                                  std::string_view start_after, std::size_t limit) = 0;
};

}  // namespace sluice
