// sim_transport: one node's transport in the simulator; every call goes to
// the world's network. Addresses are "sim://NAME".
#pragma once

#include "sim/network.hpp"
#include "transports/transport.hpp"

namespace sluice::sim {

class sim_transport final : public transport::transport {
 public:
  /// REQUIRES: `net` outlives this transport.
  sim_transport(network& net, int node) : net_(net), node_(node) {}

  std::string_view scheme() const noexcept override { return "sim"; }
  result<std::string> listen(std::string_view name) override { return net_.listen(node_, name); }
  result<link_id> connect(std::string_view name) override { return net_.connect(node_, name); }
  result<void> send(link_id link, wire::outbound_frame frame) override {
    return net_.send(node_, link, std::move(frame));
  }
  void close(link_id link) override { net_.close(node_, link); }
  /// The world stops nodes through the network (detach), not here.
  void shutdown() override {}

 private:
  network& net_;
  int node_;
};

}  // namespace sluice::sim
