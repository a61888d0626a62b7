// tcp_call_link: a calling thread's own blocking link, against a real tcp
// transport on the other end.

#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "tests/transports/test_sink.hpp"
#include "transports/tcp/tcp_call_link.hpp"
#include "transports/tcp/tcp_transport.hpp"

namespace {

using namespace sluice;
using namespace sluice::transport;
using namespace sluice::transport::testing;
using clock_type = tcp_call_link::clock;

struct served_link {
  recording_sink sink;
  tcp_transport server{1, sink};
  std::string address = server.listen("127.0.0.1:0").value();
  std::unique_ptr<tcp_call_link> caller;
  link_id link = 0;

  served_link() {
    auto opened = tcp_call_link::open(address, make_frame(1), clock_type::now() + 5s);
    REQUIRE_MESSAGE(opened.ok(), (opened ? "" : opened.error().to_string()));
    caller = std::move(*opened);
    link = sink.wait_up().value();
    REQUIRE(sink.wait_frames(link, 1));  // the hello
    CHECK(envelope_intact(sink.frames(link)[0], 1));
  }
};

}  // namespace

TEST_CASE("tcp call link: frames of every size come back whole, in order, several per read") {
  served_link s;
  // Small ones back to back (one read takes several), one past the
  // read-ahead, one of none.
  std::vector<std::size_t> sizes{0, 10, 4096, 3 * tcp_call_link::read_ahead_bytes + 5, 1, 0, 70'000};
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    REQUIRE(s.server.send(s.link, make_frame(100 + i, patterned(sizes[i], i), 1 + i % 3)).ok());
  }
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    auto frame = s.caller->receive(clock_type::now() + 5s);
    REQUIRE_MESSAGE(frame.ok(), (frame ? "" : frame.error().to_string()));
    CHECK(envelope_intact(*frame, 100 + i, 1 + i % 3));
    CHECK(is_patterned(frame->payload, sizes[i], i));
  }
  // And the other way, payload and all.
  REQUIRE(s.caller->send(make_frame(7, patterned(200'000, 3)), clock_type::now() + 5s).ok());
  REQUIRE(s.sink.wait_frames(s.link, 2));
  auto got = s.sink.frames(s.link)[1];
  CHECK(envelope_intact(got, 7));
  CHECK(is_patterned(got.payload, 200'000, 3));
}

TEST_CASE("tcp call link: a receive that times out keeps the link, and the next one finishes the frame") {
  served_link s;
  auto start = clock_type::now();
  auto none = s.caller->receive(start + 50ms);
  CHECK(none.code() == errc::timeout);
  CHECK(clock_type::now() - start >= 50ms);
  CHECK(s.caller->usable());
  REQUIRE(s.server.send(s.link, make_frame(9, patterned(1 << 20, 9))).ok());
  auto frame = s.caller->receive(clock_type::now() + 5s);
  REQUIRE(frame.ok());
  CHECK(envelope_intact(*frame, 9));
  CHECK(is_patterned(frame->payload, 1 << 20, 9));
}

TEST_CASE("tcp call link: the peer going away, a shutdown and a malformed frame end it with a typed error") {
  SUBCASE("the peer closes") {
    served_link s;
    s.server.close(s.link);
    auto r = s.caller->receive(clock_type::now() + 5s);
    CHECK(r.code() == errc::unavailable);
    CHECK_FALSE(s.caller->usable());
    CHECK(s.caller->send(make_frame(2), clock_type::now() + 1s).code() == errc::unavailable);
  }
  SUBCASE("another thread shuts it down while this one waits") {
    served_link s;
    std::thread stopper{[&] {
      std::this_thread::sleep_for(50ms);
      s.caller->shutdown();
    }};
    auto r = s.caller->receive(clock_type::now() + 10s);
    stopper.join();
    CHECK(r.code() == errc::unavailable);
  }
}

TEST_CASE("tcp call link: a header that is not a frame's is refused as a protocol error") {
  // A raw peer: the tcp transport never sends what does not parse.
  int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  socklen_t length = sizeof a;
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &length);
  auto caller = tcp_call_link::open("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), make_frame(1),
                                    clock_type::now() + 5s)
                    .value();
  int peer = ::accept(listener, nullptr, nullptr);
  REQUIRE(peer >= 0);
  auto frame = make_frame(2);
  std::vector<std::byte> bytes(frame.head.span().begin(), frame.head.span().end());
  bytes[0] = std::byte{'X'};  // the magic
  REQUIRE(::write(peer, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()));
  auto r = caller->receive(clock_type::now() + 5s);
  CHECK(r.code() == errc::protocol);
  CHECK_FALSE(caller->usable());
  ::close(peer);
  ::close(listener);
}

TEST_CASE("tcp call link: a frame past the limits is refused before anything is allocated") {
  recording_sink sink;
  tcp_transport server{1, sink};
  auto address = server.listen("127.0.0.1:0").value();
  wire::frame_limits small{1 << 20, 1024};
  auto caller = tcp_call_link::open(address, make_frame(1), clock_type::now() + 5s, small).value();
  auto link = sink.wait_up().value();
  REQUIRE(server.send(link, make_frame(2, patterned(4096, 1))).ok());
  auto r = caller->receive(clock_type::now() + 5s);
  CHECK(r.code() == errc::protocol);
  CHECK_FALSE(caller->usable());
}

TEST_CASE("tcp call link: opening fails with a typed error") {
  CHECK(tcp_call_link::open("no-port", make_frame(1), clock_type::now() + 1s).code() == errc::invalid_argument);
  CHECK(tcp_call_link::open("example.com:80", make_frame(1), clock_type::now() + 1s).code() ==
        errc::invalid_argument);  // names would go through the resolver
  // A port nobody listens on: refused at once.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t length = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  auto refused = tcp_call_link::open("127.0.0.1:" + std::to_string(ntohs(a.sin_port)), make_frame(1),
                                     clock_type::now() + 1s);
  CHECK(refused.code() == errc::unavailable);
}
