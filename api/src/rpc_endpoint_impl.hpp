// The state behind an rpc_endpoint, shared by the files that implement
// it: rpc_endpoint.cpp (calling) and rpc_endpoint_serve.cpp (serving).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "api/src/rpc_state.hpp"

namespace sluice {

struct rpc_endpoint::impl {
  client::impl* self;  // REQUIRES: outlives this endpoint (it lives inside the client)
  std::mutex mutex;      // guards the channels' creation
  std::shared_ptr<serve_state> serving;
  /// Serves over the node's own link when there is no shared memory.
  std::shared_ptr<node_served> node;
  /// Asynchronous calls go out on it (shm on the owner's host, else TCP).
  std::shared_ptr<call_channel> calls;
  /// A TCP channel that could not be opened is tried again after
  /// calls_retry_after; calls go through the node meanwhile.
  std::chrono::steady_clock::time_point calls_retry_at{};
  static constexpr std::chrono::milliseconds calls_connect_timeout{1000};
  static constexpr std::chrono::milliseconds calls_retry_after{1000};

  // Serving again on a new link when the owner went away (keep()).
  std::mutex keeper_mutex;  // guards the two flags
  std::condition_variable keeper_wake;
  bool keeper_stop = false;
  bool link_lost = false;
  std::thread keeper;

  explicit impl(client::impl* c) : self(c) {}
  ~impl() {
    {
      std::lock_guard guard{keeper_mutex};
      keeper_stop = true;
    }
    keeper_wake.notify_one();
    if (keeper.joinable()) keeper.join();
    std::shared_ptr<call_channel> closing;
    if (serving) {
      std::lock_guard guard{serving->mutex};
      closing = std::move(serving->channel);
    }
    closing.reset();  // joins the serving thread; the owner drops this client's instances
    if (serving) stop_streams(*serving, error{errc::unavailable, "the serving client is closing"});
    if (node) {
      self->host->served()->set(nullptr);
      node->stop();
    }
    calls.reset();
  }

  bool on_owners_host() const { return !self->shm_address.empty() && self->host->shm() != nullptr; }
  result<std::shared_ptr<call_channel>> serve_channel();
  result<std::shared_ptr<call_channel>> calls_channel();
  /// Sends a serve or unserve to the owner on the link the calls come on:
  /// `on`, or (null) the node's own link.
  result<void> tell_owner(wire::body request, const std::shared_ptr<call_channel>& on);
  /// The link calls come on: a serving channel on the owner's host, else
  /// the node's own link (null).
  result<std::shared_ptr<call_channel>> calls_link();
  result<void> serve_name(std::string_view name, served_handler handler, served_kind kind, served_limits limits);

  /// The link the handlers were served on broke.
  void lost();
  /// The keeper's thread: after each loss, serves every handler again
  /// (a new link to the owner, or to its successor) until it works.
  void keep();
  /// Tells the owner again about every served name; false when it failed.
  bool serve_again();
};

/// Sends `call` without waiting (on the asynchronous callers' channel on
/// the owner's host, else through the client node); `finish` runs once
/// with the answer as it came, on a Sluice thread. Sets state.on_cancel
/// where a cancel can reach the handler (rpc_endpoint.cpp).
void send_call(rpc_endpoint::impl& e, rpc_call_handle::state& state, wire::rpc_call call, shared_bytes payload,
               std::chrono::milliseconds timeout, std::function<void(result<wire::message>)> finish);


}  // namespace sluice
