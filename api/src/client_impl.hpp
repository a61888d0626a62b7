// The state behind a sluice::client: its own client node.
#pragma once

#include <memory>
#include <string>

#include "api/src/node_host.hpp"
#include "sluice/client.hpp"

namespace sluice {

struct client::impl {
  /// Keeps the in-process hub alive while this client's node uses it;
  /// declared before `host` so it is released after the node stops.
  std::shared_ptr<transport::inproc_hub> hub;
  std::unique_ptr<node_host> host;
  client_options options;
  std::string address;

  /// Connects through `hub` when given (in-process clusters), else TCP.
  static result<std::unique_ptr<client>> connect_with(const std::string& address,
                                                      client_options options,
                                                      std::shared_ptr<transport::inproc_hub> hub);
};

}  // namespace sluice
