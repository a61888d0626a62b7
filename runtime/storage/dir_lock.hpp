// dir_lock: one process at a time in a data directory. A master holds the
// lock on DIR/LOCK for as long as it uses DIR, so a second master started
// on the same directory is refused instead of writing into the same
// database (two masters would each believe they own the cluster's state).
//
// The lock is an flock(2) on the file: the kernel drops it when the
// process ends, however it ends, so a crash never leaves a stale lock.
#pragma once

#include <memory>
#include <string>

#include "sluice/result.hpp"

namespace sluice {

class dir_lock {
 public:
  /// Takes the lock on `dir`/LOCK, creating the file. Errors:
  /// unavailable when another process holds it (the message names the
  /// directory and, when it wrote it, that process's id) or the file
  /// cannot be opened.
  static result<std::unique_ptr<dir_lock>> acquire(const std::string& dir);
  /// Releases the lock.
  ~dir_lock();
  dir_lock(const dir_lock&) = delete;
  dir_lock& operator=(const dir_lock&) = delete;

 private:
  explicit dir_lock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace sluice
