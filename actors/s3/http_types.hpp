// The S3 gateway's view of HTTP: plain values, no sockets and no Beast.
// The server shell (api/src/s3_server.cpp) turns the wire into a
// request_head, streams request bodies into a body_sink, and streams a
// response's body_source back out, chunk by chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "sluice/result.hpp"

namespace sluice::s3 {

using header_list = std::vector<std::pair<std::string, std::string>>;

struct request_head {
  std::string method{};  ///< "GET", "PUT", ...
  std::string target{};  ///< the raw request-target: "/bucket/key?list-type=2"
  header_list headers{};  ///< as sent; looked up without regard to case
  /// The body's length when the request said (Content-Length); nullopt
  /// for a chunked body.
  std::optional<std::uint64_t> content_length{};
};

/// The value of header `name` (case-insensitive), if present.
std::optional<std::string_view> find_header(const header_list& headers, std::string_view name);

/// A response body pulled by the shell in chunks.
class body_source {
 public:
  virtual ~body_source() = default;
  /// Fills up to into.size() bytes; 0 only at the end.
  virtual result<std::size_t> read(std::span<std::byte> into) = 0;
  /// Up to `max` next bytes where they lie already, valid until the next
  /// call: the shell sends them from there. Empty: use read().
  virtual result<std::span<const std::byte>> view(std::size_t max) {
    (void)max;
    return std::span<const std::byte>{};
  }
};

struct response {
  int status{200};
  header_list headers{};
  std::string body{};                     ///< the body when `source` is null
  std::unique_ptr<body_source> source{};  ///< a streamed body of `content_length` bytes
  std::uint64_t content_length{};         ///< of the body (also for HEAD, which sends none)
  bool head{};   ///< send the headers only (HEAD, 304)
  bool close{};  ///< close the connection after this response
};

/// Takes a request body as it arrives. A resource: one request's worth.
class body_sink {
 public:
  virtual ~body_sink() = default;
  /// nullopt to go on; a response ends the request early (the shell sends
  /// it and closes the connection, the rest of the body unread).
  virtual std::optional<response> write(std::span<const std::byte> bytes) = 0;
  /// The whole body arrived.
  virtual response finish() = 0;
};

/// What a request starts as: an answer at once, or a sink for its body.
using started = std::variant<response, std::unique_ptr<body_sink>>;

}  // namespace sluice::s3
