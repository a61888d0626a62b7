// Unix domain sockets for the shm transport's control channel: a client
// and its local owner exchange small messages and file descriptors (memfd
// segments, ring areas) over SCM_RIGHTS (design.md, "Transports", shm row).
//
// Why SOCK_SEQPACKET and not SOCK_STREAM: it keeps message boundaries (no
// framing code, and a message and its fds always arrive together, never
// split across reads), it is connection-oriented (a closed peer reads as
// end of file), and a message is sent whole or not at all.
//
// Addresses: "@name" is a Linux abstract name (no file, vanishes with the
// last socket, never stale); anything else is a filesystem path.
//
// Thread safety: one thread per object. Objects own their descriptors
// (close-on-exec, closed by the destructor).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "sluice/result.hpp"

namespace sluice::transport::shm {

/// Most descriptors one message carries. Why 8: a message hands over a
/// few segments (ring areas, pool segments); more is a bug or an attack,
/// and each one received costs a slot in our descriptor table.
inline constexpr std::size_t unix_fds_max = 8;
/// Largest message. Why 4 KiB: this is a control channel (hello, segment
/// descriptors); requests and data travel through the rings.
inline constexpr std::size_t unix_message_bytes_max = 4096;
/// Longest address after the '@' or path. Why 107: sun_path holds 108
/// bytes, one of them the terminating NUL (paths) or leading NUL (abstract).
inline constexpr std::size_t unix_address_bytes_max = 107;
/// How often a call interrupted by a signal (EINTR) is retried before it
/// fails with errc::aborted.
inline constexpr int unix_eintr_retries_max = 64;

/// Owns one file descriptor; closes it on destruction. -1 means none.
class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_(fd) {}
  unique_fd(unique_fd&& other) noexcept : fd_(other.release()) {}
  unique_fd& operator=(unique_fd&& other) noexcept {
    reset(other.release());
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() { reset(); }

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  /// Gives up ownership without closing.
  int release() noexcept { return std::exchange(fd_, -1); }
  /// Closes the current descriptor (if any) and takes `fd`.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

/// Who is on the other end (SO_PEERCRED: as of connect()/listen()). For
/// logs and access checks.
struct peer_credentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

/// A message as received: its length in the caller's buffer and the
/// descriptors that came with it (owned, close-on-exec).
struct received_message {
  std::size_t bytes = 0;
  std::array<unique_fd, unix_fds_max> fds;
  std::size_t fd_count = 0;
};

/// A connected SOCK_SEQPACKET socket.
class unix_socket {
 public:
  /// Connects to a listener. Errors: invalid_argument (bad address),
  /// unavailable (nobody listens there), permission_denied.
  static result<unix_socket> connect(std::string_view address);
  /// Two connected sockets (socketpair), e.g. to hand one to a child.
  static result<std::pair<unix_socket, unix_socket>> pair();

  /// Adopts a connected SOCK_SEQPACKET socket.
  explicit unix_socket(unique_fd fd) noexcept : fd_(std::move(fd)) {}

  /// Sends one message with up to unix_fds_max descriptors (duplicated
  /// into the peer; ours stay open). Errors: invalid_argument (empty — a
  /// zero-length read means "peer closed" — or over the bounds),
  /// overloaded (non-blocking and the socket buffer is full), unavailable
  /// (the peer closed), aborted (interrupted too often).
  result<void> send(std::span<const std::byte> bytes, std::span<const int> fds = {});

  /// Receives one message into `buffer`. Errors: protocol (the message was
  /// longer than `buffer`, or carried more than `fds_expected_max` or
  /// unix_fds_max descriptors — every descriptor that came with it is
  /// closed), unavailable (the peer closed), timeout (non-blocking and no
  /// message is waiting), invalid_argument (fds_expected_max >
  /// unix_fds_max), aborted (interrupted too often).
  result<received_message> receive(std::span<std::byte> buffer, std::size_t fds_expected_max);

  /// The peer's pid/uid/gid. Errors: unavailable.
  result<peer_credentials> peer() const;
  /// O_NONBLOCK on or off. Errors: unavailable.
  result<void> set_nonblocking(bool on);
  /// True when the peer has closed its end (messages it sent before may
  /// still be waiting to be received). Does not consume anything.
  bool peer_closed() const;

  int fd() const noexcept { return fd_.get(); }

 private:
  unique_fd fd_;
};

/// A listening SOCK_SEQPACKET socket. For a filesystem path, listen()
/// removes a stale socket file left by a dead listener (only a socket file
/// nobody accepts on: a live listener or any other kind of file is left
/// alone), and the destructor removes the file if it is still ours.
class unix_listener {
 public:
  /// Errors: invalid_argument (bad address), conflict (a live listener or
  /// a non-socket file holds the address), permission_denied, unavailable.
  static result<unix_listener> listen(std::string_view address, int backlog = 16);

  unix_listener(unix_listener&& other) noexcept;
  unix_listener& operator=(unix_listener&& other) noexcept;
  unix_listener(const unix_listener&) = delete;
  unix_listener& operator=(const unix_listener&) = delete;
  ~unix_listener();

  /// The next connection. Errors: timeout (non-blocking and none is
  /// waiting), unavailable, aborted.
  result<unix_socket> accept();
  result<void> set_nonblocking(bool on);

  const std::string& address() const noexcept { return address_; }
  int fd() const noexcept { return fd_.get(); }

 private:
  unix_listener(unique_fd fd, std::string address) noexcept;
  void remove_own_file() noexcept;

  unique_fd fd_;
  std::string address_;
  // Identity of the socket file we created (paths only), so the
  // destructor never removes a file that someone else put there since.
  dev_t file_device_ = 0;
  ino_t file_inode_ = 0;
  bool owns_file_ = false;
};

}  // namespace sluice::transport::shm
