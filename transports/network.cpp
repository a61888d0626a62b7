#include "transports/network.hpp"

#include <fmt/format.h>

namespace sluice::transport {

address_parts split_address(std::string_view address) {
  auto pos = address.find("://");
  if (pos == std::string_view::npos) return {"tcp", std::string{address}};
  return {std::string{address.substr(0, pos)}, std::string{address.substr(pos + 3)}};
}

std::string network::display(std::string_view address) {
  auto parts = split_address(address);
  if (parts.scheme == "tcp") return parts.rest;
  return std::string{address};
}

network::~network() { shutdown(); }

void network::add(std::uint16_t tag, std::unique_ptr<transport> t) {
  transports_.push_back(entry{tag, std::move(t)});
}

transport* network::by_scheme(std::string_view scheme) {
  for (auto& e : transports_) {
    if (e.t->scheme() == scheme) return e.t.get();
  }
  return nullptr;
}

transport* network::by_link(link_id link) {
  for (auto& e : transports_) {
    if (e.tag == link_tag(link)) return e.t.get();
  }
  return nullptr;
}

result<std::string> network::listen(std::string_view address) {
  auto parts = split_address(address);
  auto* t = by_scheme(parts.scheme);
  if (t == nullptr) {
    return fail(errc::invalid_argument, "cannot listen on '" + std::string{address} +
                                            "': this node has no '" + parts.scheme + "' transport");
  }
  auto bound = t->listen(parts.rest);
  if (!bound) return bound;
  return parts.scheme + "://" + *bound;
}

result<link_id> network::connect(std::string_view address) {
  auto parts = split_address(address);
  auto* t = by_scheme(parts.scheme);
  if (t == nullptr) {
    return fail(errc::invalid_argument, "cannot connect to '" + std::string{address} +
                                            "': this node has no '" + parts.scheme + "' transport");
  }
  return t->connect(parts.rest);
}

result<void> network::send(link_id link, wire::outbound_frame frame) {
  auto* t = by_link(link);
  if (t == nullptr) return fail(errc::unavailable, fmt::format("no transport owns link {:#x}", link));
  return t->send(link, std::move(frame));
}

result<bool> network::send_held(link_id link, wire::outbound_frame frame) {
  auto* t = by_link(link);
  if (t == nullptr) return fail(errc::unavailable, fmt::format("no transport owns link {:#x}", link));
  return t->send_held(link, std::move(frame));
}

void network::flush(link_id link) {
  if (auto* t = by_link(link)) t->flush(link);
}

bool network::expect_payload(link_id link, std::uint64_t request_id, receive_slot slot) {
  auto* t = by_link(link);
  return t != nullptr && t->expect_payload(link, request_id, std::move(slot));
}

void network::forget_payload(link_id link, std::uint64_t request_id) {
  if (auto* t = by_link(link)) t->forget_payload(link, request_id);
}

void network::close(link_id link) {
  if (auto* t = by_link(link)) t->close(link);
}

void network::shutdown() {
  for (auto& e : transports_) e.t->shutdown();
}

}  // namespace sluice::transport
