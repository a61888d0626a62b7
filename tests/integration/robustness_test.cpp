// A node survives hostile bytes on its port: garbage, half frames, lying
// headers, malformed envelopes. Each bad link is closed; the node keeps
// serving everyone else and loses nothing it committed.

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "runtime/keys.hpp"
#include "runtime/rng.hpp"
#include "runtime/wire/codec.hpp"
#include "sluice/client.hpp"
#include "tests/support/process.hpp"

namespace {

using namespace std::chrono_literals;

const std::string sluice_bin = SLUICE_BINARY;

/// A raw TCP connection to host:port.
class raw_socket {
 public:
  explicit raw_socket(const std::string& address) {
    auto colon = address.rfind(':');
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<std::uint16_t>(std::stoi(address.substr(colon + 1))));
    inet_pton(AF_INET, address.substr(0, colon).c_str(), &sa.sin_addr);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  }
  ~raw_socket() { ::close(fd_); }
  int fd() const noexcept { return fd_; }
  void send(const void* data, std::size_t size) {
    // The node may close the link half way through; that is the point.
    (void)::send(fd_, data, size, MSG_NOSIGNAL);
  }
  void send(const std::string& bytes) { send(bytes.data(), bytes.size()); }
  /// True when the peer closed the connection within `timeout`.
  bool closed_by_peer(std::chrono::milliseconds timeout) {
    timeval tv{static_cast<time_t>(timeout.count() / 1000),
               static_cast<suseconds_t>((timeout.count() % 1000) * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[4096];
    while (true) {
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }

 private:
  int fd_ = -1;
};

std::string bytes_of(const sluice::wire::outbound_frame& f) {
  auto flat = sluice::wire::flatten(f);
  return {reinterpret_cast<const char*>(flat.data()), flat.size()};
}

std::string hello_frame(sluice::role as = sluice::role::client) {
  sluice::wire::envelope env;
  env.source = sluice::node_id{42};
  env.body = sluice::wire::hello{as, sluice::wire::protocol_version, "raw", ""};
  return bytes_of(sluice::wire::encode(env));
}

void attack(const std::string& address) {
  {  // random garbage
    raw_socket s{address};
    sluice::rng r{7};
    std::string junk(4096, '\0');
    for (auto& c : junk) c = static_cast<char>(r.next());
    s.send(junk);
    CHECK(s.closed_by_peer(5s));
  }
  {  // half a frame, then silence: the node waits, then we hang up
    raw_socket s{address};
    auto frame = hello_frame();
    s.send(frame.data(), frame.size() / 2);
  }
  {  // a header that announces an enormous payload
    raw_socket s{address};
    sluice::wire::frame_header h{sluice::wire::frame_version, 0, 8, 1ULL << 50};
    auto bytes = sluice::wire::encode_frame_header(h);
    s.send(bytes.data(), bytes.size());
    CHECK(s.closed_by_peer(5s));
  }
  {  // a well-framed envelope whose Cap'n Proto content is junk
    raw_socket s{address};
    sluice::wire::frame_header h{sluice::wire::frame_version, 0, 64, 0};
    auto header = sluice::wire::encode_frame_header(h);
    std::string frame(reinterpret_cast<const char*>(header.data()), header.size());
    frame += std::string(64, '\xff');
    s.send(frame);
    CHECK(s.closed_by_peer(5s));
  }
  {  // a proper hello, then a request with no frame around it
    raw_socket s{address};
    s.send(hello_frame());
    s.send(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    CHECK(s.closed_by_peer(5s));
  }
  {  // a request before any hello
    raw_socket s{address};
    sluice::wire::envelope env;
    env.request_id = 1;
    env.deadline_us = 1'000'000;
    env.body = sluice::wire::kv_get{"k"};
    s.send(bytes_of(sluice::wire::encode(env)));
    CHECK(s.closed_by_peer(5s));
  }
}

/// `sluice up` (an owner and its master) with one value committed.
struct node_up {
  sluice::test::process up{sluice_bin,
                           {"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"},
                           sluice::test::temp_path("up.log")};
  std::string owner, master;
  std::unique_ptr<sluice::client> c;

  node_up() {
    auto first = up.read_line(10s);
    auto second = up.read_line(10s);
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    owner = sluice::test::address_in(*first);
    master = sluice::test::address_in(*second);
    auto connected = sluice::client::connect(owner);
    REQUIRE(connected.ok());
    c = std::move(*connected);
    REQUIRE(c->put("before", "committed").ok());
  }
};

}  // namespace

TEST_CASE("robustness: garbage and half frames close only their own links and the node keeps serving") {
  node_up n;
  auto& up = n.up;
  auto& c = n.c;
  auto& owner = n.owner;
  auto& master = n.master;

  attack(owner);
  attack(master);

  // The node is alive, the committed value intact, and new work succeeds.
  CHECK_FALSE(up.wait(100ms).has_value());
  auto before = c->get("before");
  REQUIRE(before.ok());
  CHECK(before->str() == "committed");
  auto fresh = sluice::client::connect(owner);
  REQUIRE(fresh.ok());
  REQUIRE((*fresh)->put("after", "works").ok());
  CHECK((*fresh)->get("after").value().str() == "works");
  auto status = (*fresh)->status();
  REQUIRE(status.ok());
  REQUIRE(status->members.size() == 1);
  CHECK(status->members.front().up);
}

namespace {

/// Reads one whole frame from `fd` (blocking, with the socket's timeout).
std::optional<sluice::wire::message> read_frame(int fd) {
  std::string bytes(sluice::wire::frame_header_bytes, '\0');
  auto read_exact = [fd](char* out, std::size_t n) {
    std::size_t got = 0;
    while (got < n) {
      auto r = ::recv(fd, out + got, n - got, 0);
      if (r <= 0) return false;
      got += static_cast<std::size_t>(r);
    }
    return true;
  };
  if (!read_exact(bytes.data(), bytes.size())) return std::nullopt;
  sluice::wire::header_bytes raw;
  std::memcpy(raw.data(), bytes.data(), raw.size());
  auto h = sluice::wire::parse_frame_header(raw, sluice::wire::frame_limits{});
  if (!h) return std::nullopt;
  bytes.resize(bytes.size() + h->envelope_bytes + h->payload_bytes);
  if (!read_exact(bytes.data() + sluice::wire::frame_header_bytes, bytes.size() - sluice::wire::frame_header_bytes)) {
    return std::nullopt;
  }
  auto m = sluice::wire::decode_bytes(std::as_bytes(std::span{bytes}), sluice::wire::frame_limits{});
  if (!m) return std::nullopt;
  return std::move(*m);
}

}  // namespace

TEST_CASE("robustness: a commit naming a reservation the link does not hold is refused") {
  sluice::test::process up{sluice_bin,
                           {"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"},
                           sluice::test::temp_path("up.log")};
  auto first = up.read_line(10s);
  REQUIRE(first.has_value());
  auto owner = sluice::test::address_in(*first);

  // A real reservation exists on another (shared-memory) link.
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  auto local = sluice::client::connect(owner, options);
  REQUIRE(local.ok());
  auto w = (*local)->reserve("victim", 4096);
  REQUIRE(w.ok());

  raw_socket s{owner};
  s.send(hello_frame());
  for (std::uint64_t forged : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{999999}}) {
    sluice::wire::envelope env;
    env.request_id = forged;
    env.deadline_us = 2'000'000;
    env.body = sluice::wire::kv_commit{forged};
    s.send(bytes_of(sluice::wire::encode(env)));
    std::optional<sluice::wire::message> reply;
    while ((reply = read_frame(s.fd())) && reply->env.reply_to != forged) {
    }
    REQUIRE(reply.has_value());
    auto* e = std::get_if<sluice::wire::error_reply>(&reply->env.body);
    REQUIRE(e != nullptr);
    CHECK(e->code == sluice::errc::invalid_argument);
  }
  // The real owner of the reservation still commits it.
  std::memset(w->bytes().data(), 'v', 4096);
  REQUIRE(w->commit().ok());
  CHECK((*local)->get("victim").value().str() == std::string(4096, 'v'));
}

TEST_CASE("robustness: the master refuses a placement whose key or size is past the limits, and keeps serving") {
  node_up n;
  auto& up = n.up;
  auto& c = n.c;

  // Forged as an owner would send them: the library never asks for these.
  raw_socket s{n.master};
  s.send(hello_frame(sluice::role::owner));
  struct bad_place {
    std::string key;
    std::uint64_t size;
  };
  std::uint64_t id = 1;
  for (auto& bad : {bad_place{std::string(sluice::max_key_bytes + 1, 'k'), 10},
                    bad_place{std::string(70'000, 'k'), 10}, bad_place{"huge", std::uint64_t{1} << 60}}) {
    sluice::wire::envelope env;
    env.request_id = id;
    env.deadline_us = 2'000'000;
    sluice::wire::place p;
    p.key = bad.key;
    p.size = bad.size;
    env.body = p;
    s.send(bytes_of(sluice::wire::encode(env)));
    std::optional<sluice::wire::message> reply;
    while ((reply = read_frame(s.fd())) && reply->env.reply_to != id) {
    }
    REQUIRE(reply.has_value());
    auto* e = std::get_if<sluice::wire::error_reply>(&reply->env.body);
    REQUIRE(e != nullptr);
    CHECK(e->code == sluice::errc::invalid_argument);
    ++id;
  }
  CHECK_FALSE(up.wait(100ms).has_value());
  CHECK(c->get("before").value().str() == "committed");
  REQUIRE(c->put("after", "works").ok());
  CHECK(c->get("after").value().str() == "works");
}
