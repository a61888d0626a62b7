// RDMA on this machine: devices are probed, a machine without one is told
// why, and queue pair endpoints travel over TCP. Where a device is active
// (real hardware, or soft-RoCE: docs/rdma.md), two queue pairs of one
// context connect to each other and move bytes with one-sided writes and
// reads.

#include "transports/rdma/rdma.hpp"

#include <doctest/doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

namespace sluice::transport::rdma {
namespace {

/// Waits for `n` completions (a few seconds at most).
std::vector<completion> reap(context& c, std::size_t n) {
  std::vector<completion> out;
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds{5};
  while (out.size() < n && std::chrono::steady_clock::now() < give_up) {
    auto got = c.poll();
    REQUIRE(got.ok());
    out.insert(out.end(), got->begin(), got->end());
  }
  return out;
}

TEST_CASE("rdma: without a usable device the probe says why and opening a context fails with unavailable") {
  auto found = probe();
  if (found.usable()) {
    MESSAGE("this machine has an active RDMA device: " << found.devices.front().name);
    return;  // the case below covers it
  }
  CHECK_FALSE(found.why_not.empty());
  auto opened = context::open();
  REQUIRE_FALSE(opened.ok());
  CHECK(opened.code() == errc::unavailable);
  CHECK(opened.error().message() == found.why_not);
}

TEST_CASE("rdma: on an active device two queue pairs connect and move bytes with one-sided writes and reads") {
  if (!probe().usable()) {
    MESSAGE("no active RDMA device here: " << probe().why_not);
    return;  // the case above covers it
  }
  auto c = context::open().value();
  std::vector<std::byte> a(1 << 20), b(1 << 20);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::byte>(i * 7);
  auto key_a = c->register_memory(a).value();
  auto key_b = c->register_memory(b).value();
  auto qp1 = c->create_queue_pair().value();
  auto qp2 = c->create_queue_pair().value();
  REQUIRE(qp1->connect(qp2->local()).ok());
  REQUIRE(qp2->connect(qp1->local()).ok());
  REQUIRE(qp1->post_write(std::span<const std::byte>{a}.first(4096), key_a, key_b.address, key_b.rkey, 1).ok());
  auto written = reap(*c, 1);
  REQUIRE(written.size() == 1);
  CHECK(written[0].ok);
  CHECK(std::memcmp(a.data(), b.data(), 4096) == 0);
  REQUIRE(qp2->post_read(std::span<std::byte>{b}.subspan(8192, 65536), key_b, key_a.address + 8192, key_a.rkey, 2).ok());
  auto read = reap(*c, 1);
  REQUIRE(read.size() == 1);
  CHECK(read[0].work_id == 2);
  CHECK(std::memcmp(a.data() + 8192, b.data() + 8192, 65536) == 0);
}

TEST_CASE("rdma: queue pair endpoints travel both ways over a TCP connection") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  queue_pair_endpoint one{0x1234, 0xabcdef, 7, {}};
  queue_pair_endpoint two{0x99, 0x42, 0, {}};
  two.gid[15] = 0xfe;
  result<queue_pair_endpoint> heard_by_two = error{errc::internal, "not run"};
  std::thread peer{[&] { heard_by_two = exchange_endpoints(fds[1], two, 2000); }};
  auto heard_by_one = exchange_endpoints(fds[0], one, 2000);
  peer.join();
  ::close(fds[0]);
  ::close(fds[1]);
  REQUIRE(heard_by_one.ok());
  REQUIRE(heard_by_two.ok());
  CHECK(heard_by_one->qp_number == 0x99);
  CHECK(heard_by_one->packet_sequence == 0x42);
  CHECK(heard_by_one->gid[15] == 0xfe);
  CHECK(heard_by_two->qp_number == 0x1234);
  CHECK(heard_by_two->lid == 7);
}

TEST_CASE("rdma: an endpoint exchange with a silent peer times out, and one with a stranger is refused") {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  auto silent = exchange_endpoints(fds[0], queue_pair_endpoint{}, 100);
  CHECK(silent.code() == errc::timeout);
  std::vector<char> junk(64, 'x');
  REQUIRE(::send(fds[1], junk.data(), junk.size(), 0) == 64);
  auto stranger = exchange_endpoints(fds[0], queue_pair_endpoint{}, 1000);
  CHECK(stranger.code() == errc::protocol);
  ::close(fds[1]);
  auto closed = exchange_endpoints(fds[0], queue_pair_endpoint{}, 1000);
  CHECK(closed.code() == errc::unavailable);
  ::close(fds[0]);
}

}  // namespace
}  // namespace sluice::transport::rdma
