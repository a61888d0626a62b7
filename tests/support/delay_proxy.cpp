#include "tests/support/delay_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <stdexcept>
#include <vector>

namespace sluice::test {
namespace {

using proxy_clock = std::chrono::steady_clock;
constexpr std::size_t read_bytes_max = 64 * 1024;
constexpr int idle_poll_ms = 20;  // how often a quiet proxy looks at stop_

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/// Bytes read from `from`, to be written to `to` once `due`.
struct chunk {
  proxy_clock::time_point due;
  std::vector<char> bytes;
  std::size_t sent = 0;
};

/// One accepted connection and the one to the target.
struct session {
  int client = -1;
  int server = -1;
  std::deque<chunk> to_server;
  std::deque<chunk> to_client;
  bool broken = false;
  ~session() {
    if (client >= 0) ::close(client);
    if (server >= 0) ::close(server);
  }
};

void take_in(session& s, int fd, std::deque<chunk>& queue, std::chrono::milliseconds delay) {
  std::vector<char> buffer(read_bytes_max);
  auto n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    s.broken = true;
    return;
  }
  if (n < 0) return;
  buffer.resize(static_cast<std::size_t>(n));
  queue.push_back(chunk{proxy_clock::now() + delay, std::move(buffer)});
}

void pass_on(session& s, int fd, std::deque<chunk>& queue) {
  auto now = proxy_clock::now();
  while (!queue.empty() && queue.front().due <= now) {
    auto& c = queue.front();
    auto n = ::send(fd, c.bytes.data() + c.sent, c.bytes.size() - c.sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN && errno != EINTR) s.broken = true;
      return;
    }
    c.sent += static_cast<std::size_t>(n);
    if (c.sent < c.bytes.size()) return;
    queue.pop_front();
  }
}

int wait_ms(const std::vector<std::unique_ptr<session>>& sessions) {
  auto now = proxy_clock::now();
  auto wait = std::chrono::milliseconds{idle_poll_ms};
  for (auto& s : sessions) {
    for (auto* q : {&s->to_server, &s->to_client}) {
      if (q->empty()) continue;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(q->front().due - now);
      wait = std::min(wait, std::max(left, std::chrono::milliseconds{0}));
    }
  }
  return static_cast<int>(wait.count());
}

}  // namespace

delay_proxy::delay_proxy(std::chrono::milliseconds delay) : delay_(delay) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  auto a = loopback(0);
  socklen_t length = sizeof a;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_fd_, 64) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &length) != 0) {
    ::close(listen_fd_);
    throw std::runtime_error("delay_proxy: cannot listen on loopback");
  }
  port_ = ntohs(a.sin_port);
  thread_ = std::thread{[this] { run(); }};
}

delay_proxy::~delay_proxy() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::string delay_proxy::address() const { return "127.0.0.1:" + std::to_string(port_); }

void delay_proxy::run() {
  std::vector<std::unique_ptr<session>> sessions;
  while (!stop_) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    for (auto& s : sessions) {
      fds.push_back({s->client, static_cast<short>(POLLIN | (s->to_client.empty() ? 0 : POLLOUT)), 0});
      fds.push_back({s->server, static_cast<short>(POLLIN | (s->to_server.empty() ? 0 : POLLOUT)), 0});
    }
    ::poll(fds.data(), fds.size(), wait_ms(sessions));
    if ((fds[0].revents & POLLIN) != 0) {
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK);
      if (client >= 0) {
        ++accepted_;
        auto s = std::make_unique<session>();
        s->client = client;
        s->server = ::socket(AF_INET, SOCK_STREAM, 0);
        auto to = loopback(target_port_.load());
        // Loopback: the connect completes or is refused at once.
        if (::connect(s->server, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) s->broken = true;
        sessions.push_back(std::move(s));
      }
    }
    for (std::size_t i = 0; i < sessions.size(); ++i) {
      auto& s = *sessions[i];
      if (s.broken) continue;
      if ((fds[1 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) take_in(s, s.client, s.to_server, delay_);
      if ((fds[2 + 2 * i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) take_in(s, s.server, s.to_client, delay_);
    }
    for (auto& s : sessions) {
      if (s->broken) continue;
      pass_on(*s, s->server, s->to_server);
      pass_on(*s, s->client, s->to_client);
    }
    // A side that went away takes the other with it (what is held back is lost).
    std::erase_if(sessions, [](const auto& s) { return s->broken; });
  }
}

}  // namespace sluice::test
