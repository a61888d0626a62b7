// network: the transports of one node behind the one transport interface.
// Addresses carry a scheme ("tcp://10.0.0.2:7070", "inproc://master"); an
// address without one means tcp. Links route back to the transport that
// made them by the tag in their id.
//
// This is where the link manager grows (per-peer transport choice,
// demotion on errors, retry of better transports); today it dispatches by
// scheme.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "transports/transport.hpp"

namespace sluice::transport {

/// "tcp://h:p" → {"tcp", "h:p"}; "h:p" → {"tcp", "h:p"}.
struct address_parts {
  std::string scheme;
  std::string rest;
};
address_parts split_address(std::string_view address);

class network final : public transport {
 public:
  network() = default;
  ~network() override;

  /// Adds a transport; `tag` must be the tag it puts in its link ids and
  /// must differ from every other transport's. Not thread-safe: add all
  /// transports before the node starts.
  void add(std::uint16_t tag, std::unique_ptr<transport> t);

  std::string_view scheme() const noexcept override { return "network"; }
  /// Returns the bound address with its scheme, e.g. "tcp://127.0.0.1:7070".
  result<std::string> listen(std::string_view address) override;
  result<link_id> connect(std::string_view address) override;
  result<void> send(link_id link, wire::outbound_frame frame) override;
  result<bool> send_held(link_id link, wire::outbound_frame frame) override;
  void flush(link_id link) override;
  bool expect_payload(link_id link, std::uint64_t request_id, receive_slot slot) override;
  void forget_payload(link_id link, std::uint64_t request_id) override;
  void close(link_id link) override;
  void shutdown() override;

  /// The bound address without the "tcp://" prefix when the scheme is tcp,
  /// which is how people write addresses.
  static std::string display(std::string_view address);

 private:
  struct entry {
    std::uint16_t tag;
    std::unique_ptr<transport> t;
  };
  transport* by_scheme(std::string_view scheme);
  transport* by_link(link_id link);
  std::vector<entry> transports_;
};

}  // namespace sluice::transport
