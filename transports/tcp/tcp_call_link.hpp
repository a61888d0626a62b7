// tcp_call_link: one calling thread's own TCP connection to a node, used
// synchronously from that thread: it writes a request and reads frames
// until the answer comes, with no I/O thread and no hand-off between
// threads. A client with no owner on its host sends its synchronous calls
// this way, as a local client sends them on its thread's shm channel; the
// owner's tcp transport answers plain gets and puts of it on its I/O
// thread (its fast path), so a call costs one round trip and no actor.
//
// A resource type: not copyable. One thread receives at a time and one
// sends at a time (they may be two threads: an rpc channel's reader and
// its callers, who take turns); shutdown() may come from any thread, to
// wake and end both.
//
// The socket blocks on reads, with a receive timeout: waiting for an
// answer and taking it is one system call. Writes never block (the
// deadline bounds them).
//
// Receive path: the 24-byte header is checked against the frame limits
// (wire::parse_frame_header) before anything is allocated; the envelope
// words go into their own aligned buffer, the payload into another. Small
// frames arrive through a read-ahead buffer (usually one recv per answer);
// the bytes of a payload larger than it are read straight into the
// payload's buffer.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/memory/buffer.hpp"
#include "runtime/wire/frame.hpp"
#include "sluice/result.hpp"

namespace sluice::transport {

class tcp_call_link {
 public:
  using clock = std::chrono::steady_clock;

  /// Bytes read ahead of the frame being received: one answer of a small
  /// value and its envelope fit.
  static constexpr std::size_t read_ahead_bytes = 16 * 1024;

  /// Connects to `address` ("host:port", numeric or "localhost": never the
  /// resolver, which could block past the deadline) and sends `hello`.
  /// Errors: invalid_argument (the address), unavailable (refused,
  /// unreachable), timeout (not connected by `deadline`).
  static result<std::unique_ptr<tcp_call_link>> open(std::string_view address, const wire::outbound_frame& hello,
                                                     clock::time_point deadline, wire::frame_limits limits = {});
  ~tcp_call_link();
  tcp_call_link(const tcp_call_link&) = delete;
  tcp_call_link& operator=(const tcp_call_link&) = delete;

  /// Writes the whole frame (head, then payload, one sendmsg while the
  /// kernel takes it), waiting for room until `deadline`. Errors:
  /// invalid_argument (the frame does not describe its own sizes),
  /// timeout (part written: the link is then unusable), unavailable.
  result<void> send(const wire::outbound_frame& frame, clock::time_point deadline);

  /// The next whole frame, waiting until `until`; a frame half received
  /// then is kept and finished by the next call. Errors: timeout (nothing
  /// whole by `until`; the link stays usable), unavailable (the peer
  /// closed or the link was shut down), protocol (a malformed frame),
  /// no_capacity (no memory for it).
  result<wire::inbound_frame> receive(clock::time_point until);

  /// False once a send or receive failed for a reason other than a
  /// receive's timeout: the link must be opened again.
  bool usable() const noexcept { return usable_.load(std::memory_order_acquire); }

  /// Ends the connection; a thread waiting in receive() or send() wakes
  /// and fails with unavailable. Any thread, any number of times.
  void shutdown() noexcept;

 private:
  enum class part { header, envelope, payload };

  tcp_call_link(int fd, wire::frame_limits limits);
  /// Moves read-ahead bytes into the frame being received. Returns the
  /// frame once whole.
  result<std::optional<wire::inbound_frame>> absorb();
  /// Finishes the current part; the frame when it was the last.
  result<std::optional<wire::inbound_frame>> complete_part();
  /// Reads what the socket has, waiting until `until` for the first byte.
  /// Returns false when nothing came by then.
  result<bool> fill(clock::time_point until);
  /// Makes a blocking read wait at most about `left` (the socket's
  /// receive timeout, changed only when it must be shorter, or when it
  /// can go back to receive_slice).
  result<void> limit_read_wait(clock::duration left);
  /// Waits for `events` on the socket until `until`; false on timeout.
  result<bool> wait_for(short events, clock::time_point until);
  error broken(error why);

  const int fd_;
  const wire::frame_limits limits_;
  std::atomic<bool> usable_{true};
  /// The socket's receive timeout now (reads block: one system call waits
  /// for an answer and takes it).
  clock::duration read_wait_{};

  byte_buffer ahead_;
  std::size_t ahead_begin_ = 0;
  std::size_t ahead_end_ = 0;

  part at_ = part::header;
  std::size_t filled_ = 0;  // bytes of the current part received
  wire::header_bytes header_{};
  wire::frame_header parsed_{};
  byte_buffer envelope_;
  byte_buffer payload_;
};

}  // namespace sluice::transport
