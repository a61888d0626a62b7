// posix_bucket_store: the bucket_store over real directories. Every
// object is a file at <bucket dir>/<key>; keys with '/' are files in
// subdirectories. The record beside it is the xattr `user.sluice.meta`
// (meta_record.hpp), set on the temp file before the rename, so bytes and
// record appear together.
//
// Writes: a temp file `.sluice-tmp-*` in the target's directory, fsync,
// rename into place, fsync of the directory. Temp files left by a crash
// are removed by open(); so is `.sluice-uploads/` (staged multipart
// parts do not survive a restart).
//
// Safety: every path is opened with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS
// under its bucket directory, so no key reaches outside it; symlinks and
// special files in a backing directory are not objects.
//
// Filesystems without user xattrs still work: records are not kept, and
// every read computes the ETag again.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/storage/bucket_store.hpp"
#include "runtime/storage/posix_files.hpp"

namespace sluice {

struct posix_bucket_options {
  /// name → directory: buckets exported as they are. Never removed by
  /// remove_bucket (permission_denied).
  std::vector<std::pair<std::string, std::string>> exported{};
  /// Where create_bucket makes directories, and whose subdirectories are
  /// buckets too. Empty: no bucket can be created.
  std::string root{};
};

class posix_bucket_store final : public bucket_store {
 public:
  /// Checks that every directory exists and cleans what a crash left.
  static result<std::unique_ptr<posix_bucket_store>> open(posix_bucket_options options);

  result<std::vector<bucket_info>> buckets() override;
  result<std::optional<bucket_info>> find_bucket(std::string_view bucket) override;
  result<void> create_bucket(std::string_view bucket) override;
  result<void> remove_bucket(std::string_view bucket) override;
  result<std::optional<object_stat>> stat(std::string_view bucket, std::string_view key) override;
  result<std::unique_ptr<object_reader>> open(std::string_view bucket, std::string_view key) override;
  result<std::unique_ptr<object_writer>> create(std::string_view bucket, std::string_view key) override;
  result<bool> remove(std::string_view bucket, std::string_view key) override;
  result<void> write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                          const object_meta& meta) override;
  result<std::vector<listed_object>> list(std::string_view bucket, std::string_view prefix,
                                          std::string_view start_after, std::size_t limit) override;

 private:
  explicit posix_bucket_store(posix_bucket_options options) : options_(std::move(options)) {}
  /// The bucket's directory, or nullopt when there is no such bucket.
  std::optional<std::string> bucket_dir(std::string_view bucket) const;
  bool is_exported(std::string_view bucket) const;
  /// A bucket's directory: an exported one's is held open for good, a
  /// root bucket's is opened for the call.
  struct dir_ref {
    int fd = -1;
    posix::unique_fd owned{};
    int get() const { return fd; }
  };
  result<dir_ref> open_bucket(std::string_view bucket) const;
  /// DELETE of "DIR/": the directory when empty, else only its mark.
  result<bool> remove_marker(int bucket_fd, std::string_view dir);

  /// The records last read or written, by bucket and key, each for the
  /// identity it was written for: a file whose identity still matches
  /// needs no xattr read. At most records_max; then it starts again.
  class record_cache {
   public:
    static constexpr std::size_t records_max = 65536;
    std::optional<object_meta> find(std::string_view bucket, std::string_view key,
                                    const file_identity& identity) const;
    void remember(std::string_view bucket, std::string_view key, const file_identity& identity,
                  const object_meta& meta);

   private:
    static std::string name_of(std::string_view bucket, std::string_view key);
    mutable std::mutex mutex_;
    std::unordered_map<std::string, std::pair<file_identity, object_meta>> held_;
  };

  posix_bucket_options options_;
  std::vector<posix::unique_fd> exported_fds_;  ///< one per options_.exported
  record_cache records_;
  std::atomic<std::uint64_t> temp_counter_{0};
};

/// REQUIRES-check for keys handed to the store: invalid_argument when
/// `key` is empty, absolute, has an empty, "." or ".." segment, or a NUL.
/// One '/' may end it: a directory marker.
result<void> check_store_key(std::string_view key);

}  // namespace sluice
