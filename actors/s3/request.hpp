// Parsing a request-target into what S3 addresses: the bucket, the key
// and the query parameters. Path style (/bucket/key) always; virtual-host
// style (bucket.DOMAIN/key) when the gateway was given its DOMAIN.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/s3/http_types.hpp"

namespace sluice::s3 {

struct parsed_request {
  std::string method{};
  std::string bucket{};  ///< empty: the service (ListBuckets)
  std::string key{};     ///< empty: the bucket itself
  std::string resource{};  ///< the decoded path, for error bodies
  std::vector<std::pair<std::string, std::string>> query{};  ///< decoded, in order
  header_list headers{};
  std::optional<std::uint64_t> content_length{};

  bool has(std::string_view name) const;
  std::optional<std::string> param(std::string_view name) const;
  std::optional<std::string_view> header(std::string_view name) const { return find_header(headers, name); }
};

/// nullopt for a malformed percent-escape. `plus_is_space` for query text.
std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space);
/// Every byte but A-Z a-z 0-9 - _ . ~ (and '/' when `keep_slash`) as %XX.
std::string percent_encode(std::string_view text, bool keep_slash);

/// nullopt when the target is not a path with a valid query. `domain`:
/// the gateway's own host name for virtual-host addressing ("" = off).
std::optional<parsed_request> parse_request(const request_head& head, std::string_view domain);

}  // namespace sluice::s3
