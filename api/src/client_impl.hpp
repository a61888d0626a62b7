// The state behind a sluice::client: its own client node.
#pragma once

#include <memory>
#include <mutex>
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
  /// The owner's shm socket, when this client reaches it through shared
  /// memory: synchronous calls then go through the calling thread's own
  /// direct channel (see direct_call).
  std::string shm_address;
  /// Lives as long as the client: threads' direct channels check it.
  std::shared_ptr<int> alive = std::make_shared<int>(0);
  /// The RPC side, made on first use (api/src/rpc_endpoint.cpp). Last, so
  /// that it goes first: its threads use the node.
  std::mutex rpc_mutex;
  std::shared_ptr<rpc_endpoint> rpc;

  /// Connects through `hub` when given (in-process clusters), else TCP.
  static result<std::unique_ptr<client>> connect_with(const std::string& address,
                                                      client_options options,
                                                      std::shared_ptr<transport::inproc_hub> hub);
};

}  // namespace sluice
