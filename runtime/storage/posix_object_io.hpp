// The reader and writer behind posix_bucket_store, and the xattr record
// I/O they share. Internal to runtime/storage.
#pragma once

#include <memory>
#include <string>

#include "runtime/storage/bucket_store.hpp"
#include "runtime/storage/posix_files.hpp"

namespace sluice::posix {

/// The identity of the open file `fd`, and its record when that record was
/// written for this identity. nullopt (not an error) when `fd` is not a
/// regular file.
result<std::optional<object_stat>> stat_fd(int fd, std::string_view what);

/// Sets the record on `fd` for identity `of`. Filesystems without user
/// xattrs are not an error: the record is then simply not kept.
result<void> set_record(int fd, const file_identity& of, const object_meta& meta);

std::unique_ptr<object_reader> make_reader(unique_fd fd, object_stat stat);

/// A writer of a new file `name` in `dir` (the directory stays open with
/// the writer). `temp_name` must be hidden and unique.
result<std::unique_ptr<object_writer>> make_writer(unique_fd dir, std::string name, std::string temp_name);

}  // namespace sluice::posix
