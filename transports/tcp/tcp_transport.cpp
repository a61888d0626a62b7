#include "transports/tcp/tcp_transport.hpp"

#include <sys/eventfd.h>
#include <sys/uio.h>

#include <algorithm>
#include <array>
#include <system_error>

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "transports/tcp/tcp_connection.hpp"

namespace sluice::transport {

using namespace tcp_detail;

namespace {
/// Frames held by send_held() are written once they reach this many bytes,
/// whether or not flush() comes: holding more gains nothing.
constexpr std::uint64_t held_bytes_max = 256 << 10;
}  // namespace

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
  auto sent = enqueue(link, std::move(frame), true);
  if (!sent) return std::move(sent).error();
  return {};
}

result<bool> tcp_transport::send_held(link_id link, wire::outbound_frame frame) {
  return enqueue(link, std::move(frame), false);
}

void tcp_transport::flush(link_id link) {
  auto c = find(link);
  if (!c) return;
  std::unique_lock guard{c->send_mutex};
  if (c->st != connection::state::up || c->queue.empty() || c->writable_armed) return;
  if (auto failure = flush_locked(*c)) fail_locked(std::move(guard), c, *failure);
}

bool tcp_transport::expect_payload(link_id link, std::uint64_t request_id, receive_slot slot) {
  if (slot.bytes.empty() || request_id == 0) return false;
  auto c = find(link);
  if (!c) return false;
  std::lock_guard guard{c->slots_mutex};
  if (c->slots.size() >= options_.posted_receives_per_link_max) return false;
  return c->slots.insert_or_assign(request_id, std::move(slot)).second;
}

void tcp_transport::forget_payload(link_id link, std::uint64_t request_id) {
  auto c = find(link);
  if (!c) return;
  std::lock_guard guard{c->slots_mutex};
  c->slots.erase(request_id);
}

void tcp_transport::set_payload_allocator(payload_allocator allocate) {
  std::lock_guard guard{allocator_mutex_};
  allocator_ = std::move(allocate);
}

void tcp_transport::set_fast_path(fast_path_fn fast, std::function<void()> idle) {
  std::lock_guard guard{allocator_mutex_};
  auto hooks = fast_hooks_ ? *fast_hooks_ : fast_hooks{};
  hooks.fast = std::move(fast);
  hooks.idle = std::move(idle);
  fast_hooks_ = std::make_shared<const fast_hooks>(std::move(hooks));
}

void tcp_transport::set_relay(relay_fn relay, relay_onward_fn onward) {
  std::lock_guard guard{allocator_mutex_};
  auto hooks = fast_hooks_ ? *fast_hooks_ : fast_hooks{};
  hooks.relay = std::move(relay);
  hooks.onward = std::move(onward);
  fast_hooks_ = std::make_shared<const fast_hooks>(std::move(hooks));
}

void tcp_transport::fail_locked(std::unique_lock<std::mutex> guard, const connection_ptr& c, const error& failure) {
  // Sink callbacks never run on a caller's thread: the I/O thread reports.
  c->st = connection::state::broken;
  c->failure = failure;
  c->queue.clear();
  c->queued_bytes = 0;
  guard.unlock();
  notice(c);
}

result<bool> tcp_transport::enqueue(link_id link, wire::outbound_frame frame, bool write) {
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
  // Held frames wait for flush() or the next send, unless they pile up.
  write = write || c->queued_bytes + frame.size() >= held_bytes_max;
  bool write_now = write && c->st == connection::state::up && !c->writable_armed;
  c->queued_bytes += frame.size();
  c->queue.push_back(connection::queued_frame{std::move(frame), 0});
  // Otherwise the I/O thread sends it: EPOLLOUT is armed, or the connect
  // is still pending and flushes the queue when it completes.
  if (!write_now) return !write;
  auto failure = flush_locked(*c);
  if (!failure) return false;
  fail_locked(std::move(guard), c, *failure);
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
    {
      std::lock_guard slots_guard{c->slots_mutex};
      c->slots.clear();
    }
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

}  // namespace sluice::transport
