// Setting a queue pair up over TCP: each end sends its endpoint as a
// fixed 32-byte record and reads the other's. No verbs here.
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "transports/rdma/rdma.hpp"

namespace sluice::transport::rdma {
namespace {

// "SLQP", qp number, packet sequence, lid (2 bytes), 2 spare, gid (16).
constexpr std::size_t record_bytes = 32;
constexpr std::uint32_t record_magic = 0x50514c53;

using deadline_clock = std::chrono::steady_clock;

int left_ms(deadline_clock::time_point until) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - deadline_clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

/// Moves `length` bytes with `step` (send or recv), waiting for the
/// socket by poll() until `until`.
template <class Step>
result<void> move_all(int fd, std::byte* bytes, std::size_t length, short events, deadline_clock::time_point until,
                      Step step) {
  std::size_t done = 0;
  while (done < length) {
    pollfd p{fd, events, 0};
    int ready = ::poll(&p, 1, left_ms(until));
    if (ready == 0) return fail(errc::timeout, "the queue pair exchange did not complete in time");
    if (ready < 0 && errno != EINTR) return fail(errc::unavailable, std::string{"poll: "} + std::strerror(errno));
    if (ready < 0) continue;
    auto n = step(fd, bytes + done, length - done);
    if (n == 0) return fail(errc::unavailable, "the peer closed the connection during the queue pair exchange");
    if (n < 0 && errno != EINTR && errno != EAGAIN) {
      return fail(errc::unavailable, std::string{"queue pair exchange: "} + std::strerror(errno));
    }
    if (n > 0) done += static_cast<std::size_t>(n);
  }
  return {};
}

}  // namespace

result<queue_pair_endpoint> exchange_endpoints(int fd, const queue_pair_endpoint& mine, int timeout_ms) {
  auto until = deadline_clock::now() + std::chrono::milliseconds{timeout_ms};
  std::array<std::byte, record_bytes> out{};
  std::memcpy(out.data(), &record_magic, 4);
  std::memcpy(out.data() + 4, &mine.qp_number, 4);
  std::memcpy(out.data() + 8, &mine.packet_sequence, 4);
  std::memcpy(out.data() + 12, &mine.lid, 2);
  std::memcpy(out.data() + 16, mine.gid.data(), 16);
  auto sent = move_all(fd, out.data(), out.size(), POLLOUT, until, [](int s, std::byte* b, std::size_t n) {
    return ::send(s, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  });
  if (!sent) return sent.error();
  std::array<std::byte, record_bytes> in{};
  auto got = move_all(fd, in.data(), in.size(), POLLIN, until, [](int s, std::byte* b, std::size_t n) {
    return ::recv(s, b, n, MSG_DONTWAIT);
  });
  if (!got) return got.error();
  std::uint32_t magic = 0;
  std::memcpy(&magic, in.data(), 4);
  if (magic != record_magic) return fail(errc::protocol, "the peer did not send a queue pair endpoint");
  queue_pair_endpoint peer;
  std::memcpy(&peer.qp_number, in.data() + 4, 4);
  std::memcpy(&peer.packet_sequence, in.data() + 8, 4);
  std::memcpy(&peer.lid, in.data() + 12, 2);
  std::memcpy(peer.gid.data(), in.data() + 16, 16);
  return peer;
}

}  // namespace sluice::transport::rdma
