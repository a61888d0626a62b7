// shm_server: the owner's end of the shared-memory transport. Local
// clients connect to its Unix socket; each gets a channel (two rings in a
// memfd) and the owner's pool segments, so values move between them with
// no copies through the kernel. One poller thread serves every client: it
// spins on the request rings while there is traffic and for a short while
// after, then sleeps in epoll until a client rings the doorbell, a client
// connects, or one goes away (its socket closes: a crashed client is
// noticed at once and its link reported down).
//
// Frames travel through the rings whole — header, envelope, payload —
// except that a payload lying in the owner's pool travels as a reference
// to its region, which the client reads in place. The client then holds a
// lease on the region (the server keeps the payload's bytes alive) until
// it sends a release, or until its link goes down.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/log.hpp"
#include "transports/shm/channel.hpp"
#include "transports/shm/frame_copy.hpp"
#include "transports/shm/waiter.hpp"
#include "transports/shm/spin_policy.hpp"
#include "transports/transport.hpp"

namespace sluice::transport {

/// A pool segment handed to every client: its memfd (owned elsewhere, kept
/// open while the server runs) and its size.
struct shm_segment {
  int fd = -1;
  std::uint64_t size_bytes = 0;
  /// The owner's mapping, to recognise payloads that live in the pool:
  /// those go to the client as region references, not copies.
  const std::byte* base = nullptr;
};

struct shm_server_options {
  /// Bytes of each ring (a power of two); a frame must fit in half of it.
  std::uint32_t ring_bytes = 16u << 20;
  /// Values one client may hold by reference at once (each lease keeps a
  /// value's pool memory until the client releases it). A client's
  /// library releases a value when its last view goes; one that holds
  /// more than this is treated as broken: its link is closed, which
  /// releases them all.
  std::size_t leases_per_client_max = 1 << 18;
  /// How long the poller keeps spinning after the last record, at most.
  /// Why 50 µs: a client that answers and asks again within that time
  /// finds the poller awake (no wake-up, well under a microsecond per
  /// hop); an idle owner costs at most 50 µs of a core per burst. It
  /// spins only as long as recent spins paid (spin_policy.hpp): on a busy
  /// host, where spinning takes the core from the threads it waits for,
  /// it sleeps at once.
  std::chrono::microseconds spin{50};
  /// Longest sleep between checks of the poller's own housekeeping.
  std::chrono::milliseconds nap{10};
  /// Clients served at once.
  std::size_t clients_max = 256;
  /// The pool segments every client maps.
  std::vector<shm_segment> segments;
  /// Answers requests on the poller's thread when it can (an owner's fast
  /// path), for clients that already sent their first frame.
  fast_path_fn fast_path;
  /// Called on the poller's thread each time it stops spinning to sleep:
  /// work it saved up for quieter moments goes now.
  std::function<void()> on_idle;
  /// Passes frames between clients on the poller's thread when it can (an
  /// owner relaying RPC calls), tried before fast_path.
  relay_fn relay;
  /// Where frames the relay routes to links of the node's other transports
  /// go (an answer to a caller over TCP); unset, they are dropped, as for a
  /// link that is gone.
  relay_onward_fn relay_onward;
};

class shm_server final : public transport {
 public:
  /// Starts the poller thread. `sink` must outlive this transport.
  shm_server(std::uint16_t tag, link_sink& sink, transport_limits limits = {},
             shm_server_options options = {});
  ~shm_server() override;
  shm_server(const shm_server&) = delete;
  shm_server& operator=(const shm_server&) = delete;

  std::string_view scheme() const noexcept override { return "shm"; }
  /// A Unix socket path, or "@name" for an abstract name.
  result<std::string> listen(std::string_view address) override;
  /// Owners do not dial over shm: fails with invalid_argument.
  result<link_id> connect(std::string_view address) override;
  /// Any thread. Writes into the client's response ring at once when it
  /// has room, else queues (bounded by max_queued_bytes) for the poller.
  result<void> send(link_id link, wire::outbound_frame frame) override;
  void close(link_id link) override;
  void shutdown() override;

 private:
  struct client;
  using client_ptr = std::shared_ptr<client>;

  void run();
  bool serve_all();
  bool drain(client& c);
  bool flush(client& c);
  void sleep_until_work();
  void handle_events(int timeout_ms);
  void accept_clients();
  result<void> greet(client& c);
  void drop(const client_ptr& c, const error& reason);
  client_ptr find(link_id link);
  void wake() noexcept;
  bool write_locked(client& c, const wire::outbound_frame& frame);
  bool relay(link_id from, const wire::inbound_frame& frame, bool& relayed);
  /// sched_yield(), while yields_ says it pays. Poller only.
  void yield_to_readers();
  /// Writes a frame from the poller (a fast-path answer, a relayed call)
  /// or queues it behind the others. REQUIRES: c.send_mutex held and
  /// !over_queue_bound(c), so a client's queue holds at most
  /// max_queued_bytes plus one frame.
  bool queue_or_write(client& c, wire::outbound_frame frame);
  /// The client's queue holds max_queued_bytes or more.
  bool over_queue_bound(const client& c) const noexcept;
  result<void> fits(const client& c, const wire::outbound_frame& frame) const;
  std::optional<shm::region_ref> in_pool(const shared_bytes& payload) const;
  void take_releases(client& c, std::span<const std::byte> ids);

  const std::uint16_t tag_;
  link_sink& sink_;  // not owned; outlives this transport
  const transport_limits limits_;
  const shm_server_options options_;
  const logger_ptr log_;
  shm::unique_fd epoll_fd_;
  shm::unique_fd doorbell_fd_;  // clients write it when the poller sleeps
  shm::unique_fd wake_fd_;      // local senders and close() write it

  std::mutex mutex_;  // guards clients_, next_sequence_, listener_
  std::map<link_id, client_ptr> clients_;
  std::uint64_t next_sequence_ = 1;
  std::optional<shm::unix_listener> listener_;

  // The clients as the poller sees them; only the poller adds and drops
  // clients, so it keeps this copy of clients_ without the lock.
  std::vector<client_ptr> active_;
  /// The poller passed frames between clients since it last slept.
  bool relayed_since_sleep_ = false;
  /// Whether yielding the core to whoever takes what the poller passed
  /// on (the reader of a relayed frame, the node's threads) pays.
  shm::yield_policy yields_;

  std::atomic<bool> stopping_{false};
  std::once_flag shutdown_once_;
  std::thread poller_;
};

}  // namespace sluice::transport
