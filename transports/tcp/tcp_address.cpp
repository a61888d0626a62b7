#include "transports/tcp/tcp_address.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>

#include <charconv>
#include <cstring>

namespace sluice::transport {

std::optional<host_port> split_host_port(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string_view::npos || text.substr(close + 1, 1) != ":") return std::nullopt;
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) return std::nullopt;  // IPv6 needs brackets
  }
  unsigned value = 0;
  auto [end, code] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || port.empty() || code != std::errc{} || end != port.data() + port.size() ||
      value > 65535) {
    return std::nullopt;
  }
  return host_port{std::string{host}, static_cast<std::uint16_t>(value)};
}

std::optional<socket_address> numeric_address(const host_port& where) {
  const std::string host = where.host == "localhost" ? "127.0.0.1" : where.host;
  socket_address out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(where.port);
    out.length = sizeof(sockaddr_in);
    return out;
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.address);
  if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(where.port);
    out.length = sizeof(sockaddr_in6);
    return out;
  }
  return std::nullopt;
}

result<socket_address> resolve(std::string_view address) {
  auto where = split_host_port(address);
  if (!where) {
    return fail(errc::invalid_argument, "cannot parse address '" + std::string{address} +
                                            "'; write host:port, e.g. 127.0.0.1:7070 or [::1]:7070");
  }
  if (auto numeric = numeric_address(*where)) return *numeric;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int code = ::getaddrinfo(where->host.c_str(), std::to_string(where->port).c_str(), &hints, &found);
  if (code != 0 || found == nullptr) {
    return fail(errc::unavailable, "cannot resolve host '" + where->host + "': " + ::gai_strerror(code));
  }
  socket_address out;
  std::memcpy(&out.address, found->ai_addr, found->ai_addrlen);
  out.length = found->ai_addrlen;
  ::freeaddrinfo(found);
  return out;
}

std::string format_address(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return "[" + std::string{text} + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
  ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
  return std::string{text} + ":" + std::to_string(ntohs(v4->sin_port));
}

std::string reachable_address(std::string_view bound) {
  auto where = split_host_port(bound);
  if (!where || (where->host != "0.0.0.0" && where->host != "::")) return std::string{bound};
  std::string host = "127.0.0.1";
  ifaddrs* all = nullptr;
  if (::getifaddrs(&all) == 0) {
    for (auto* i = all; i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
      if ((i->ifa_flags & IFF_UP) == 0 || (i->ifa_flags & IFF_LOOPBACK) != 0) continue;
      char text[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      host = text;
      break;
    }
    ::freeifaddrs(all);
  }
  return host + ":" + std::to_string(where->port);
}

}  // namespace sluice::transport
