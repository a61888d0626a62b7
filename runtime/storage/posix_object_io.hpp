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
result<std::optional<object_stat>> stat_fd(int fd, std::string_view what, bool with_record = true);
/// The record beside the open file `fd`, when it was written for `identity`.
std::optional<object_meta> record_of(int fd, const file_identity& identity);
/// The regular file `name` directly in `dir_fd` (a symlink is not
/// followed, and is no object), without its record; nullopt: none.
result<std::optional<object_stat>> stat_at(int dir_fd, const std::string& name);

/// Sets the record on `fd` for identity `of`. Filesystems without user
/// xattrs are not an error: the record is then simply not kept.
result<void> set_record(int fd, const file_identity& of, const object_meta& meta);

std::unique_ptr<object_reader> make_reader(unique_fd fd, object_stat stat);
/// A reader of the file `name` directly in `dir_fd`, opened at its first
/// read, which fails (aborted) when the file is no longer the one `stat`
/// describes. `dir_fd` must outlive the reader.
std::unique_ptr<object_reader> make_lazy_reader(int dir_fd, std::string name, object_stat stat);

/// A writer of a new file `name` in `dir` (the directory stays open with
/// the writer). `temp_name` must be hidden and unique.
result<std::unique_ptr<object_writer>> make_writer(unique_fd dir, std::string name, std::string temp_name);

}  // namespace sluice::posix
