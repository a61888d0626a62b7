// A TCP proxy for tests that need latency on real sockets (this kernel
// has no netem): it accepts on a loopback port, connects each accepted
// connection to a target, and passes the bytes on both ways, each chunk
// held back for a fixed delay. One thread; stopped and every socket
// closed when it goes.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>

namespace sluice::test {

class delay_proxy {
 public:
  /// Forwards to a port on 127.0.0.1 (set_target), `delay` added each way.
  explicit delay_proxy(std::chrono::milliseconds delay);
  ~delay_proxy();
  delay_proxy(const delay_proxy&) = delete;
  delay_proxy& operator=(const delay_proxy&) = delete;

  /// "127.0.0.1:PORT": where to connect instead of the target. Known
  /// before the target, so a node can be told to advertise it.
  std::string address() const;
  /// Where connections accepted from now on go. Thread-safe.
  void set_target(std::uint16_t port) { target_port_ = port; }
  /// Connections accepted so far. Thread-safe.
  std::size_t accepted() const noexcept { return accepted_.load(); }

 private:
  void run();

  std::atomic<std::uint16_t> target_port_{0};
  std::atomic<std::size_t> accepted_{0};
  std::chrono::milliseconds delay_;
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice::test
