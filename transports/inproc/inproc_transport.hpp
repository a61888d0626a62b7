// inproc: links between transports of one process (roles sharing it, as in
// `sluice up`), with no sockets and no copies.
//
// A link is a pair of ends, one in each transport, each with that
// transport's own tag in its id. send() hands the frame's envelope (a slice
// of the head, past the header) and its payload to the peer's sink as they
// are: the receiver sees the sender's bytes. Delivery is synchronous on the
// sending thread unless another thread is delivering on that end already;
// then the frame waits in the end's queue (bounded by max_queued_bytes) and
// that thread delivers it. No lock is held while a sink runs, so a sink may
// call send() or close() from its callbacks.
//
// Event order per end: on_link_up, the frames in order, exactly one
// on_link_down. close() and shutdown() report on_link_down on both ends:
// aborted ("closed locally") on the closer's end, unavailable ("peer closed
// the link") on the other. Unlike tcp, shutdown() therefore reports
// on_link_down to its own sink for every open link, before it returns.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/log.hpp"
#include "transports/transport.hpp"

namespace sluice::transport {

class inproc_transport;

namespace detail {
struct inproc_pipe;
}  // namespace detail

/// Where inproc listeners are found: listener names → transports. A
/// resource: whoever builds the process creates one and passes it to every
/// inproc_transport (no global registry). Thread-safe.
/// REQUIRES: outlives every transport that uses it.
class inproc_hub {
 public:
  /// Listener names one hub holds at most.
  static constexpr std::size_t max_listeners = 1024;

  inproc_hub() = default;
  inproc_hub(const inproc_hub&) = delete;
  inproc_hub& operator=(const inproc_hub&) = delete;

 private:
  friend class inproc_transport;
  result<void> add(std::string_view name, inproc_transport& t);
  void remove(std::string_view name, const inproc_transport& t);
  void remove_all(const inproc_transport& t);
  /// Lets the listener `name` accept `pipe` while the hub's lock keeps it
  /// registered (so it cannot finish shutting down meanwhile).
  result<void> connect(std::string_view name, const std::shared_ptr<detail::inproc_pipe>& pipe);

  std::mutex mutex_;
  std::map<std::string, inproc_transport*, std::less<>> listeners_;  // not owned
};

class inproc_transport final : public transport {
 public:
  /// Links open at once per transport.
  static constexpr std::size_t max_links = 4096;
  /// Longest listener name, in bytes.
  static constexpr std::size_t max_name_bytes = 256;

  /// `sink` and `hub` are kept by reference and must outlive this transport.
  inproc_transport(std::uint16_t tag, link_sink& sink, inproc_hub& hub, transport_limits limits = {});
  /// Calls shutdown(). REQUIRES: not called from a sink callback.
  ~inproc_transport() override;

  inproc_transport(const inproc_transport&) = delete;
  inproc_transport& operator=(const inproc_transport&) = delete;

  std::string_view scheme() const noexcept override { return "inproc"; }

  /// Registers `name` with the hub; fails with conflict when another
  /// listener holds it. Returns `name`.
  result<std::string> listen(std::string_view name) override;

  /// Links to the listener `name`. Both ends get on_link_up (the acceptor's
  /// peer is "inproc:<connector's link id in hex>"), possibly before this
  /// returns. An unknown name fails here with unavailable (no link id is
  /// made, so no on_link_down follows).
  result<link_id> connect(std::string_view name) override;

  /// Hands the frame to the peer's sink without copying. The header is
  /// checked against the receiver's frame limits; a protocol error closes
  /// the link on both ends and is returned. A frame whose header does not
  /// describe its own sizes fails with invalid_argument and is not sent.
  result<void> send(link_id link, wire::outbound_frame frame) override;

  void close(link_id link) override;

  /// Unregisters every listener, closes every link (both ends hear of it)
  /// and waits until no thread is delivering to this transport's sink.
  /// Idempotent. REQUIRES: not called from a sink callback.
  void shutdown() override;

 private:
  friend class inproc_hub;
  struct entry {
    std::shared_ptr<detail::inproc_pipe> pipe;  // null while a connect is in flight
    int side = 0;                               // which end of the pipe is ours
  };

  /// Called by the hub with its lock held: takes end 1 of `pipe`.
  result<void> accept(const std::shared_ptr<detail::inproc_pipe>& pipe);
  entry find(link_id link);
  void sweep_locked();
  void stop();

  const std::uint16_t tag_;
  link_sink& sink_;  // not owned; outlives this transport (constructor contract)
  inproc_hub& hub_;  // not owned; outlives this transport (constructor contract)
  const transport_limits limits_;
  const logger_ptr log_;

  // Guards everything below.
  std::mutex mutex_;
  std::condition_variable connects_done_;
  std::unordered_map<link_id, entry> links_;
  std::uint64_t next_sequence_ = 1;
  std::size_t connects_in_flight_ = 0;
  bool closed_ = false;

  std::once_flag shutdown_once_;
};

}  // namespace sluice::transport
