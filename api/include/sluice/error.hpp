// Typed errors: every failure Sluice reports is an `errc` plus a message a
// person can act on.
//
// This header is part of the public vocabulary: it depends on the standard
// library only, and every layer of Sluice uses it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

namespace sluice {

/// Error codes. The numeric values travel on the wire and appear in logs:
/// they are pinned. Never renumber or reuse one; add new codes at the end.
enum class errc : std::uint16_t {
  ok = 0,                 ///< Not an error; never carried by an `error`.
  not_found = 1,          ///< The key (or name) has no committed version.
  timeout = 2,            ///< The deadline passed before an answer came.
  unavailable = 3,        ///< A node needed for the request is down or unreachable.
  no_capacity = 4,        ///< No room for the value, even after eviction.
  conflict = 5,           ///< A condition on the current version did not hold.
  invalid_argument = 6,   ///< The request itself is wrong (bad key, bad size, bad flag).
  permission_denied = 7,  ///< The caller may not do this.
  aborted = 8,            ///< The operation was stopped before it finished.
  internal = 9,           ///< A bug in Sluice; the message says where.
  overloaded = 10,        ///< A bounded queue or limit was hit; retry later.
  protocol = 11,          ///< A peer sent a malformed or incompatible frame.
  cancelled = 12,         ///< The caller cancelled the operation.
  handler_failed = 13,    ///< A called handler threw or broke its promise; the message is its own.
};

/// The highest code this build knows; codes above it decode as `internal`.
inline constexpr errc errc_last = errc::handler_failed;

/// The code's name as written in docs and logs, e.g. "not_found".
constexpr std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::ok: return "ok";
    case errc::not_found: return "not_found";
    case errc::timeout: return "timeout";
    case errc::unavailable: return "unavailable";
    case errc::no_capacity: return "no_capacity";
    case errc::conflict: return "conflict";
    case errc::invalid_argument: return "invalid_argument";
    case errc::permission_denied: return "permission_denied";
    case errc::aborted: return "aborted";
    case errc::internal: return "internal";
    case errc::overloaded: return "overloaded";
    case errc::protocol: return "protocol";
    case errc::cancelled: return "cancelled";
    case errc::handler_failed: return "handler_failed";
  }
  return "unknown";
}

/// One sentence saying what the code means, for people.
constexpr std::string_view describe(errc code) noexcept {
  switch (code) {
    case errc::ok: return "success";
    case errc::not_found: return "the key has no committed version";
    case errc::timeout: return "the deadline passed before an answer came";
    case errc::unavailable: return "a node needed for the request is down or unreachable";
    case errc::no_capacity: return "there is no room for the value";
    case errc::conflict: return "a condition on the current version did not hold";
    case errc::invalid_argument: return "the request is malformed or out of range";
    case errc::permission_denied: return "the caller may not do this";
    case errc::aborted: return "the operation was stopped before it finished";
    case errc::internal: return "an internal error (a bug in Sluice)";
    case errc::overloaded: return "a limit was reached; retry later";
    case errc::protocol: return "a peer sent a malformed or incompatible frame";
    case errc::cancelled: return "the caller cancelled the operation";
    case errc::handler_failed: return "the called handler failed (it threw, or never answered)";
  }
  return "unknown error code";
}

/// Maps a number read from the wire to a code; unknown numbers map to
/// `internal` so a newer peer's code never becomes a silent success.
constexpr errc errc_from_wire(std::uint16_t value) noexcept {
  if (value == 0 || value > static_cast<std::uint16_t>(errc_last)) {
    return value == 0 ? errc::ok : errc::internal;
  }
  return static_cast<errc>(value);
}

/// A failure: a code and a message. A value type.
class error {
 public:
  /// REQUIRES: code != errc::ok.
  error(errc code, std::string message) : code_(code), message_(std::move(message)) {}

  errc code() const noexcept { return code_; }
  const std::string& message() const noexcept { return message_; }

  /// "not_found: key 'a' has no committed version".
  std::string to_string() const {
    std::string out{sluice::to_string(code_)};
    if (!message_.empty()) {
      out += ": ";
      out += message_;
    }
    return out;
  }

  friend bool operator==(const error& a, const error& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  errc code_;
  std::string message_;
};

}  // namespace sluice
