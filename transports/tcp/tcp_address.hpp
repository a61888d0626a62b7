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

/// "1.2.3.4:5" or "[::1]:5".
std::string format_address(const sockaddr_storage& address);

}  // namespace sluice::transport
