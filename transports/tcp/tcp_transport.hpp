// tcp: links over TCP sockets, the default transport across hosts.
//
// One I/O thread per transport runs an epoll loop (level-triggered) and an
// eventfd wakes it for commands. It accepts, connects, reads frames and
// finishes sends that the kernel could not take at once; every sink
// callback comes from it. send() may be called from any thread and writes
// straight to the socket when the link's queue is empty (lowest latency);
// what the kernel does not take is queued and the I/O thread finishes it.
//
// Receive path per link: 24-byte header → wire::parse_frame_header against
// the frame limits (before anything is allocated) → envelope words into
// their own 64-byte aligned buffer → payload bytes into their own buffer →
// link_sink::on_frame. Small frames arrive through a read-ahead staging
// buffer (one syscall for many frames); payload bytes are read straight
// into the payload buffer, so bulk bytes are never copied.
//
// Event order per link (all from the I/O thread): on_link_up, the frames in
// order, then exactly one on_link_down. A link whose connect fails gets
// only on_link_down. shutdown() closes every link and listener WITHOUT
// reporting on_link_down for them: the node is going away, and after
// shutdown() returns the sink hears nothing more.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/log.hpp"
#include "runtime/memory/buffer.hpp"
#include "transports/transport.hpp"

namespace sluice::transport {

/// Settings of the tcp transport beyond the limits shared by transports.
/// Every bound of the transport lives here or in transport_limits.
struct tcp_options {
  /// An outbound connect that has not completed by then fails with
  /// errc::timeout; a black-holed address must not hang a link forever.
  std::chrono::milliseconds connect_timeout{5000};
  /// Links open at once, both directions. Bounds file descriptors and
  /// per-link memory; connect() beyond it answers `overloaded` and accepted
  /// connections beyond it are closed with a log line.
  std::size_t max_links = 4096;
  /// Listening sockets per transport.
  std::size_t max_listeners = 64;
  /// The read-ahead buffer. One per transport: the I/O thread reads one
  /// link at a time and always empties it before moving on.
  std::size_t staging_bytes = 64 * 1024;
  /// Bytes read from one link per wakeup before the I/O thread serves the
  /// others, so one fast sender cannot starve the rest.
  std::size_t read_bytes_per_wakeup_max = 4 * 1024 * 1024;
  /// Receives posted on one link at once (expect_payload); beyond it a
  /// reply's payload is received into memory of the transport's own.
  std::size_t posted_receives_per_link_max = 4096;
};

class tcp_transport final : public transport {
 public:
  /// Starts the I/O thread. `sink` is kept by reference and must outlive
  /// this transport. Throws std::system_error when the kernel refuses an
  /// epoll instance, an eventfd or a thread (a boundary: nothing works then).
  tcp_transport(std::uint16_t tag, link_sink& sink, transport_limits limits = {},
                tcp_options options = {});
  /// Calls shutdown(). REQUIRES: not called from a sink callback.
  ~tcp_transport() override;

  tcp_transport(const tcp_transport&) = delete;
  tcp_transport& operator=(const tcp_transport&) = delete;

  std::string_view scheme() const noexcept override { return "tcp"; }

  /// "host:port", "[v6]:port" or "localhost:port"; port 0 picks a free
  /// port. Returns the bound "ip:port". Fails with invalid_argument when the
  /// address does not parse and unavailable when the bind fails.
  result<std::string> listen(std::string_view address) override;

  /// Returns the new link's id at once; the I/O thread connects and
  /// reports on_link_up(link, address) or on_link_down (unavailable when
  /// refused or unreachable, timeout after tcp_options::connect_timeout).
  /// Numeric addresses resolve without blocking; a host name goes through
  /// getaddrinfo on the caller's thread (which may wait for DNS: use
  /// numeric addresses on hot paths).
  result<link_id> connect(std::string_view address) override;

  /// Thread-safe. A frame larger than max_queued_bytes minus what is
  /// already queued answers `overloaded`. Socket errors seen here mark the
  /// link broken and answer `unavailable`; the I/O thread reports the
  /// on_link_down. Fails with invalid_argument when the frame's header
  /// does not describe its own sizes.
  result<void> send(link_id link, wire::outbound_frame frame) override;
  result<bool> send_held(link_id link, wire::outbound_frame frame) override;
  void flush(link_id link) override;

  /// Thread-safe. Payload bytes of the matching reply are read from the
  /// socket straight into `slot` (no staging copy, no buffer of our own).
  bool expect_payload(link_id link, std::uint64_t request_id, receive_slot slot) override;
  void forget_payload(link_id link, std::uint64_t request_id) override;
  /// Where payloads that no expect_payload() asked for are received (an
  /// owner's pool); none set, or none given: a buffer of the transport's
  /// own. Thread-safe; may be set while links are open.
  void set_payload_allocator(payload_allocator allocate);
  /// Answers requests on the I/O thread when `fast` can (an owner's fast
  /// path, for its clients over TCP as for those over shared memory):
  /// every frame of a link but its first (the hello) is offered to it
  /// before the sink; its replies go out when the wake-up ends. `idle`
  /// runs after a wake-up in which `fast` took a frame. Thread-safe; set it
  /// before links open (frames already read are not offered again).
  void set_fast_path(fast_path_fn fast, std::function<void()> idle);
  /// Passes frames of client links on the I/O thread when `relay` can (an
  /// owner relaying RPC calls from its clients over TCP to handlers on
  /// shared memory, as its poller does between clients on shared memory),
  /// tried before the fast path. A frame routed to a link of this
  /// transport is queued on it; one routed elsewhere goes to `onward`;
  /// one that either refuses goes to the sink as if no relay had seen it.
  /// Thread-safe; set it before links open.
  void set_relay(relay_fn relay, relay_onward_fn onward);

  /// The I/O thread closes the link and reports on_link_down(aborted,
  /// "closed locally") unless the link is down already.
  void close(link_id link) override;

  /// Stops the I/O thread and closes every link and listener without
  /// reporting on_link_down for them. Idempotent; concurrent callers wait
  /// for the first. REQUIRES: not called from a sink callback (it joins
  /// the thread that runs them).
  void shutdown() override;

 private:
  struct connection;
  using connection_ptr = std::shared_ptr<connection>;
  struct listener {
    int fd;
    std::string address;
  };

  // I/O thread.
  void run();
  int wait_timeout_ms() const;
  void dispatch(std::uint64_t key, std::uint32_t events);
  void on_wake();
  void on_notice(const connection_ptr& c);
  void on_accept_ready(std::size_t index);
  void shed_connection(int listen_fd);
  void adopt(int fd, std::string peer);
  void start_connect(const connection_ptr& c);
  void finish_connect(const connection_ptr& c);
  void on_connected(const connection_ptr& c);
  bool on_readable(const connection_ptr& c);
  std::optional<error> absorb(connection& c, std::span<const std::byte> staged);
  std::optional<error> complete_part(connection& c);
  std::optional<error> start_payload(connection& c);
  /// The slot posted for the reply whose envelope `c` just received.
  std::optional<receive_slot> claim_slot(connection& c);
  void on_writable(const connection_ptr& c);
  void expire_connects();
  void drop(const connection_ptr& c, const error& reason, bool warn);

  // Any thread.
  connection_ptr find(link_id link);
  /// Queues `frame`, writing at once when `write` (or the held bytes pile
  /// up); answers whether it was left queued.
  result<bool> enqueue(link_id link, wire::outbound_frame frame, bool write);
  /// Sends the fast path's replies of this wake-up and tells it the
  /// wake-up ended (I/O thread).
  void end_fast_wakeup();
  /// Queues `frame` on `link`, sent when the wake-up ends (with the
  /// link's other replies); false when the link refused it (I/O thread).
  bool queue_for_wakeup_end(link_id link, wire::outbound_frame frame);
  /// Sends what the relay routed; false when the link it names refused
  /// it (I/O thread).
  bool pass_on(relayed_frame routed);
  /// Marks the link broken after a failed write and lets the I/O thread
  /// report it. REQUIRES: `guard` holds c->send_mutex.
  void fail_locked(std::unique_lock<std::mutex> guard, const connection_ptr& c, const error& failure);
  void notice(const connection_ptr& c);
  void wake() noexcept;
  std::optional<error> flush_locked(connection& c);
  void want_writable_locked(connection& c, bool want);
  void stop();

  const std::uint16_t tag_;
  link_sink& sink_;  // not owned; outlives this transport (constructor contract)
  const transport_limits limits_;
  const tcp_options options_;
  const logger_ptr log_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;

  // Guards links_, listeners_, next_sequence_ and closed_.
  std::mutex mutex_;
  std::unordered_map<link_id, connection_ptr> links_;
  std::vector<listener> listeners_;
  std::uint64_t next_sequence_ = 1;
  bool closed_ = false;

  // Links with something for the I/O thread to do (connect, close,
  // broken). A link is listed at most once (connection::noticed), so the
  // list is bounded by max_links.
  std::mutex notices_mutex_;
  std::vector<connection_ptr> notices_;

  // I/O thread only.
  byte_buffer staging_;
  // A spare descriptor, released to refuse one connection when the process
  // is out of descriptors (else the level-triggered listener spins).
  int reserve_fd_ = -1;
  std::vector<std::pair<std::chrono::steady_clock::time_point, connection_ptr>> connecting_;

  std::mutex allocator_mutex_;
  payload_allocator allocator_;  // guarded by allocator_mutex_

  struct fast_hooks {
    fast_path_fn fast;
    std::function<void()> idle;
    relay_fn relay;
    relay_onward_fn onward;
  };
  std::shared_ptr<const fast_hooks> fast_hooks_;  // guarded by allocator_mutex_
  // I/O thread only: the hooks of this wake-up, the links with fast
  // replies to flush at its end, and whether the fast path took a frame.
  std::shared_ptr<const fast_hooks> fast_now_;
  std::vector<link_id> fast_replied_;
  bool fast_took_ = false;

  std::atomic<bool> stopping_{false};
  std::once_flag shutdown_once_;
  std::thread io_thread_;
};

}  // namespace sluice::transport
