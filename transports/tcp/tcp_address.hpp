// Socket addresses for the tcp transport: parsing "host:port" and
// "[v6]:port", resolving names, and printing addresses back.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/result.hpp"

namespace sluice::transport {

struct socket_address {
  sockaddr_storage address{};
  socklen_t length = 0;
  const sockaddr* raw() const noexcept { return reinterpret_cast<const sockaddr*>(&address); }
};

struct host_port {
  std::string host;
  std::uint16_t port = 0;
};

/// "host:port" or "[v6]:port" → parts; nothing when it does not parse.
/// IPv6 hosts need brackets.
std::optional<host_port> split_host_port(std::string_view text);

/// The address when `where.host` is numeric (or "localhost"), without
/// touching the resolver.
std::optional<socket_address> numeric_address(const host_port& where);

/// Numeric hosts resolve in place; names go through getaddrinfo, which
/// may block. Errors: invalid_argument (unparsable), unavailable (name
/// does not resolve).
result<socket_address> resolve(std::string_view address);

/// The address other hosts can dial to reach a listener bound at `bound`
/// ("host:port"): `bound` itself, unless its host is a wildcard (0.0.0.0,
/// ::), in which case the first non-loopback IPv4 address of this host
/// that is up, with the same port (127.0.0.1 when there is none).
std::string reachable_address(std::string_view bound);

/// "1.2.3.4:5" or "[::1]:5".
std::string format_address(const sockaddr_storage& address);

}  // namespace sluice::transport
