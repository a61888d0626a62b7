#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/transports/tcp/tcp_pair.hpp"
#include "tests/transports/test_sink.hpp"
#include "runtime/wire/codec.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace sluice::transport {
namespace {

using namespace testing;


std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

std::string loopback(std::uint16_t port) { return "127.0.0.1:" + std::to_string(port); }

// A plain blocking socket playing a peer that misbehaves.
class raw_socket {
 public:
  explicit raw_socket(int fd) : fd_(fd) {}
  raw_socket(raw_socket&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  raw_socket(const raw_socket&) = delete;
  raw_socket& operator=(const raw_socket&) = delete;
  ~raw_socket() { close(); }

  static raw_socket connect_to(std::uint16_t port) {
    raw_socket s{::socket(AF_INET, SOCK_STREAM, 0)};
    auto address = loopback_address(port);
    REQUIRE(::connect(s.fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    return s;
  }

  /// A listener on a free loopback port that never accepts.
  static raw_socket listen_anywhere(int backlog) {
    raw_socket s{::socket(AF_INET, SOCK_STREAM, 0)};
    auto address = loopback_address(0);
    REQUIRE(::bind(s.fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(s.fd_, backlog) == 0);
    return s;
  }

  std::uint16_t port() const {
    sockaddr_in address{};
    socklen_t length = sizeof address;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    return ntohs(address.sin_port);
  }

  void write_all(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      auto n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      REQUIRE(n > 0);
      bytes = bytes.subspan(static_cast<std::size_t>(n));
    }
  }

  /// True once the other side closed (EOF or reset), within the deadline.
  bool closed_by_peer() {
    auto deadline = std::chrono::steady_clock::now() + wait_max;
    std::byte scratch[4096];
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      auto n = ::recv(fd_, scratch, sizeof scratch, 0);
      if (n <= 0) return true;
    }
    return false;
  }

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  static sockaddr_in loopback_address(std::uint16_t port) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return address;
  }
  int fd_;
};

}  // namespace

TEST_CASE("tcp: listen on port 0 returns the bound address with a real port") {
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  auto bound = t.listen("127.0.0.1:0");
  REQUIRE(bound.ok());
  CHECK(bound->starts_with("127.0.0.1:"));
  CHECK(port_of(*bound) != 0);
  auto local = t.listen("localhost:0");
  REQUIRE(local.ok());
  CHECK(local->starts_with("127.0.0.1:"));
  CHECK(port_of(*local) != port_of(*bound));
  CHECK(t.scheme() == "tcp");
}

TEST_CASE("tcp: listen rejects an unparsable address with invalid_argument") {
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  for (const char* bad : {"nonsense", "127.0.0.1", "127.0.0.1:", ":80", "127.0.0.1:99999", "127.0.0.1:8x",
                          "::1:80", "[::1]80"}) {
    CAPTURE(bad);
    CHECK(t.listen(bad).code() == errc::invalid_argument);
  }
}

TEST_CASE("tcp: listen on a port another listener holds fails with unavailable") {
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  auto bound = t.listen("127.0.0.1:0");
  REQUIRE(bound.ok());
  auto again = t.listen(*bound);
  REQUIRE(again.code() == errc::unavailable);
  CHECK(again.error().message().find("in use") != std::string::npos);
}

TEST_CASE("tcp: a connected pair exchanges frames both ways") {
  linked_pair p;
  CHECK(link_tag(p.a_link) == tag_a);
  CHECK(link_tag(p.b_link) == tag_b);
  CHECK(p.a_link == make_link_id(tag_a, 1));
  CHECK(p.sink_a.peer(p.a_link) == p.address);
  CHECK(p.sink_b.peer(p.b_link)->starts_with("127.0.0.1:"));

  REQUIRE(p.a.send(p.a_link, make_frame(7, patterned(100, 7))).ok());
  REQUIRE(p.b.send(p.b_link, make_frame(8, patterned(200, 8))).ok());
  REQUIRE(p.sink_b.wait_frames(p.b_link, 1));
  REQUIRE(p.sink_a.wait_frames(p.a_link, 1));
  auto at_b = p.sink_b.frames(p.b_link).at(0);
  auto at_a = p.sink_a.frames(p.a_link).at(0);
  CHECK(envelope_intact(at_b, 7));
  CHECK(is_patterned(at_b.payload, 100, 7));
  CHECK(envelope_intact(at_a, 8));
  CHECK(is_patterned(at_a.payload, 200, 8));
}

TEST_CASE("tcp: frames of 0, 1, 4096 and 10 MiB payload bytes arrive intact and in order") {
  linked_pair p;
  const std::vector<std::size_t> sizes{0, 1, 4096, 10u << 20, 0, 1};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(p.a.send(p.a_link, make_frame(i, patterned(sizes[i], i), 1 + i)).ok());
  }
  REQUIRE(p.sink_b.wait_frames(p.b_link, sizes.size()));
  auto frames = p.sink_b.frames(p.b_link);
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    CAPTURE(i);
    CHECK(envelope_intact(frames[i], i, 1 + i));
    CHECK(is_patterned(frames[i].payload, sizes[i], i));
  }
  CHECK(frames[0].payload.empty());
  CHECK(p.sink_b.orderly());
}

TEST_CASE("tcp: a thousand small frames arrive in order") {
  linked_pair p;
  constexpr std::size_t count = 1000;
  for (std::size_t i = 0; i < count; ++i) {
    REQUIRE(p.a.send(p.a_link, make_frame(i, patterned(i % 64, i))).ok());
  }
  REQUIRE(p.sink_b.wait_frames(p.b_link, count));
  auto frames = p.sink_b.frames(p.b_link);
  for (std::size_t i = 0; i < count; ++i) {
    CAPTURE(i);
    REQUIRE(envelope_intact(frames[i], i));
    REQUIRE(is_patterned(frames[i].payload, i % 64, i));
  }
}

TEST_CASE("tcp: frames sent before the connect completes arrive") {
  recording_sink sink_a;
  recording_sink sink_b;
  tcp_transport a{tag_a, sink_a};
  tcp_transport b{tag_b, sink_b};
  auto address = b.listen("127.0.0.1:0").value();
  auto link = a.connect(address).value();
  // The I/O thread has not even opened the socket yet: these queue.
  for (std::uint64_t i = 0; i < 10; ++i) REQUIRE(a.send(link, make_frame(i, patterned(1000, i))).ok());
  auto accepted = sink_b.wait_up().value();
  REQUIRE(sink_b.wait_frames(accepted, 10));
  auto frames = sink_b.frames(accepted);
  for (std::uint64_t i = 0; i < 10; ++i) CHECK(envelope_intact(frames[i], i));
  CHECK(sink_a.wait_link_up(link));
}

TEST_CASE("tcp: frames sent from several threads keep each thread's order") {
  linked_pair p;
  constexpr std::uint64_t threads = 4;
  constexpr std::uint64_t per_thread = 300;
  std::vector<std::thread> senders;
  for (std::uint64_t t = 0; t < threads; ++t) {
    senders.emplace_back([&p, t] {
      for (std::uint64_t i = 0; i < per_thread; ++i) {
        auto frame = make_frame(t * 1'000'000 + i, patterned((i * 37) % 3000, i));
        while (!p.a.send(p.a_link, frame).ok()) std::this_thread::yield();
      }
    });
  }
  for (auto& s : senders) s.join();
  REQUIRE(p.sink_b.wait_frames(p.b_link, threads * per_thread));
  std::vector<std::uint64_t> next(threads, 0);
  for (const auto& frame : p.sink_b.frames(p.b_link)) {
    auto sequence = sequence_of(frame);
    auto t = sequence / 1'000'000;
    auto i = sequence % 1'000'000;
    REQUIRE(t < threads);
    REQUIRE(i == next[t]);
    REQUIRE(is_patterned(frame.payload, (i * 37) % 3000, i));
    ++next[t];
  }
}

TEST_CASE("tcp: a frame with a bad magic closes only that link") {
  linked_pair p;
  auto raw = raw_socket::connect_to(port_of(p.address));
  auto bad_link = p.sink_b.wait_up(1).value();
  auto header = raw_header(8, 0);
  std::vector<std::byte> bytes(header.span().begin(), header.span().end());
  bytes[0] = std::byte{'X'};
  bytes.resize(bytes.size() + 8);
  raw.write_all(bytes);

  auto reason = p.sink_b.wait_down(bad_link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::protocol);
  CHECK(reason->message().find("magic") != std::string::npos);
  CHECK(raw.closed_by_peer());
  CHECK(p.sink_b.frames(bad_link).empty());

  // The established link still works, and the listener takes new links.
  REQUIRE(p.a.send(p.a_link, make_frame(1)).ok());
  CHECK(p.sink_b.wait_frames(p.b_link, 1));
  auto again = p.a.connect(p.address).value();
  REQUIRE(p.sink_a.wait_link_up(again));
  REQUIRE(p.a.send(again, make_frame(2, patterned(10, 2))).ok());
  auto fresh = p.sink_b.wait_up(2).value();
  REQUIRE(p.sink_b.wait_frames(fresh, 1));
  CHECK(envelope_intact(p.sink_b.frames(fresh).at(0), 2));
  CHECK(p.sink_b.orderly());
}

TEST_CASE("tcp: a half frame followed by a close reports the link down mid-frame") {
  recording_sink sink;
  tcp_transport t{tag_b, sink};
  auto address = t.listen("127.0.0.1:0").value();
  auto raw = raw_socket::connect_to(port_of(address));
  auto link = sink.wait_up().value();
  auto frame = make_frame(3, patterned(1000, 3));
  raw.write_all(frame.head.span());
  raw.write_all(frame.payload.span().first(500));
  raw.close();
  auto reason = sink.wait_down(link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::unavailable);
  CHECK(reason->message().find("mid-frame") != std::string::npos);
  CHECK(sink.frames(link).empty());
}

TEST_CASE("tcp: a peer that closes between frames is reported as unavailable") {
  recording_sink sink;
  tcp_transport t{tag_b, sink};
  auto address = t.listen("127.0.0.1:0").value();
  auto raw = raw_socket::connect_to(port_of(address));
  auto link = sink.wait_up().value();
  auto frame = make_frame(4);
  raw.write_all(frame.head.span());
  raw.close();
  auto reason = sink.wait_down(link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::unavailable);
  CHECK(reason->message().find("closed the connection") != std::string::npos);
  CHECK(reason->message().find("mid-frame") == std::string::npos);
  CHECK(sink.frames(link).size() == 1);
}

TEST_CASE("tcp: random garbage closes the link with a protocol error") {
  recording_sink sink;
  tcp_transport t{tag_b, sink};
  auto address = t.listen("127.0.0.1:0").value();
  std::mt19937_64 rng{20240601};
  for (int round = 0; round < 5; ++round) {
    auto raw = raw_socket::connect_to(port_of(address));
    auto link = sink.wait_up(static_cast<std::size_t>(round)).value();
    std::vector<std::byte> garbage(4096);
    for (auto& b : garbage) b = static_cast<std::byte>(rng());
    raw.write_all(garbage);
    auto reason = sink.wait_down(link);
    REQUIRE(reason.has_value());
    CHECK(reason->code() == errc::protocol);
  }
  CHECK(sink.orderly());
}

TEST_CASE("tcp: a header announcing an oversize payload closes the link before allocating it") {
  recording_sink sink;
  transport_limits limits;
  limits.frame.max_payload_bytes = 1 << 20;
  tcp_transport t{tag_b, sink, limits};
  auto address = t.listen("127.0.0.1:0").value();
  // 2^62 bytes could never be allocated: reaching the allocator would fail
  // with no_capacity, not protocol.
  std::size_t accepted = 0;
  for (std::uint64_t payload : {(std::uint64_t{1} << 20) + 1, std::uint64_t{1} << 62}) {
    CAPTURE(payload);
    auto raw = raw_socket::connect_to(port_of(address));
    auto link = sink.wait_up(accepted++).value();
    raw.write_all(raw_header(8, payload).span());
    auto reason = sink.wait_down(link);
    REQUIRE(reason.has_value());
    CHECK(reason->code() == errc::protocol);
    CHECK(reason->message().find("exceeds the limit") != std::string::npos);
  }
}

TEST_CASE("tcp: a frame the sink rejects closes the link with the sink's error") {
  recording_sink sink_a;
  recording_sink sink_b;
  sink_b.on_frame_hook = [](link_id, const wire::inbound_frame& frame) -> result<void> {
    if (sequence_of(frame) == 2) return fail(errc::protocol, "envelope does not decode");
    return {};
  };
  tcp_transport a{tag_a, sink_a};
  tcp_transport b{tag_b, sink_b};
  auto link = a.connect(b.listen("127.0.0.1:0").value()).value();
  REQUIRE(a.send(link, make_frame(1)).ok());
  REQUIRE(a.send(link, make_frame(2)).ok());
  // The link may already be down by now (b refused frame 2): either way
  // the third frame must not reach b's sink.
  (void)a.send(link, make_frame(3));
  auto accepted = sink_b.wait_up().value();
  auto reason = sink_b.wait_down(accepted);
  REQUIRE(reason.has_value());
  CHECK(*reason == error{errc::protocol, "envelope does not decode"});
  CHECK(sink_b.frames(accepted).size() == 2);  // the third never reaches the sink
  auto there = sink_a.wait_down(link);
  REQUIRE(there.has_value());
  CHECK(there->code() == errc::unavailable);
}

TEST_CASE("tcp: a peer that shuts down is reported as down") {
  linked_pair p;
  p.b.shutdown();
  auto reason = p.sink_a.wait_down(p.a_link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::unavailable);
  // shutdown() reports nothing for the links it closes.
  CHECK(p.sink_b.downs(p.b_link) == 0);
  CHECK(p.b.send(p.b_link, make_frame(1)).code() == errc::unavailable);
  CHECK(p.b.connect(p.address).code() == errc::unavailable);
  CHECK(p.b.listen("127.0.0.1:0").code() == errc::unavailable);
  p.b.shutdown();  // idempotent
  CHECK(p.a.send(p.a_link, make_frame(1)).code() == errc::unavailable);
}

TEST_CASE("tcp: a connect to a closed port reports unavailable") {
  std::uint16_t port = 0;
  {
    auto probe = raw_socket::listen_anywhere(1);
    port = probe.port();
  }
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  auto link = t.connect(loopback(port));
  REQUIRE(link.ok());
  auto reason = sink.wait_down(*link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::unavailable);
  CHECK(reason->message().find("refused") != std::string::npos);
  CHECK(!sink.peer(*link).has_value());  // never up
  CHECK(t.send(*link, make_frame(1)).code() == errc::unavailable);
}

TEST_CASE("tcp: a connect that does not complete in time reports timeout") {
  // A listener with a full accept queue drops new SYNs, so the connect
  // neither completes nor fails.
  auto full = raw_socket::listen_anywhere(0);
  auto filler = raw_socket::connect_to(full.port());
  recording_sink sink;
  tcp_options options;
  options.connect_timeout = std::chrono::milliseconds{200};
  tcp_transport t{tag_a, sink, {}, options};
  auto started = std::chrono::steady_clock::now();
  auto link = t.connect(loopback(full.port())).value();
  REQUIRE(t.send(link, make_frame(1)).ok());  // queued while connecting
  auto reason = sink.wait_down(link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::timeout);
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::milliseconds{200});
}

TEST_CASE("tcp: close reports aborted here and unavailable at the peer") {
  linked_pair p;
  p.a.close(p.a_link);
  auto here = p.sink_a.wait_down(p.a_link);
  REQUIRE(here.has_value());
  CHECK(*here == error{errc::aborted, "closed locally"});
  auto there = p.sink_b.wait_down(p.b_link);
  REQUIRE(there.has_value());
  CHECK(there->code() == errc::unavailable);
  p.a.close(p.a_link);  // down already: nothing more
  p.a.close(make_link_id(tag_a, 999));
  CHECK(p.a.send(p.a_link, make_frame(1)).code() == errc::unavailable);
  std::this_thread::sleep_for(std::chrono::milliseconds{20});
  CHECK(p.sink_a.downs(p.a_link) == 1);
  CHECK(p.sink_a.orderly());
  CHECK(p.sink_b.orderly());
}

TEST_CASE("tcp: a link closed while connecting reports aborted") {
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  auto server = raw_socket::listen_anywhere(4);
  auto link = t.connect(loopback(server.port())).value();
  t.close(link);
  auto reason = sink.wait_down(link);
  REQUIRE(reason.has_value());
  CHECK(reason->code() == errc::aborted);
  CHECK(sink.orderly());
}

TEST_CASE("tcp: send on an unknown link fails with unavailable") {
  recording_sink sink;
  tcp_transport t{tag_a, sink};
  CHECK(t.send(make_link_id(tag_a, 42), make_frame(1)).code() == errc::unavailable);
  CHECK(t.send(make_link_id(tag_b, 1), make_frame(1)).code() == errc::unavailable);
}

TEST_CASE("tcp: send rejects a frame whose header does not describe it") {
  linked_pair p;
  auto frame = make_frame(1, patterned(10, 1));
  frame.payload = patterned(11, 1);
  CHECK(p.a.send(p.a_link, frame).code() == errc::invalid_argument);
  CHECK(p.a.send(p.a_link, wire::outbound_frame{shared_bytes::copy_of("short"), {}}).code() ==
        errc::invalid_argument);
  // Nothing went out, so the link still carries good frames.
  REQUIRE(p.a.send(p.a_link, make_frame(2)).ok());
  REQUIRE(p.sink_b.wait_frames(p.b_link, 1));
  CHECK(envelope_intact(p.sink_b.frames(p.b_link).at(0), 2));
}

TEST_CASE("tcp: a peer that does not read makes send answer overloaded") {
  auto silent = raw_socket::listen_anywhere(4);  // never accepts, never reads
  recording_sink sink;
  transport_limits limits;
  limits.max_queued_bytes = 1 << 20;
  tcp_transport t{tag_a, sink, limits};
  auto link = t.connect(loopback(silent.port())).value();
  REQUIRE(sink.wait_link_up(link));
  CHECK(t.send(link, make_frame(0, patterned((1 << 20) + 1, 0))).code() == errc::overloaded);
  auto chunk = patterned(256 << 10, 1);
  bool overloaded = false;
  // The kernel buffers a few MiB at most; 100 MiB must overflow the queue.
  for (int i = 0; i < 400 && !overloaded; ++i) {
    auto sent = t.send(link, make_frame(static_cast<std::uint64_t>(i), chunk));
    if (!sent) {
      CHECK(sent.code() == errc::overloaded);
      overloaded = true;
    }
  }
  CHECK(overloaded);
  CHECK(sink.downs(link) == 0);  // backpressure, not failure
}

TEST_CASE("tcp: an IPv6 loopback link carries frames") {
  recording_sink sink_a;
  recording_sink sink_b;
  tcp_transport a{tag_a, sink_a};
  tcp_transport b{tag_b, sink_b};
  auto address = b.listen("[::1]:0");
  REQUIRE(address.ok());
  CHECK(address->starts_with("[::1]:"));
  auto link = a.connect(*address).value();
  REQUIRE(a.send(link, make_frame(5, patterned(64, 5))).ok());
  auto accepted = sink_b.wait_up().value();
  REQUIRE(sink_b.wait_frames(accepted, 1));
  CHECK(sink_b.peer(accepted)->starts_with("[::1]:"));
  CHECK(is_patterned(sink_b.frames(accepted).at(0).payload, 64, 5));
}

TEST_CASE("tcp: nothing reaches the sink after shutdown returns") {
  linked_pair p;
  std::atomic<bool> stop{false};
  std::thread sender{[&] {
    while (!stop.load()) (void)p.b.send(p.b_link, make_frame(1, patterned(512, 1)));
  }};
  std::this_thread::sleep_for(std::chrono::milliseconds{20});
  p.a.shutdown();
  auto seen = p.sink_a.frames(p.a_link).size();
  std::this_thread::sleep_for(std::chrono::milliseconds{50});
  stop = true;
  sender.join();
  CHECK(p.sink_a.frames(p.a_link).size() == seen);
  CHECK(p.sink_a.downs(p.a_link) == 0);
  CHECK(p.sink_b.wait_down(p.b_link).has_value());
}

}  // namespace sluice::transport
