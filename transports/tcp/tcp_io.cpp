// The tcp transport's I/O thread: epoll, accepting, connecting, reading
// frames and flushing queues.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>

#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/tcp/tcp_connection.hpp"

namespace sluice::transport {

using namespace tcp_detail;

void tcp_transport::run() {
  std::vector<epoll_event> events(events_per_wait_max);
  while (!stopping_.load(std::memory_order_acquire)) {
    int ready = ::epoll_wait(epoll_fd_, events.data(), events_per_wait_max, wait_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      log_->error("epoll_wait failed: {}; the tcp transport stops serving its links", system_text(errno));
      return;
    }
    {
      std::lock_guard guard{allocator_mutex_};
      fast_now_ = fast_hooks_;
    }
    for (int i = 0; i < ready && !stopping_.load(std::memory_order_acquire); ++i) {
      dispatch(events[i].data.u64, events[i].events);
    }
    // Every frame this wake-up read goes to the sink's actor as one batch,
    // and the fast path's replies go out together.
    sink_.end_of_frames();
    end_fast_wakeup();
    expire_connects();
  }
}

void tcp_transport::end_fast_wakeup() {
  for (auto link : fast_replied_) flush(link);
  fast_replied_.clear();
  if (fast_took_ && fast_now_ && fast_now_->idle) fast_now_->idle();
  fast_took_ = false;
}

bool tcp_transport::queue_for_wakeup_end(link_id link, wire::outbound_frame frame) {
  auto held = enqueue(link, std::move(frame), false);
  if (!held) return false;
  if (*held && (fast_replied_.empty() || fast_replied_.back() != link)) fast_replied_.push_back(link);
  return true;
}

bool tcp_transport::pass_on(relayed_frame routed) {
  if (routed.to == 0) return true;
  if (link_tag(routed.to) == tag_) return queue_for_wakeup_end(routed.to, std::move(routed.frame));
  return fast_now_->onward && fast_now_->onward(routed.to, std::move(routed.frame));
}

int tcp_transport::wait_timeout_ms() const {
  if (connecting_.empty()) return -1;
  auto earliest = connecting_.front().first;
  for (const auto& entry : connecting_) earliest = std::min(earliest, entry.first);
  auto left = earliest - std::chrono::steady_clock::now();
  if (left <= std::chrono::steady_clock::duration::zero()) return 0;
  // Round up so the loop wakes after the deadline, not just before it.
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count() + 1;
  return static_cast<int>(std::min<std::int64_t>(ms, std::numeric_limits<int>::max()));
}

void tcp_transport::dispatch(std::uint64_t key, std::uint32_t events) {
  if (key == wake_key) {
    on_wake();
    return;
  }
  if ((key & listener_key_bit) != 0) {
    on_accept_ready(static_cast<std::size_t>(key & ~listener_key_bit));
    return;
  }
  auto c = find(make_link_id(tag_, key));
  if (!c) return;  // dropped earlier in this batch
  if (c->awaiting_connect) {
    finish_connect(c);
    return;
  }
  if ((events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && !on_readable(c)) return;
  if ((events & EPOLLOUT) != 0) on_writable(c);
}

void tcp_transport::on_wake() {
  std::uint64_t count = 0;
  [[maybe_unused]] auto got = ::read(wake_fd_, &count, sizeof count);
  std::vector<connection_ptr> work;
  {
    std::lock_guard guard{notices_mutex_};
    work.swap(notices_);
    for (auto& c : work) c->noticed = false;
  }
  for (auto& c : work) {
    if (!c->gone) on_notice(c);
  }
}

void tcp_transport::on_notice(const connection_ptr& c) {
  std::optional<error> failure;
  bool connect_now = false;
  {
    std::lock_guard guard{c->send_mutex};
    failure = c->pending_failure_locked();
    connect_now = c->st == connection::state::connecting && !c->connect_started;
  }
  if (failure) {
    drop(c, *failure, false);
  } else if (connect_now) {
    start_connect(c);
  }
}

void tcp_transport::on_accept_ready(std::size_t index) {
  int listen_fd = -1;
  {
    std::lock_guard guard{mutex_};
    if (index >= listeners_.size()) return;
    listen_fd = listeners_[index].fd;
  }
  for (int i = 0; i < accepts_per_wakeup_max; ++i) {
    sockaddr_storage from{};
    socklen_t length = sizeof from;
    int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&from), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        shed_connection(listen_fd);
      } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
        log_->warn("accept failed: {}", system_text(errno));
      }
      return;
    }
    adopt(fd, format_address(from));
  }
}

// Out of descriptors: accept the pending connection with the spare one
// and close it at once, so the peer hears a refusal instead of waiting.
void tcp_transport::shed_connection(int listen_fd) {
  log_->warn("refusing a connection: the process is out of file descriptors");
  if (reserve_fd_ < 0) return;
  ::close(reserve_fd_);
  int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) ::close(fd);
  reserve_fd_ = ::eventfd(0, EFD_CLOEXEC);
}

void tcp_transport::adopt(int fd, std::string peer) {
  set_no_delay(fd);
  auto c = std::make_shared<connection>();
  c->peer = std::move(peer);
  c->st = connection::state::up;
  c->fd = fd;
  {
    std::unique_lock guard{mutex_};
    if (links_.size() >= options_.max_links) {
      guard.unlock();
      log_->warn("refusing the connection from {}: {} links are open (tcp max_links)", c->peer, options_.max_links);
      ::close(fd);
      return;
    }
    SLUICE_ASSERT(next_sequence_ <= sequence_mask);
    c->id = make_link_id(tag_, next_sequence_++);
    links_.emplace(c->id, c);
  }
  if (epoll_set(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN, key_of(c->id)) != 0) {
    drop(c, error{errc::internal, "cannot watch the connection from " + c->peer + ": " + system_text(errno)}, true);
    return;
  }
  log_->debug("accepted link {:#x} from {}", c->id, c->peer);
  sink_.on_link_up(c->id, c->peer);
}

void tcp_transport::start_connect(const connection_ptr& c) {
  c->connect_started = true;
  const socket_address& to = *c->target;
  int fd = ::socket(to.address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    drop(c, connect_error(c->peer, errno), false);
    return;
  }
  set_no_delay(fd);
  {
    std::lock_guard guard{c->send_mutex};
    c->fd = fd;
  }
  // Completion (or refusal) shows up as EPOLLOUT / EPOLLERR, even when
  // connect() finishes at once.
  if (::connect(fd, to.raw(), to.length) != 0 && errno != EINPROGRESS) {
    drop(c, connect_error(c->peer, errno), false);
    return;
  }
  if (epoll_set(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLOUT, key_of(c->id)) != 0) {
    drop(c, error{errc::internal, "cannot watch the connection to " + c->peer + ": " + system_text(errno)}, true);
    return;
  }
  c->awaiting_connect = true;
  connecting_.emplace_back(std::chrono::steady_clock::now() + options_.connect_timeout, c);
}

void tcp_transport::finish_connect(const connection_ptr& c) {
  int code = 0;
  socklen_t length = sizeof code;
  if (::getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &code, &length) != 0) code = errno;
  if (code != 0) {
    drop(c, connect_error(c->peer, code), false);
    return;
  }
  c->awaiting_connect = false;
  std::erase_if(connecting_, [&c](const auto& entry) { return entry.second == c; });
  on_connected(c);
}

void tcp_transport::on_connected(const connection_ptr& c) {
  std::optional<error> failure;
  {
    std::lock_guard guard{c->send_mutex};
    failure = c->pending_failure_locked();
    if (!failure) {
      // The interest set watched only EPOLLOUT for the connect; now read,
      // and watch writability again only if queued frames remain.
      int changed = epoll_set(epoll_fd_, EPOLL_CTL_MOD, c->fd, EPOLLIN, key_of(c->id));
      SLUICE_ASSERT(changed == 0);
      c->writable_armed = false;
      c->st = connection::state::up;
      failure = flush_locked(*c);
    }
  }
  if (failure) {
    drop(c, *failure, false);
    return;
  }
  log_->debug("link {:#x} to {} is up", c->id, c->peer);
  sink_.on_link_up(c->id, c->peer);
}

// Reads what the socket holds, up to the per-wakeup budget, and delivers
// complete frames. Returns false when the link was dropped.
bool tcp_transport::on_readable(const connection_ptr& c) {
  std::size_t budget = options_.read_bytes_per_wakeup_max;
  while (budget > 0) {
    // The current part's room first (bulk payload bytes land in place),
    // then read-ahead into staging (small frames cost few syscalls).
    auto room = c->room();
    std::array<iovec, 2> iov{{{room.data(), room.size()}, {staging_.data(), staging_.size()}}};
    ssize_t got = ::readv(c->fd, iov.data(), static_cast<int>(iov.size()));
    if (got < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      drop(c, error{errc::unavailable, "connection to " + c->peer + " lost: " + system_text(errno)}, false);
      return false;
    }
    if (got == 0) {
      std::string what = "peer " + c->peer + " closed the connection";
      drop(c, error{errc::unavailable, c->mid_frame() ? what + " mid-frame" : what}, false);
      return false;
    }
    auto bytes = static_cast<std::size_t>(got);
    budget -= std::min(budget, bytes);
    std::size_t direct = std::min(bytes, room.size());
    c->filled += direct;
    if (auto failure = absorb(*c, std::span<const std::byte>{staging_.data(), bytes - direct})) {
      drop(c, *failure, true);
      return false;
    }
    // A short read took what the socket had: another would only answer
    // EAGAIN (a system call per request of a client that waits for each
    // answer). The epoll is level-triggered: bytes that came meanwhile
    // wake the next wait.
    if (bytes < room.size() + staging_.size()) return true;
  }
  return true;
}

// Moves staged bytes into the frame being received, completing parts as
// they fill. Ends because every pass consumes staged bytes or completes a
// part, and every part needs at least one byte. Leaves staging empty.
std::optional<error> tcp_transport::absorb(connection& c, std::span<const std::byte> staged) {
  for (;;) {
    auto room = c.room();
    if (room.empty()) {
      if (auto failure = complete_part(c)) return failure;
      continue;
    }
    if (staged.empty()) return std::nullopt;
    std::size_t n = std::min(room.size(), staged.size());
    std::memcpy(room.data(), staged.data(), n);
    c.filled += n;
    staged = staged.subspan(n);
  }
}

std::optional<error> tcp_transport::complete_part(connection& c) {
  using part = connection::part;
  if (c.at == part::header) {
    // The limits are checked before a single byte is allocated.
    auto header = wire::parse_frame_header(c.header, limits_.frame);
    if (!header) return header.error();
    c.parsed = *header;
    auto envelope = try_allocate(c.parsed.envelope_bytes);
    if (!envelope) return error{errc::no_capacity, "out of memory for a frame envelope from " + c.peer};
    c.envelope = std::move(*envelope);
    c.at = part::envelope;
    c.filled = 0;
    return std::nullopt;
  }
  if (c.at == part::envelope && c.parsed.payload_bytes != 0) return start_payload(c);
  shared_bytes payload;
  if (c.payload_slot) {
    payload = c.payload_slot->frozen();
  } else if (c.parsed.payload_bytes != 0) {
    payload = std::move(c.payload).freeze();
  }
  wire::inbound_frame frame{std::move(c.envelope).freeze(), std::move(payload)};
  c.envelope = byte_buffer{};
  c.payload = byte_buffer{};
  c.payload_slot.reset();
  c.at = part::header;
  c.filled = 0;
  std::optional<wire::message> decoded;
  bool hooked = fast_now_ && (fast_now_->fast || fast_now_->relay);
  if (!c.first_frame_in && hooked) {
    // The hello: decoded here once, to learn whether the link is a client's.
    if (auto hello = wire::decode(std::move(frame)); hello) {
      c.fast_offered = offers_fast_path(*hello);
      decoded = std::move(*hello);
    } else {
      c.first_frame_in = true;
      return std::move(hello).error();
    }
  } else if (c.fast_offered && hooked) {
    if (fast_now_->relay) {
      if (auto routed = fast_now_->relay(c.id, frame); routed && pass_on(std::move(*routed))) return std::nullopt;
    }
    auto taken = fast_now_->fast ? fast_now_->fast(c.id, frame, decoded) : std::nullopt;
    if (taken) {
      fast_took_ = true;
      if (taken->reply) (void)queue_for_wakeup_end(c.id, std::move(*taken->reply));
      return std::nullopt;
    }
  }
  c.first_frame_in = true;
  // A frame the fast path decoded and left goes on decoded.
  auto accepted = decoded ? sink_.on_message_held(c.id, std::move(*decoded)) : sink_.on_frame_held(c.id, std::move(frame));
  if (!accepted) return accepted.error();
  return std::nullopt;
}

// Picks where the payload goes: the slot posted for this reply, else the
// allocator's region, else a buffer of our own.
std::optional<error> tcp_transport::start_payload(connection& c) {
  auto bytes = c.parsed.payload_bytes;
  c.payload_slot = claim_slot(c);
  if (!c.payload_slot) {
    payload_allocator allocate;
    {
      std::lock_guard guard{allocator_mutex_};
      allocate = allocator_;
    }
    if (allocate) {
      auto slot = allocate(bytes);
      if (slot && slot->bytes.size() == bytes) c.payload_slot = std::move(slot);
    }
  }
  if (!c.payload_slot) {
    auto payload = try_allocate(static_cast<std::size_t>(bytes));
    if (!payload) {
      return error{errc::no_capacity,
                   "out of memory for a payload of " + std::to_string(bytes) + " bytes from " + c.peer};
    }
    c.payload = std::move(*payload);
  }
  c.at = connection::part::payload;
  c.filled = 0;
  return std::nullopt;
}

std::optional<receive_slot> tcp_transport::claim_slot(connection& c) {
  std::lock_guard guard{c.slots_mutex};
  if (c.slots.empty()) return std::nullopt;
  auto reply_to = wire::peek_reply_to(c.envelope.span());
  if (!reply_to || *reply_to == 0) return std::nullopt;
  auto it = c.slots.find(*reply_to);
  if (it == c.slots.end()) return std::nullopt;
  auto slot = std::move(it->second);
  c.slots.erase(it);
  // A payload of another size than asked for goes to a buffer of its own;
  // whoever posted the slot sees the mismatch and refuses the reply.
  if (slot.bytes.size() != c.parsed.payload_bytes) return std::nullopt;
  return slot;
}

void tcp_transport::on_writable(const connection_ptr& c) {
  std::optional<error> failure;
  {
    std::lock_guard guard{c->send_mutex};
    if (c->st != connection::state::up) {
      // A close or failure is pending (its notice drops the link); stop
      // watching writability so the level-triggered loop does not spin.
      want_writable_locked(*c, false);
      return;
    }
    failure = flush_locked(*c);
  }
  if (failure) drop(c, *failure, false);
}

void tcp_transport::expire_connects() {
  if (connecting_.empty()) return;
  auto now = std::chrono::steady_clock::now();
  std::vector<connection_ptr> expired;
  for (const auto& [deadline, c] : connecting_) {
    if (deadline <= now) expired.push_back(c);
  }
  for (const auto& c : expired) {
    drop(c, error{errc::timeout, "connection to " + c->peer + " did not complete within " +
                                     std::to_string(options_.connect_timeout.count()) + " ms"},
         false);
  }
}

void tcp_transport::drop(const connection_ptr& c, const error& reason, bool warn) {
  if (warn) {
    log_->warn("closing link {:#x} with {}: {}", c->id, c->peer, reason.to_string());
  } else {
    log_->debug("link {:#x} with {} is down: {}", c->id, c->peer, reason.to_string());
  }
  {
    std::lock_guard guard{mutex_};
    links_.erase(c->id);
  }
  std::erase_if(connecting_, [&c](const auto& entry) { return entry.second == c; });
  {
    std::lock_guard guard{c->send_mutex};
    c->st = connection::state::closed;
    if (c->fd >= 0) {
      ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
      ::close(c->fd);
    }
    c->fd = -1;
    c->queue.clear();
    c->queued_bytes = 0;
  }
  {
    std::lock_guard guard{c->slots_mutex};
    c->slots.clear();
  }
  c->gone = true;
  c->envelope = byte_buffer{};
  c->payload = byte_buffer{};
  c->payload_slot.reset();
  sink_.on_link_down(c->id, reason);
}

}  // namespace sluice::transport
