// Small POSIX file helpers for the storage adapters: an owning fd, opens
// that cannot leave a directory, directory listings, errno → error.
// Internal to runtime/storage.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/result.hpp"

namespace sluice::posix {

/// Owns a file descriptor; closes it when dropped.
class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  ~unique_fd() { reset(); }
  unique_fd(unique_fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    if (this != &other) {
      reset();
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

/// An error for a failed system call: `what` names the operation and the
/// path, errno picks the code (ENOENT → not_found, ENOSPC → no_capacity,
/// EACCES → permission_denied, ...).
error errno_error(int err, std::string_view what);

/// Opens the directory `path` itself (which may be anywhere).
result<unique_fd> open_dir(const std::string& path);

/// Opens `relative` under the directory `dir_fd`, refusing any path that
/// leaves it (RESOLVE_BENEATH) or follows a symlink (RESOLVE_NO_SYMLINKS).
result<unique_fd> open_beneath(int dir_fd, std::string_view relative, int flags, mode_t mode = 0);

/// The directory `relative` under `dir_fd`, created segment by segment
/// when `create` is set.
result<unique_fd> open_subdir(int dir_fd, std::string_view relative, bool create);

struct dir_entry {
  std::string name{};
  bool is_dir{};
};

/// Regular files and directories in `dir_fd` ("." and "..", symlinks and
/// special files left out), in no particular order.
result<std::vector<dir_entry>> read_dir(int dir_fd);

/// fsync, retried on EINTR.
result<void> sync_fd(int fd, std::string_view what);

}  // namespace sluice::posix
