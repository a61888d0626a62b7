// The metadata record posix_bucket_store keeps beside an object, in the
// file's extended attribute `user.sluice.meta`. Being an attribute of the
// file itself, it is renamed into place together with the bytes, so an
// object's content and its record become visible in one step.
//
// Grammar (text, '\n' ends every line; never change version 1, add a new
// version instead):
//
//   record  := "sluice-meta 1" NL size NL mtime_ns NL inode NL etag NL header*
//   header  := name TAB value NL      ; name: lower case, no TAB or NL;
//                                     ; value: no NL or CR
//   size, mtime_ns, inode := decimal  ; the file identity it was written for
//
// A record whose identity differs from the file's is stale: the file was
// changed behind the store's back, and the ETag must be computed again.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "runtime/storage/bucket_store.hpp"

namespace sluice {

inline constexpr const char* meta_xattr_name = "user.sluice.meta";

struct meta_record {
  file_identity identity{};
  object_meta meta{};
};

/// REQUIRES: header names and values hold no NL, CR (and names no TAB).
std::string encode_meta_record(const meta_record& record);
/// nullopt for anything that does not follow the grammar.
std::optional<meta_record> decode_meta_record(std::string_view text);

}  // namespace sluice
