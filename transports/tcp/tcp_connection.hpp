// Private to the tcp transport: one link's state and helpers shared by
// the API side (tcp_transport.cpp) and the I/O thread (tcp_io.cpp).
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>

#include "transports/tcp/tcp_address.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace sluice::transport {
namespace tcp_detail {


// epoll keys: the wake eventfd is 0; a listener is listener_key_bit plus
// its index; a link is its sequence number (below 2^48 and never 0).
constexpr std::uint64_t wake_key = 0;
constexpr std::uint64_t listener_key_bit = std::uint64_t{1} << 63;
constexpr std::uint64_t sequence_mask = (std::uint64_t{1} << link_tag_shift) - 1;
// Events taken from one epoll_wait.
constexpr int events_per_wait_max = 256;
// Connections accepted per listener wakeup before other sockets get a turn.
constexpr int accepts_per_wakeup_max = 64;
// iovecs per sendmsg when flushing a queue (Linux allows 1024).
constexpr std::size_t send_iovecs_max = 64;
// Pending connections the kernel holds for a listener.
constexpr int listen_backlog = 512;

inline std::uint64_t key_of(link_id id) noexcept { return id & sequence_mask; }

inline std::string system_text(int code) {
  char buffer[128];
  return ::strerror_r(code, buffer, sizeof buffer);  // GNU variant: returns the text
}

inline int epoll_set(int epoll_fd, int op, int fd, std::uint32_t events, std::uint64_t key) noexcept {
  epoll_event event{};
  event.events = events;
  event.data.u64 = key;
  return ::epoll_ctl(epoll_fd, op, fd, &event);
}

inline void set_no_delay(int fd) noexcept {
  int one = 1;
  // Frames are whole messages; Nagle would only add latency to them.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

inline error connect_error(const std::string& peer, int code) {
  if (code == ECONNREFUSED) {
    return error{errc::unavailable, "connection to " + peer + " refused; is a node listening there?"};
  }
  return error{errc::unavailable, "connection to " + peer + " failed: " + system_text(code)};
}

// A frame must describe its own sizes, or the byte stream desynchronises
// and the peer sees garbage. The receiver applies its own limits.
inline std::optional<error> check_frame(const wire::outbound_frame& frame) {
  if (frame.head.size() < wire::frame_header_bytes) {
    return error{errc::invalid_argument, "frame head of " + std::to_string(frame.head.size()) +
                                             " bytes is shorter than the frame header"};
  }
  constexpr auto any = std::numeric_limits<std::uint64_t>::max();
  auto header = wire::parse_frame_header(frame.head.span().first<wire::frame_header_bytes>(),
                                         wire::frame_limits{any, any});
  if (!header) return error{errc::invalid_argument, "cannot send a malformed frame: " + header.error().message()};
  if (frame.head.size() != wire::frame_header_bytes + header->envelope_bytes ||
      frame.payload.size() != header->payload_bytes) {
    return error{errc::invalid_argument, "frame header does not match the frame's envelope and payload sizes"};
  }
  return std::nullopt;
}

inline std::optional<byte_buffer> try_allocate(std::size_t size) {
  try {
    return byte_buffer::allocate(size);
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
}

}  // namespace tcp_detail

// One link. The send side is shared by send() callers and the I/O thread
// and guarded by send_mutex; the receive side belongs to the I/O thread.
struct tcp_transport::connection {
  enum class state { connecting, up, closing, broken, closed };
  enum class part { header, envelope, payload };
  struct queued_frame {
    wire::outbound_frame frame;
    std::size_t sent = 0;  // bytes of the frame already written
  };

  link_id id = 0;
  std::string peer;

  // Guarded by send_mutex. Only the I/O thread writes fd, so it may read
  // fd without the lock; senders use it only under the lock while `up`.
  std::mutex send_mutex;
  state st = state::connecting;
  int fd = -1;
  std::deque<queued_frame> queue;
  std::uint64_t queued_bytes = 0;  // unsent bytes in queue
  bool writable_armed = false;     // EPOLLOUT in the interest set
  std::optional<error> failure;    // set with st == broken

  bool noticed = false;  // guarded by tcp_transport::notices_mutex_

  // Posted receives (expect_payload): reply request id → where its payload
  // goes. Any thread posts and withdraws; the I/O thread claims.
  std::mutex slots_mutex;
  std::unordered_map<std::uint64_t, receive_slot> slots;  // guarded by slots_mutex

  // I/O thread only.
  std::optional<socket_address> target;  // outbound links
  bool connect_started = false;
  bool awaiting_connect = false;
  bool gone = false;  // dropped and reported
  bool first_frame_in = false;  // the link's first frame (its hello) arrived
  bool fast_offered = false;    // its hello was a client's: frames go to the fast path first
  part at = part::header;
  std::size_t filled = 0;  // bytes of the current part received
  wire::header_bytes header{};
  wire::frame_header parsed{};
  byte_buffer envelope;
  byte_buffer payload;
  // Where the current payload lands instead of `payload`: a posted or
  // allocated region of the receiver's memory.
  std::optional<receive_slot> payload_slot;

  // Where the next received bytes of the current part go.
  std::span<std::byte> room() noexcept {
    switch (at) {
      case part::header: return std::span<std::byte>{header}.subspan(filled);
      case part::envelope: return envelope.span().subspan(filled);
      case part::payload:
        return payload_slot ? payload_slot->bytes.subspan(filled) : payload.span().subspan(filled);
    }
    return {};
  }
  bool mid_frame() const noexcept { return at != part::header || filled != 0; }

  // Why the link must go down, when close() or send() decided it should.
  // REQUIRES: send_mutex held.
  std::optional<error> pending_failure_locked() const {
    if (st == state::closing) return error{errc::aborted, "closed locally"};
    if (st == state::broken) return failure;
    return std::nullopt;
  }
};

}  // namespace sluice::transport
