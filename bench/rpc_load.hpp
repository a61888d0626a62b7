// rpc_load: the load the RPC benchmark puts on every system alike (Sluice,
// gRPC, Cap'n Proto RPC): 4 KiB echo calls, one at a time from one thread
// (c1), then 8 kept in flight by one thread (c8), each run for a fixed
// time after a warm-up, every answer checked. Header-only so that each
// peer's client links only its own RPC library.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <functional>
#include <string>
#include <vector>

namespace rpc_load {

using clock = std::chrono::steady_clock;

/// Bytes echoed per call.
constexpr std::size_t payload_bytes = 4096;
/// Calls in flight in the c8 run.
constexpr int outstanding_c8 = 8;
/// Calls before measuring: open lazy links, fault in buffers.
constexpr int warmup_calls = 2000;
/// Latency samples kept at most per run (a bound on memory).
constexpr std::size_t samples_max = 4'000'000;

/// The payload of call `n`: its first 8 bytes are n, so an answer to
/// another call is caught.
inline std::string payload_for(std::uint64_t n) {
  std::string s(payload_bytes, static_cast<char>('a' + n % 26));
  std::memcpy(s.data(), &n, sizeof n);
  return s;
}

inline bool answer_matches(const void* data, std::size_t size, std::uint64_t n) {
  if (size != payload_bytes) return false;
  std::uint64_t got = 0;
  std::memcpy(&got, data, sizeof got);
  // Every byte: the 8 of n, then the letter repeated (each byte equal to
  // the one after it, and the first of them the letter).
  auto* bytes = static_cast<const char*>(data);
  return got == n && bytes[sizeof got] == static_cast<char>('a' + n % 26) &&
         std::memcmp(bytes + sizeof got, bytes + sizeof got + 1, size - sizeof got - 1) == 0;
}

struct summary {
  std::size_t calls = 0;
  std::size_t errors = 0;
  double seconds = 0;
  double p50_us = 0;
  double p99_us = 0;
  double calls_per_s = 0;
};

inline summary summarize(std::vector<std::int64_t>& latencies_ns, std::size_t errors, clock::duration took) {
  summary s;
  s.calls = latencies_ns.size();
  s.errors = errors;
  s.seconds = std::chrono::duration<double>(took).count();
  s.calls_per_s = s.seconds > 0 ? static_cast<double>(s.calls) / s.seconds : 0;
  if (latencies_ns.empty()) return s;
  std::sort(latencies_ns.begin(), latencies_ns.end());
  auto at = [&latencies_ns](std::size_t percent) {
    return latencies_ns[std::min(latencies_ns.size() - 1, latencies_ns.size() * percent / 100)];
  };
  s.p50_us = static_cast<double>(at(50)) / 1000.0;
  s.p99_us = static_cast<double>(at(99)) / 1000.0;
  return s;
}

inline void print_figure(const std::string& name, double value, const char* unit) {
  if (value >= 100) {
    std::printf("figure %s %.0f %s\n", name.c_str(), value, unit);
  } else {
    std::printf("figure %s %.3g %s\n", name.c_str(), value, unit);
  }
}

/// One human line and the figure lines of a run, e.g. prefix
/// "rpc_grpc_echo_4k_c1".
inline void report(const std::string& prefix, const summary& s) {
  std::printf("%-28s %8zu calls in %.2f s: %9.0f calls/s, p50 %8.1f us, p99 %8.1f us, %zu errors\n",
              prefix.c_str(), s.calls, s.seconds, s.calls_per_s, s.p50_us, s.p99_us, s.errors);
  print_figure(prefix + "_p50_us", s.p50_us, "us");
  print_figure(prefix + "_p99_us", s.p99_us, "us");
  print_figure(prefix + "_calls_per_s", s.calls_per_s, "calls/s");
  print_figure(prefix + "_errors", static_cast<double>(s.errors), "count");
  std::fflush(stdout);
}

/// The command line of a peer's binary: `serve --port N` or
/// `call --port N [--seconds S]`; nothing when it is malformed.
struct peer_args {
  std::string mode;
  std::string port;
  double seconds = 2;
};

inline std::optional<peer_args> parse_peer_args(int argc, char** argv) {
  peer_args a;
  a.mode = argc > 1 ? argv[1] : "";
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--port") a.port = argv[i + 1];
    else if (flag == "--seconds") a.seconds = std::atof(argv[i + 1]);
    else return std::nullopt;
  }
  if ((a.mode != "serve" && a.mode != "call") || a.port.empty() || a.seconds <= 0) return std::nullopt;
  return a;
}

/// One call at a time: `call(n)` makes call n and returns whether its
/// answer was right.
inline summary run_sequential(const std::function<bool(std::uint64_t)>& call, clock::duration duration) {
  std::uint64_t n = 0;
  for (int i = 0; i < warmup_calls; ++i) call(n++);
  std::vector<std::int64_t> latencies;
  latencies.reserve(1 << 20);
  std::size_t errors = 0;
  auto start = clock::now();
  auto end = start + duration;
  auto now = start;
  while (now < end && latencies.size() < samples_max) {
    bool ok = call(n++);
    auto after = clock::now();
    if (ok) {
      latencies.push_back(std::chrono::nanoseconds{after - now}.count());
    } else {
      ++errors;
    }
    now = after;
  }
  return summarize(latencies, errors, now - start);
}

/// What a pipelined client tracks: the time each call in flight started.
class pipeline {
 public:
  explicit pipeline(clock::duration duration) : duration_(duration) { latencies_.reserve(1 << 21); }

  /// Call n finished now (ok: its answer was right). Returns whether
  /// another call should start.
  bool finished(std::uint64_t n, clock::time_point started, bool ok) {
    auto now = clock::now();
    if (n >= static_cast<std::uint64_t>(warmup_calls)) {
      if (!measuring_) {
        measuring_ = true;
        start_ = now;
      }
      if (ok) {
        if (latencies_.size() < samples_max) latencies_.push_back(std::chrono::nanoseconds{now - started}.count());
      } else {
        ++errors_;
      }
      last_ = now;
    }
    return !measuring_ || now - start_ < duration_;
  }
  std::uint64_t next() noexcept { return next_++; }
  summary result() { return summarize(latencies_, errors_, last_ - start_); }

 private:
  clock::duration duration_;
  std::vector<std::int64_t> latencies_;
  std::size_t errors_ = 0;
  std::uint64_t next_ = 0;
  bool measuring_ = false;
  clock::time_point start_{}, last_{};
};

}  // namespace rpc_load
