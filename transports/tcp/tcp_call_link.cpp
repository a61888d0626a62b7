#include "transports/tcp/tcp_call_link.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "runtime/assert.hpp"
#include "transports/tcp/tcp_address.hpp"
#include "transports/tcp/tcp_connection.hpp"

namespace sluice::transport {
namespace {

using tcp_detail::system_text;
using tcp_detail::try_allocate;

/// Longest a blocking read waits before it looks at the deadline again.
constexpr std::chrono::milliseconds receive_slice{20};
/// How much later than asked a read may end (a receive timeout is set
/// again only when it is more than this too long).
constexpr std::chrono::milliseconds receive_slack{1};

int poll_ms(tcp_call_link::clock::time_point until) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(until - tcp_call_link::clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 60'000));
}

}  // namespace

result<std::unique_ptr<tcp_call_link>> tcp_call_link::open(std::string_view address, const wire::outbound_frame& hello,
                                                           clock::time_point deadline, wire::frame_limits limits) {
  auto where = split_host_port(address);
  auto to = where ? numeric_address(*where) : std::nullopt;
  if (!to) return fail(errc::invalid_argument, "'" + std::string{address} + "' is not a numeric host:port");
  int fd = ::socket(to->address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(errc::unavailable, "no socket: " + system_text(errno));
  // Owned from here on: the link closes it.
  std::unique_ptr<tcp_call_link> link{new tcp_call_link{fd, limits}};
  tcp_detail::set_no_delay(fd);
  if (::connect(fd, to->raw(), to->length) != 0) {
    if (errno != EINPROGRESS) return fail(errc::unavailable, "cannot connect to " + std::string{address} + ": " + system_text(errno));
    auto ready = link->wait_for(POLLOUT, deadline);
    if (!ready) return std::move(ready).error();
    if (!*ready) return fail(errc::timeout, "no connection to " + std::string{address} + " before the deadline");
    int code = 0;
    socklen_t length = sizeof code;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length);
    if (code != 0) return fail(errc::unavailable, "cannot connect to " + std::string{address} + ": " + system_text(code));
  }
  // Connected: reads block from now on (limit_read_wait bounds them).
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    return fail(errc::unavailable, "cannot make the socket blocking: " + system_text(errno));
  }
  if (auto sent = link->send(hello, deadline); !sent) return std::move(sent).error();
  return link;
}

tcp_call_link::tcp_call_link(int fd, wire::frame_limits limits)
    : fd_(fd), limits_(limits), ahead_(byte_buffer::allocate(read_ahead_bytes)) {
  SLUICE_ASSERT(fd_ >= 0);
}

tcp_call_link::~tcp_call_link() { ::close(fd_); }

void tcp_call_link::shutdown() noexcept { ::shutdown(fd_, SHUT_RDWR); }

error tcp_call_link::broken(error why) {
  usable_.store(false, std::memory_order_release);
  return why;
}

result<bool> tcp_call_link::wait_for(short events, clock::time_point until) {
  while (true) {
    pollfd p{fd_, events, 0};
    int n = ::poll(&p, 1, poll_ms(until));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return broken(error{errc::unavailable, "poll failed: " + system_text(errno)});
    if (n > 0) return true;
    if (clock::now() >= until) return false;
  }
}

result<void> tcp_call_link::send(const wire::outbound_frame& frame, clock::time_point deadline) {
  if (!usable()) return fail(errc::unavailable, "the tcp link is closed");
  if (auto bad = tcp_detail::check_frame(frame)) return *bad;
  std::size_t sent = 0;
  while (sent < frame.size()) {
    iovec parts[2];
    int count = 0;
    if (sent < frame.head.size()) {
      parts[count++] = {const_cast<std::byte*>(frame.head.data()) + sent, frame.head.size() - sent};
    }
    if (!frame.payload.empty()) {
      auto from = sent > frame.head.size() ? sent - frame.head.size() : 0;
      parts[count++] = {const_cast<std::byte*>(frame.payload.data()) + from, frame.payload.size() - from};
    }
    msghdr msg{};
    msg.msg_iov = parts;
    msg.msg_iovlen = static_cast<std::size_t>(count);
    auto n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return broken(error{errc::unavailable, "the tcp link broke: " + system_text(errno)});
    }
    auto room = wait_for(POLLOUT, deadline);
    if (!room) return std::move(room).error();
    if (!*room) {
      // Part of the frame is on the wire: the stream cannot carry another.
      if (sent > 0) return broken(error{errc::timeout, "the peer took no more of the frame before the deadline"});
      return fail(errc::timeout, "the peer took none of the frame before the deadline");
    }
  }
  return {};
}

result<wire::inbound_frame> tcp_call_link::receive(clock::time_point until) {
  if (!usable()) return fail(errc::unavailable, "the tcp link is closed");
  while (true) {
    auto whole = absorb();
    if (!whole) return broken(std::move(whole).error());
    if (*whole) return std::move(**whole);
    auto more = fill(until);
    if (!more) return std::move(more).error();
    if (!*more) return fail(errc::timeout, "no whole frame before the deadline");
  }
}

result<std::optional<wire::inbound_frame>> tcp_call_link::absorb() {
  while (true) {
    std::span<std::byte> room;
    switch (at_) {
      case part::header: room = std::span<std::byte>{header_}.subspan(filled_); break;
      case part::envelope: room = envelope_.span().subspan(filled_); break;
      case part::payload: room = payload_.span().subspan(filled_); break;
    }
    if (room.empty()) {
      auto done = complete_part();
      if (!done || *done) return done;
      continue;
    }
    if (ahead_begin_ == ahead_end_) return std::optional<wire::inbound_frame>{};
    auto n = std::min(room.size(), ahead_end_ - ahead_begin_);
    std::memcpy(room.data(), ahead_.data() + ahead_begin_, n);
    ahead_begin_ += n;
    filled_ += n;
  }
}

result<std::optional<wire::inbound_frame>> tcp_call_link::complete_part() {
  if (at_ == part::header) {
    // The limits are checked before a single byte is allocated.
    auto parsed = wire::parse_frame_header(header_, limits_);
    if (!parsed) return std::move(parsed).error();
    parsed_ = *parsed;
    auto envelope = try_allocate(parsed_.envelope_bytes);
    if (!envelope) return fail(errc::no_capacity, "out of memory for a frame's envelope");
    envelope_ = std::move(*envelope);
    at_ = part::envelope;
    filled_ = 0;
    return std::optional<wire::inbound_frame>{};
  }
  if (at_ == part::envelope && parsed_.payload_bytes != 0) {
    auto payload = try_allocate(parsed_.payload_bytes);
    if (!payload) return fail(errc::no_capacity, "out of memory for a frame's payload");
    payload_ = std::move(*payload);
    at_ = part::payload;
    filled_ = 0;
    return std::optional<wire::inbound_frame>{};
  }
  wire::inbound_frame frame{std::move(envelope_).freeze(), {}};
  if (at_ == part::payload) frame.payload = std::move(payload_).freeze();
  envelope_ = byte_buffer{};
  payload_ = byte_buffer{};
  at_ = part::header;
  filled_ = 0;
  return std::optional<wire::inbound_frame>{std::move(frame)};
}

result<bool> tcp_call_link::fill(clock::time_point until) {
  SLUICE_ASSERT(ahead_begin_ == ahead_end_);
  ahead_begin_ = ahead_end_ = 0;
  // A payload's bytes past the read-ahead go straight where they belong.
  bool straight = at_ == part::payload && payload_.size() - filled_ >= read_ahead_bytes;
  auto into = straight ? payload_.span().subspan(filled_) : ahead_.span();
  while (true) {
    auto left = until - clock::now();
    if (left <= clock::duration::zero()) return false;
    if (auto limited = limit_read_wait(left); !limited) return std::move(limited).error();
    auto n = ::recv(fd_, into.data(), into.size(), 0);
    if (n > 0) {
      if (straight) filled_ += static_cast<std::size_t>(n);
      else ahead_end_ = static_cast<std::size_t>(n);
      return true;
    }
    if (n == 0) return broken(error{errc::unavailable, "the peer closed the tcp link"});
    if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;  // the deadline decides
    return broken(error{errc::unavailable, "the tcp link broke: " + system_text(errno)});
  }
}

result<void> tcp_call_link::limit_read_wait(clock::duration left) {
  auto want = std::min<clock::duration>(left, receive_slice);
  bool too_long = want + receive_slack < read_wait_ || read_wait_ == clock::duration::zero();
  bool may_grow = want == receive_slice && read_wait_ != want;
  if (!too_long && !may_grow) return {};
  // At least a microsecond: a timeout of zero would mean none.
  auto us = std::max<std::int64_t>(std::chrono::ceil<std::chrono::microseconds>(want).count(), 1);
  timeval tv{static_cast<time_t>(us / 1'000'000), static_cast<suseconds_t>(us % 1'000'000)};
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
    // A read without a timeout could outlast the deadline.
    return broken(error{errc::unavailable, "cannot bound a read's wait: " + system_text(errno)});
  }
  read_wait_ = std::chrono::microseconds{us};
  return {};
}

}  // namespace sluice::transport
