#include "transports/shm/unix_socket.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace sluice::transport::shm {
namespace {

// "what: reason" for the current errno. std::system_category is
// thread-safe, unlike strerror.
std::string errno_text(std::string_view what, int code = errno) {
  std::string out{what};
  out += ": ";
  out += std::system_category().message(code);
  return out;
}

// Runs `call` again while it fails with EINTR, at most
// unix_eintr_retries_max times; returns its last result (errno intact).
template <class Call>
auto retry_eintr(Call call) {
  auto result = call();
  for (int retry = 0; result < 0 && errno == EINTR && retry < unix_eintr_retries_max; ++retry) {
    result = call();
  }
  return result;
}

struct unix_address {
  sockaddr_un raw{};
  socklen_t length = 0;
  bool abstract = false;
};

result<unix_address> parse_address(std::string_view text) {
  const bool abstract = !text.empty() && text.front() == '@';
  const std::string_view name = abstract ? text.substr(1) : text;
  if (name.empty() || name.size() > unix_address_bytes_max ||
      name.find('\0') != std::string_view::npos) {
    return fail(errc::invalid_argument,
                "unix socket address '" + std::string{text} +
                    "' must be a path or @name of 1 to 107 bytes without NUL");
  }
  unix_address out;
  out.raw.sun_family = AF_UNIX;
  out.abstract = abstract;
  // Abstract: a leading NUL, then the name, not terminated. Path: NUL-terminated.
  std::memcpy(out.raw.sun_path + (abstract ? 1 : 0), name.data(), name.size());
  out.length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return out;
}

const sockaddr* as_sockaddr(const unix_address& address) noexcept {
  return reinterpret_cast<const sockaddr*>(&address.raw);
}

result<unique_fd> seqpacket_socket() {
  unique_fd fd{::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)};
  if (!fd) return fail(errc::unavailable, errno_text("unix socket"));
  return fd;
}

errc connect_error(int code) noexcept {
  return code == EACCES || code == EPERM ? errc::permission_denied : errc::unavailable;
}

// For a path whose bind failed with EADDRINUSE: removes the file only if it
// is a socket that nobody accepts on (the listener that made it is dead).
// The check-then-unlink window is inherent to filesystem sockets; two
// listeners racing for one path is a deployment error that this cannot
// fully prevent, but it never removes a live listener's file it saw live.
result<void> remove_stale_socket_file(const unix_address& address) {
  struct stat info {};
  if (::lstat(address.raw.sun_path, &info) != 0) {
    return errno == ENOENT ? result<void>{} : fail(errc::unavailable, errno_text("unix socket lstat"));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return fail(errc::conflict, std::string{"unix socket path "} + address.raw.sun_path +
                                    " exists and is not a socket; not removing it");
  }
  auto probe = seqpacket_socket();
  if (!probe) return probe.error();
  ::fcntl(probe->get(), F_SETFL, O_NONBLOCK);  // a full backlog answers EAGAIN, not a hang
  if (::connect(probe->get(), as_sockaddr(address), address.length) == 0 || errno != ECONNREFUSED) {
    return fail(errc::conflict, std::string{"unix socket path "} + address.raw.sun_path +
                                    " has a live listener");
  }
  if (::unlink(address.raw.sun_path) != 0 && errno != ENOENT) {
    return fail(errc::unavailable, errno_text("unix socket unlink stale file"));
  }
  return {};
}

result<void> bind_address(int fd, const unix_address& address) {
  if (::bind(fd, as_sockaddr(address), address.length) == 0) return {};
  if (errno != EADDRINUSE) return fail(connect_error(errno), errno_text("unix socket bind"));
  if (address.abstract) return fail(errc::conflict, "unix socket abstract name is in use");
  if (auto removed = remove_stale_socket_file(address); !removed) return removed;
  if (::bind(fd, as_sockaddr(address), address.length) == 0) return {};
  return fail(errno == EADDRINUSE ? errc::conflict : connect_error(errno),
              errno_text("unix socket bind"));
}

result<void> set_flag_nonblocking(int fd, bool on) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return fail(errc::unavailable, errno_text("fcntl"));
  const int wanted = on ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (::fcntl(fd, F_SETFL, wanted) != 0) return fail(errc::unavailable, errno_text("fcntl"));
  return {};
}

// Adopts every descriptor in SCM_RIGHTS control messages: owned from here
// on, so any error path closes them. Past the array, closed at once.
void adopt_descriptors(msghdr& message, received_message& out) {
  for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (out.fd_count < out.fds.size()) {
        out.fds[out.fd_count].reset(fd);
      } else {
        ::close(fd);
      }
      ++out.fd_count;  // counts the closed ones too, so the caller sees the excess
    }
  }
}

result<void> check_received(const msghdr& message, ssize_t bytes, std::size_t fd_count,
                            std::size_t fds_expected_max) {
  if ((message.msg_flags & MSG_CTRUNC) != 0) {
    return fail(errc::protocol, "unix socket: a message carried more than " +
                                    std::to_string(unix_fds_max) + " descriptors");
  }
  if ((message.msg_flags & MSG_TRUNC) != 0) {
    return fail(errc::protocol, "unix socket: a message was longer than the receive buffer");
  }
  if (fd_count > fds_expected_max) {
    return fail(errc::protocol, "unix socket: a message carried " + std::to_string(fd_count) +
                                    " descriptors, expected at most " +
                                    std::to_string(fds_expected_max));
  }
  if (bytes == 0) return fail(errc::unavailable, "unix socket: the peer closed the connection");
  return {};
}

}  // namespace

void unique_fd::reset(int fd) noexcept {
  // close() is not retried on EINTR: on Linux the descriptor is gone anyway.
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

// --- unix_socket ---

result<unix_socket> unix_socket::connect(std::string_view address) {
  auto parsed = parse_address(address);
  if (!parsed) return parsed.error();
  auto fd = seqpacket_socket();
  if (!fd) return fd.error();
  // Not retried on EINTR: an interrupted connect() may complete on its own,
  // and a second one would fail with EISCONN or EALREADY.
  if (::connect(fd->get(), as_sockaddr(*parsed), parsed->length) != 0) {
    return fail(connect_error(errno), errno_text("unix socket connect to " + std::string{address}));
  }
  return unix_socket{std::move(*fd)};
}

result<std::pair<unix_socket, unix_socket>> unix_socket::pair() {
  int fds[2] = {-1, -1};
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return fail(errc::unavailable, errno_text("unix socketpair"));
  }
  return std::pair{unix_socket{unique_fd{fds[0]}}, unix_socket{unique_fd{fds[1]}}};
}

result<void> unix_socket::send(std::span<const std::byte> bytes, std::span<const int> fds) {
  if (bytes.empty() || bytes.size() > unix_message_bytes_max || fds.size() > unix_fds_max) {
    return fail(errc::invalid_argument,
                "unix socket send: a message has 1 to " + std::to_string(unix_message_bytes_max) +
                    " bytes and at most " + std::to_string(unix_fds_max) + " descriptors");
  }
  alignas(cmsghdr) std::byte control[CMSG_SPACE(sizeof(int) * unix_fds_max)] = {};
  iovec io{const_cast<std::byte*>(bytes.data()), bytes.size()};  // sendmsg does not write it
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  if (!fds.empty()) {
    message.msg_control = control;
    message.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&message);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  // MSG_NOSIGNAL: a closed peer is an error value, not SIGPIPE.
  const ssize_t sent = retry_eintr([&] { return ::sendmsg(fd_.get(), &message, MSG_NOSIGNAL); });
  if (sent < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return fail(errc::overloaded, "unix socket send: the socket buffer is full; retry later");
    }
    if (errno == EINTR) return fail(errc::aborted, "unix socket send: interrupted too often");
    return fail(errc::unavailable, errno_text("unix socket send"));
  }
  // SOCK_SEQPACKET sends a message whole or not at all.
  if (static_cast<std::size_t>(sent) != bytes.size()) {
    return fail(errc::internal, "unix socket send: a seqpacket message went out in part");
  }
  return {};
}

result<received_message> unix_socket::receive(std::span<std::byte> buffer,
                                              std::size_t fds_expected_max) {
  if (fds_expected_max > unix_fds_max) {
    return fail(errc::invalid_argument, "unix socket receive: at most " +
                                            std::to_string(unix_fds_max) + " descriptors");
  }
  // Room for unix_fds_max descriptors: the kernel closes whatever does not
  // fit and reports MSG_CTRUNC.
  alignas(cmsghdr) std::byte control[CMSG_SPACE(sizeof(int) * unix_fds_max)] = {};
  iovec io{buffer.data(), buffer.size()};
  msghdr message{};
  message.msg_iov = &io;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof control;
  const ssize_t bytes = retry_eintr([&] { return ::recvmsg(fd_.get(), &message, MSG_CMSG_CLOEXEC); });
  if (bytes < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return fail(errc::timeout, "unix socket receive: no message is waiting");
    }
    if (errno == EINTR) return fail(errc::aborted, "unix socket receive: interrupted too often");
    return fail(errc::unavailable, errno_text("unix socket receive"));
  }
  received_message out;
  adopt_descriptors(message, out);
  if (auto checked = check_received(message, bytes, out.fd_count, fds_expected_max); !checked) {
    return checked.error();  // `out` closes every descriptor it holds
  }
  out.bytes = static_cast<std::size_t>(bytes);
  return out;
}

result<peer_credentials> unix_socket::peer() const {
  ucred credentials{};
  socklen_t length = sizeof credentials;
  if (::getsockopt(fd_.get(), SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) {
    return fail(errc::unavailable, errno_text("unix socket SO_PEERCRED"));
  }
  return peer_credentials{credentials.pid, credentials.uid, credentials.gid};
}

result<void> unix_socket::set_nonblocking(bool on) { return set_flag_nonblocking(fd_.get(), on); }

bool unix_socket::peer_closed() const {
  pollfd query{fd_.get(), POLLRDHUP, 0};
  if (retry_eintr([&] { return ::poll(&query, 1, 0); }) < 0) return false;
  return (query.revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0;
}

// --- unix_listener ---

unix_listener::unix_listener(unique_fd fd, std::string address) noexcept
    : fd_(std::move(fd)), address_(std::move(address)) {}

result<unix_listener> unix_listener::listen(std::string_view address, int backlog) {
  auto parsed = parse_address(address);
  if (!parsed) return parsed.error();
  auto fd = seqpacket_socket();
  if (!fd) return fd.error();
  if (auto bound = bind_address(fd->get(), *parsed); !bound) return bound.error();
  unix_listener out{std::move(*fd), std::string{address}};
  struct stat info {};
  if (!parsed->abstract && ::stat(parsed->raw.sun_path, &info) == 0) {
    out.file_device_ = info.st_dev;
    out.file_inode_ = info.st_ino;
    out.owns_file_ = true;
  }
  if (::listen(out.fd_.get(), backlog) != 0) {
    return fail(errc::unavailable, errno_text("unix socket listen"));  // `out` removes the file
  }
  return out;
}

unix_listener::unix_listener(unix_listener&& other) noexcept { *this = std::move(other); }

unix_listener& unix_listener::operator=(unix_listener&& other) noexcept {
  remove_own_file();
  fd_ = std::move(other.fd_);
  address_ = std::move(other.address_);
  file_device_ = other.file_device_;
  file_inode_ = other.file_inode_;
  owns_file_ = std::exchange(other.owns_file_, false);
  return *this;
}

unix_listener::~unix_listener() { remove_own_file(); }

void unix_listener::remove_own_file() noexcept {
  if (!owns_file_) return;
  owns_file_ = false;
  struct stat info {};
  if (::lstat(address_.c_str(), &info) == 0 && info.st_dev == file_device_ &&
      info.st_ino == file_inode_) {
    ::unlink(address_.c_str());
  }
}

result<unix_socket> unix_listener::accept() {
  const int fd = retry_eintr([&] { return ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC); });
  if (fd < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return fail(errc::timeout, "unix socket accept: no connection is waiting");
    }
    if (errno == EINTR) return fail(errc::aborted, "unix socket accept: interrupted too often");
    return fail(errc::unavailable, errno_text("unix socket accept"));
  }
  return unix_socket{unique_fd{fd}};
}

result<void> unix_listener::set_nonblocking(bool on) { return set_flag_nonblocking(fd_.get(), on); }

}  // namespace sluice::transport::shm
