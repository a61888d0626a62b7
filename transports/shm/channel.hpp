// channel: the shared memory one client and its local owner talk through —
// one memfd holding two rings (requests: client → owner, responses:
// owner → client) — and the greeting that hands it over, with the owner's
// pool segments and its doorbell, on the Unix socket.
//
// Greeting (owner → client, one SOCK_SEQPACKET message; little-endian):
//   magic "SLSH" u32 | version u16 | reserved u16 | ring_bytes u32 |
//   segment_count u32 | segment_count × (segment_bytes u64)
// with two descriptors: the channel memfd and the owner's doorbell
// eventfd. The pool segments follow in messages of up to unix_fds_max
// descriptors each, in segment order, with no bytes of their own beyond a
// u32 count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "transports/shm/ring.hpp"
#include "transports/shm/unix_socket.hpp"

namespace sluice::transport::shm {

inline constexpr std::uint32_t greeting_magic = 0x48534c53;  // "SLSH"
inline constexpr std::uint16_t greeting_version = 1;
/// Pool segments one owner hands a client at most.
inline constexpr std::uint32_t greeting_segments_max = 1024;

/// The mapped channel memfd: two ring areas back to back.
class channel_memory {
 public:
  /// Creates the memfd and formats both rings (owner side).
  static result<std::unique_ptr<channel_memory>> create(std::uint32_t ring_bytes);
  /// Maps a received channel memfd and checks both rings (client side).
  static result<std::unique_ptr<channel_memory>> attach(unique_fd fd, std::uint32_t ring_bytes);
  ~channel_memory();
  channel_memory(const channel_memory&) = delete;
  channel_memory& operator=(const channel_memory&) = delete;

  std::span<std::byte> requests_area() const noexcept;
  std::span<std::byte> responses_area() const noexcept;
  int fd() const noexcept { return fd_.get(); }
  std::uint32_t ring_bytes() const noexcept { return ring_bytes_; }

 private:
  channel_memory(unique_fd fd, std::byte* base, std::size_t size, std::uint32_t ring_bytes)
      : fd_(std::move(fd)), base_(base), size_(size), ring_bytes_(ring_bytes) {}
  unique_fd fd_;
  std::byte* base_;
  std::size_t size_;
  std::uint32_t ring_bytes_;
};

struct greeting {
  std::uint32_t ring_bytes = 0;
  std::vector<std::uint64_t> segment_bytes;
};

std::vector<std::byte> encode_greeting(const greeting& g);
result<greeting> decode_greeting(std::span<const std::byte> bytes);

/// Producer side of a ring that an owner's poller thread consumes: after a
/// commit, rings the owner's doorbell (an eventfd) if the poller sleeps.
/// The Dekker argument of waiter.hpp applies, with the eventfd for the
/// futex. Returns whether it rang (the poller slept).
bool notify_poller(ring& r, int doorbell_fd) noexcept;

}  // namespace sluice::transport::shm
