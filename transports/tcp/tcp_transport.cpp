#include "transports/tcp/tcp_transport.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <new>
#include <system_error>

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "transports/tcp/tcp_address.hpp"

namespace sluice::transport {
namespace {

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

std::uint64_t key_of(link_id id) noexcept { return id & sequence_mask; }

std::string system_text(int code) {
  char buffer[128];
  return ::strerror_r(code, buffer, sizeof buffer);  // GNU variant: returns the text
}

int epoll_set(int epoll_fd, int op, int fd, std::uint32_t events, std::uint64_t key) noexcept {
  epoll_event event{};
  event.events = events;
  event.data.u64 = key;
  return ::epoll_ctl(epoll_fd, op, fd, &event);
}

void set_no_delay(int fd) noexcept {
  int one = 1;
  // Frames are whole messages; Nagle would only add latency to them.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

error connect_error(const std::string& peer, int code) {
  if (code == ECONNREFUSED) {
    return error{errc::unavailable, "connection to " + peer + " refused; is a node listening there?"};
  }
  return error{errc::unavailable, "connection to " + peer + " failed: " + system_text(code)};
}

// A frame must describe its own sizes, or the byte stream desynchronises
// and the peer sees garbage. The receiver applies its own limits.
std::optional<error> check_frame(const wire::outbound_frame& frame) {
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

std::optional<byte_buffer> try_allocate(std::size_t size) {
  try {
    return byte_buffer::allocate(size);
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
}

}  // namespace

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

  // I/O thread only.
  std::optional<socket_address> target;  // outbound links
  bool connect_started = false;
  bool awaiting_connect = false;
  bool gone = false;  // dropped and reported
  part at = part::header;
  std::size_t filled = 0;  // bytes of the current part received
  wire::header_bytes header{};
  wire::frame_header parsed{};
  byte_buffer envelope;
  byte_buffer payload;

  // Where the next received bytes of the current part go.
  std::span<std::byte> room() noexcept {
    switch (at) {
      case part::header: return std::span<std::byte>{header}.subspan(filled);
      case part::envelope: return envelope.span().subspan(filled);
      case part::payload: return payload.span().subspan(filled);
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

tcp_transport::tcp_transport(std::uint16_t tag, link_sink& sink, transport_limits limits,
                             tcp_options options)
    : tag_(tag), sink_(sink), limits_(limits), options_(options), log_(get_logger("tcp")) {
  SLUICE_ASSERT(options_.staging_bytes > 0);
  SLUICE_ASSERT(options_.read_bytes_per_wakeup_max > 0);
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::system_error(errno, std::generic_category(), "tcp: epoll_create1");
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0 || epoll_set(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, EPOLLIN, wake_key) != 0) {
    int code = errno;
    if (wake_fd_ >= 0) ::close(wake_fd_);
    ::close(epoll_fd_);
    throw std::system_error(code, std::generic_category(), "tcp: eventfd");
  }
  staging_ = byte_buffer::allocate(options_.staging_bytes);
  reserve_fd_ = ::eventfd(0, EFD_CLOEXEC);
  try {
    io_thread_ = std::thread([this] { run(); });
  } catch (...) {
    if (reserve_fd_ >= 0) ::close(reserve_fd_);
    ::close(wake_fd_);
    ::close(epoll_fd_);
    throw;
  }
}

tcp_transport::~tcp_transport() {
  shutdown();
  if (reserve_fd_ >= 0) ::close(reserve_fd_);
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

result<std::string> tcp_transport::listen(std::string_view address) {
  auto at = resolve(address);
  if (!at) return std::move(at).error();
  int fd = ::socket(at->address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return fail(errc::unavailable, "cannot listen on " + std::string{address} + ": " + system_text(errno));
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_storage bound{};
  socklen_t bound_length = sizeof bound;
  if (::bind(fd, at->raw(), at->length) != 0 || ::listen(fd, listen_backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
    int code = errno;
    ::close(fd);
    return fail(errc::unavailable, "cannot listen on " + std::string{address} + ": " + system_text(code));
  }
  std::string name = format_address(bound);
  {
    std::lock_guard guard{mutex_};
    std::optional<error> refused;
    if (closed_) {
      refused = error{errc::unavailable, "the tcp transport is shut down"};
    } else if (listeners_.size() >= options_.max_listeners) {
      refused = error{errc::overloaded, "cannot listen on " + name + ": " +
                                            std::to_string(options_.max_listeners) +
                                            " listeners are open (tcp max_listeners)"};
    } else if (epoll_set(epoll_fd_, EPOLL_CTL_ADD, fd, EPOLLIN, listener_key_bit | listeners_.size()) != 0) {
      refused = error{errc::internal, "cannot watch the listener on " + name + ": " + system_text(errno)};
    }
    if (refused) {
      ::close(fd);
      return *refused;
    }
    listeners_.push_back(listener{fd, name});
  }
  log_->debug("listening on {}", name);
  return name;
}

result<link_id> tcp_transport::connect(std::string_view address) {
  auto target = resolve(address);
  if (!target) return std::move(target).error();
  auto c = std::make_shared<connection>();
  c->peer = std::string{address};
  c->target = *target;
  {
    std::lock_guard guard{mutex_};
    if (closed_) return fail(errc::unavailable, "the tcp transport is shut down");
    if (links_.size() >= options_.max_links) {
      return fail(errc::overloaded, "cannot open a link to " + c->peer + ": " +
                                        std::to_string(options_.max_links) + " links are open (tcp max_links)");
    }
    SLUICE_ASSERT(next_sequence_ <= sequence_mask);
    c->id = make_link_id(tag_, next_sequence_++);
    links_.emplace(c->id, c);
  }
  notice(c);  // the I/O thread opens the socket
  return c->id;
}

result<void> tcp_transport::send(link_id link, wire::outbound_frame frame) {
  if (auto bad = check_frame(frame)) return *bad;
  auto c = find(link);
  if (!c) return fail(errc::unavailable, fmt::format("tcp link {:#x} is not open", link));
  std::unique_lock guard{c->send_mutex};
  if (c->st != connection::state::connecting && c->st != connection::state::up) {
    return fail(errc::unavailable, "the tcp link to " + c->peer + " is down");
  }
  if (c->queued_bytes + frame.size() > limits_.max_queued_bytes) {
    return fail(errc::overloaded, "the send queue to " + c->peer + " is full (" +
                                      std::to_string(c->queued_bytes) + " bytes queued, limit " +
                                      std::to_string(limits_.max_queued_bytes) + "); the peer reads too slowly");
  }
  bool write_now = c->st == connection::state::up && c->queue.empty();
  c->queued_bytes += frame.size();
  c->queue.push_back(connection::queued_frame{std::move(frame), 0});
  // Otherwise the I/O thread sends it: EPOLLOUT is armed, or the connect
  // is still pending and flushes the queue when it completes.
  if (!write_now) return {};
  auto failure = flush_locked(*c);
  if (!failure) return {};
  // Sink callbacks never run on a caller's thread: the I/O thread reports.
  c->st = connection::state::broken;
  c->failure = failure;
  c->queue.clear();
  c->queued_bytes = 0;
  guard.unlock();
  notice(c);
  return fail(errc::unavailable, failure->message());
}

void tcp_transport::close(link_id link) {
  auto c = find(link);
  if (!c) return;
  {
    std::lock_guard guard{c->send_mutex};
    if (c->st != connection::state::connecting && c->st != connection::state::up) return;
    c->st = connection::state::closing;
    c->queue.clear();
    c->queued_bytes = 0;
  }
  notice(c);
}

void tcp_transport::shutdown() {
  std::call_once(shutdown_once_, [this] { stop(); });
}

void tcp_transport::stop() {
  SLUICE_ASSERT(std::this_thread::get_id() != io_thread_.get_id());
  {
    std::lock_guard guard{mutex_};
    closed_ = true;
  }
  stopping_.store(true, std::memory_order_release);
  wake();
  if (io_thread_.joinable()) io_thread_.join();
  // No callback can run any more. Links close without on_link_down: the
  // node is going away and the interface promises silence after shutdown.
  std::unordered_map<link_id, connection_ptr> links;
  std::vector<listener> listeners;
  {
    std::lock_guard guard{mutex_};
    links.swap(links_);
    listeners.swap(listeners_);
  }
  for (auto& [id, c] : links) {
    std::lock_guard guard{c->send_mutex};
    c->st = connection::state::closed;
    if (c->fd >= 0) ::close(c->fd);
    c->fd = -1;
    c->queue.clear();
    c->queued_bytes = 0;
  }
  for (auto& l : listeners) ::close(l.fd);
  std::lock_guard guard{notices_mutex_};
  notices_.clear();
  connecting_.clear();
}

auto tcp_transport::find(link_id link) -> connection_ptr {
  if (link_tag(link) != tag_) return nullptr;
  std::lock_guard guard{mutex_};
  auto it = links_.find(link);
  return it == links_.end() ? nullptr : it->second;
}

void tcp_transport::notice(const connection_ptr& c) {
  {
    std::lock_guard guard{notices_mutex_};
    if (c->noticed) return;
    c->noticed = true;
    notices_.push_back(c);
  }
  wake();
}

void tcp_transport::wake() noexcept {
  std::uint64_t one = 1;
  // Only fails when the counter would overflow, and then a wake is pending.
  [[maybe_unused]] auto written = ::write(wake_fd_, &one, sizeof one);
}

// Writes queued bytes until the queue is empty or the kernel pushes back,
// then watches for writability if bytes remain.
// REQUIRES: c.send_mutex held and c.st == up.
std::optional<error> tcp_transport::flush_locked(connection& c) {
  while (!c.queue.empty()) {
    std::array<iovec, send_iovecs_max> iov;
    std::size_t count = 0;
    for (const auto& q : c.queue) {
      std::size_t skip = q.sent;
      for (const shared_bytes* piece : {&q.frame.head, &q.frame.payload}) {
        if (skip >= piece->size()) {
          skip -= piece->size();
          continue;
        }
        if (count == iov.size()) break;
        iov[count++] = iovec{const_cast<std::byte*>(piece->data()) + skip, piece->size() - skip};
        skip = 0;
      }
      if (count == iov.size()) break;
    }
    msghdr message{};
    message.msg_iov = iov.data();
    message.msg_iovlen = count;
    // MSG_NOSIGNAL: a vanished peer is an error value, never a SIGPIPE.
    ssize_t sent = ::sendmsg(c.fd, &message, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return error{errc::unavailable, "connection to " + c.peer + " lost: " + system_text(errno)};
    }
    auto left = static_cast<std::size_t>(sent);
    c.queued_bytes -= left;
    while (left > 0) {
      auto& front = c.queue.front();
      std::size_t rest = front.frame.size() - front.sent;
      if (left < rest) {
        front.sent += left;
        break;
      }
      left -= rest;
      c.queue.pop_front();
    }
  }
  want_writable_locked(c, !c.queue.empty());
  return std::nullopt;
}

// REQUIRES: c.send_mutex held and c.fd registered with epoll.
void tcp_transport::want_writable_locked(connection& c, bool want) {
  if (want == c.writable_armed) return;
  std::uint32_t events = EPOLLIN | (want ? EPOLLOUT : 0u);
  // MOD only fails for an fd that is not registered, which the state
  // machine rules out; a failure would stall the queue, so it is fatal.
  int changed = epoll_set(epoll_fd_, EPOLL_CTL_MOD, c.fd, events, key_of(c.id));
  SLUICE_ASSERT(changed == 0);
  c.writable_armed = want;
}

// ---- I/O thread -----------------------------------------------------------

void tcp_transport::run() {
  std::vector<epoll_event> events(events_per_wait_max);
  while (!stopping_.load(std::memory_order_acquire)) {
    int ready = ::epoll_wait(epoll_fd_, events.data(), events_per_wait_max, wait_timeout_ms());
    if (ready < 0) {
      if (errno == EINTR) continue;
      log_->error("epoll_wait failed: {}; the tcp transport stops serving its links", system_text(errno));
      return;
    }
    for (int i = 0; i < ready && !stopping_.load(std::memory_order_acquire); ++i) {
      dispatch(events[i].data.u64, events[i].events);
    }
    expire_connects();
  }
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
  if (c.at == part::envelope && c.parsed.payload_bytes != 0) {
    auto payload = try_allocate(static_cast<std::size_t>(c.parsed.payload_bytes));
    if (!payload) {
      return error{errc::no_capacity, "out of memory for a payload of " +
                                          std::to_string(c.parsed.payload_bytes) + " bytes from " + c.peer};
    }
    c.payload = std::move(*payload);
    c.at = part::payload;
    c.filled = 0;
    return std::nullopt;
  }
  wire::inbound_frame frame{std::move(c.envelope).freeze(),
                            c.parsed.payload_bytes == 0 ? shared_bytes{} : std::move(c.payload).freeze()};
  c.envelope = byte_buffer{};
  c.payload = byte_buffer{};
  c.at = part::header;
  c.filled = 0;
  auto accepted = sink_.on_frame(c.id, std::move(frame));
  if (!accepted) return accepted.error();
  return std::nullopt;
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
  c->gone = true;
  c->envelope = byte_buffer{};
  c->payload = byte_buffer{};
  sink_.on_link_down(c->id, reason);
}

}  // namespace sluice::transport
