// The state behind a sluice::client: its own client node.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/src/node_host.hpp"
#include "sluice/client.hpp"

namespace sluice::transport {
class tcp_call_link;
}  // namespace sluice::transport

namespace sluice {

/// Calling threads of one client with a TCP link of their own to its
/// owner (see direct_call): each holds a socket and a link at the owner,
/// whose tcp transport allows 4096 links in all. Threads past it go
/// through the client node.
inline constexpr std::size_t tcp_direct_links_max = 256;

/// The threads' own TCP links of one client, so that they end when the
/// client does (a thread's link otherwise lives until that thread calls
/// again or ends).
struct tcp_direct_links {
  std::mutex mutex;  // guards links
  std::vector<std::weak_ptr<transport::tcp_call_link>> links;  // at most tcp_direct_links_max
  /// Counts `link` in, unless tcp_direct_links_max links live already.
  bool admit(const std::shared_ptr<transport::tcp_call_link>& link);
  /// Shuts every link down (their threads' next calls open new ones, or
  /// find the client gone).
  ~tcp_direct_links();
};

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
  /// The owner's TCP address ("host:port"), when this client may reach it
  /// over TCP: synchronous calls then go through the calling thread's own
  /// TCP link whenever shared memory does not serve them.
  std::string tcp_address;
  tcp_direct_links tcp_links;
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
