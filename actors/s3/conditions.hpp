// The pure parts of a GET: HTTP dates, the Range header and the
// conditional headers (RFC 9110 §13, in the order S3 applies them).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/s3/http_types.hpp"

namespace sluice::s3 {

/// IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
std::string http_date(std::int64_t unix_s);
/// IMF-fixdate (and RFC 850's "Sunday, 06-Nov-94 08:49:37 GMT"); nullopt
/// for anything else, which HTTP says to ignore.
std::optional<std::int64_t> parse_http_date(std::string_view text);
/// "2026-12-03T11:49:21.000Z", as S3 listings write times.
std::string iso8601(std::int64_t unix_ns);

struct byte_range {
  std::uint64_t first{};
  std::uint64_t length{};
};

enum class range_kind {
  none,           ///< no Range, or one this gateway ignores (several ranges, bad syntax): the whole object
  satisfiable,    ///< 206 with `range`
  unsatisfiable,  ///< 416 InvalidRange
};

struct range_request {
  range_kind kind{range_kind::none};
  byte_range range{};
};

/// A single "bytes=a-b", "bytes=a-" or "bytes=-n" against an object of `size` bytes.
range_request parse_range(std::optional<std::string_view> header, std::uint64_t size);

enum class precondition {
  proceed,
  not_modified,  ///< 304 (GET and HEAD only)
  failed,        ///< 412 PreconditionFailed
};

/// If-Match, If-Unmodified-Since, If-None-Match, If-Modified-Since against
/// the object's ETag (no quotes) and Last-Modified (seconds).
precondition check_preconditions(const header_list& headers, std::string_view etag, std::int64_t modified_s,
                                 bool get_or_head);

/// Whether If-Range (absent counts as true) lets a Range apply.
bool if_range_holds(const header_list& headers, std::string_view etag, std::int64_t modified_s);

/// Whether an If-Match / If-None-Match list ("*", or quoted tags, W/ allowed) names `etag`.
bool etag_list_matches(std::string_view list, std::string_view etag);

}  // namespace sluice::s3
