// mq_load: the load the MQ benchmark puts on every system alike (Sluice,
// NATS JetStream, Redis Streams): one producer thread and one consumer
// thread, each with its own connection, run for a fixed time. The
// producer sends message after message, each waiting for the server's
// acknowledgement; the consumer takes batches, checks every byte of every
// message and acks each batch before taking the next. Header-only so that
// each peer's driver links only its own client library.
//
// Message n (numbered from 0 in each run) holds n in its first 8 bytes and
// pattern words derived from n after them (see fill / check), so a
// message that is lost, repeated, reordered or torn is counted as bad.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <thread>

namespace mq_load {

using clock = std::chrono::steady_clock;

// --- limits (one place) --------------------------------------------------

/// Messages produced and not yet acked, at most: the producer waits for
/// acks past this, the same bound for every system, so a slow consumer
/// never lets a topic grow without limit (and the pool, the stream, the
/// server's memory stay bounded).
inline std::uint64_t window_for(std::size_t message_bytes) {
  if (message_bytes <= (64u << 10)) return 1024;
  if (message_bytes <= (4u << 20)) return 32;
  return 4;
}
/// Messages one batch (poll, fetch, XREADGROUP) returns at most.
inline std::size_t batch_for(std::size_t message_bytes) {
  if (message_bytes <= (64u << 10)) return 64;
  if (message_bytes <= (4u << 20)) return 16;
  return 4;
}
/// How long the consumer waits for the last messages after the producer
/// stopped before it gives up (they are then counted as lost).
constexpr std::chrono::seconds drain_limit{30};
/// The producer (consumer) stops after this many failures in a row
/// rather than spinning on a dead connection.
constexpr std::uint64_t consecutive_errors_max = 100;
/// How long one batch request waits for a message, in milliseconds.
constexpr int batch_wait_ms = 100;

// --- messages ------------------------------------------------------------

/// The pattern word at word index `i` (>= 1) of message `n`.
inline std::uint64_t pattern_word(std::uint64_t n, std::size_t i) {
  return (n + 1) * 0x9E3779B97F4A7C15ull + i;
}

/// Writes message `n` into `out` (a multiple of 8 bytes, at least 8).
inline void fill(std::span<std::byte> out, std::uint64_t n) {
  auto words = out.size() / sizeof(std::uint64_t);
  auto* w = reinterpret_cast<std::uint64_t*>(out.data());
  w[0] = n;
  const std::uint64_t base = (n + 1) * 0x9E3779B97F4A7C15ull;
  for (std::size_t i = 1; i < words; ++i) w[i] = base + i;
}

/// The message number in `bytes` when every byte of it is message n's;
/// otherwise ~0.
inline std::uint64_t check(std::span<const std::byte> bytes, std::size_t expected_bytes) {
  if (bytes.size() != expected_bytes || bytes.size() < sizeof(std::uint64_t)) return ~std::uint64_t{0};
  auto words = bytes.size() / sizeof(std::uint64_t);
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof n);
  const std::uint64_t base = (n + 1) * 0x9E3779B97F4A7C15ull;
  std::uint64_t diff = 0;
  // memcpy per word: the payload's alignment is the system's business.
  for (std::size_t i = 1; i < words; ++i) {
    std::uint64_t got = 0;
    std::memcpy(&got, bytes.data() + i * sizeof got, sizeof got);
    diff |= got ^ (base + i);
  }
  return diff == 0 ? n : ~std::uint64_t{0};
}

// --- the run -------------------------------------------------------------

/// What one system does for the load. Each function runs on one thread
/// (produce on the producer's, consume on the consumer's).
struct system_calls {
  /// Produces message n (the system fills it, see fill) and returns once
  /// the server acknowledged it; false on failure.
  std::function<bool(std::uint64_t n)> produce;
  /// Takes one batch (waiting up to batch_wait_ms), calls `seen` with
  /// each message's bytes in order, then acks the whole batch. Returns
  /// the number of messages taken, or -1 on failure.
  std::function<long(std::size_t max_messages, const std::function<void(std::span<const std::byte>)>& seen)>
      consume;
};

struct outcome {
  std::uint64_t produced = 0;
  std::uint64_t consumed = 0;   ///< taken, checked and acked
  std::uint64_t bad = 0;        ///< taken with the wrong bytes or out of order
  std::uint64_t errors = 0;     ///< failed calls, plus messages never consumed
  double seconds = 0;           ///< from the start until the last ack
  double messages_per_s() const { return seconds > 0 ? static_cast<double>(consumed) / seconds : 0; }
};

/// Runs the load for `seconds` (the producer's time; the consumer then
/// drains), or until `messages_max` are produced (0: no bound).
inline outcome run(system_calls& calls, std::size_t message_bytes, double seconds, std::uint64_t messages_max = 0) {
  const std::uint64_t window = window_for(message_bytes);
  const std::size_t batch = batch_for(message_bytes);
  std::atomic<std::uint64_t> acked{0};
  std::atomic<std::uint64_t> produced{0};
  std::atomic<bool> producer_done{false};
  outcome out;
  std::uint64_t producer_errors = 0;  // the producer thread's own count
  auto t0 = clock::now();
  auto stop_at = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));

  std::thread producer([&] {
    std::uint64_t n = 0, failures = 0;
    while (clock::now() < stop_at && (messages_max == 0 || n < messages_max)) {
      for (auto a = acked.load(); n - a >= window; a = acked.load()) acked.wait(a);
      if (calls.produce(n)) {
        produced.store(++n);
        failures = 0;
      } else {
        ++producer_errors;
        if (++failures >= consecutive_errors_max) break;
      }
    }
    producer_done.store(true);
  });

  std::uint64_t next = 0, failures = 0;
  clock::time_point drain_deadline{};
  auto seen = [&](std::span<const std::byte> bytes) {
    if (check(bytes, message_bytes) != next) ++out.bad;
    ++next;
  };
  while (true) {
    if (producer_done.load() && next >= produced.load()) break;
    if (producer_done.load()) {
      if (drain_deadline == clock::time_point{}) drain_deadline = clock::now() + drain_limit;
      if (clock::now() > drain_deadline) break;
    }
    long got = calls.consume(batch, seen);
    if (got < 0) {
      ++out.errors;
      if (++failures >= consecutive_errors_max) break;
      continue;
    }
    failures = 0;
    acked.store(next);
    acked.notify_one();
  }
  out.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  // A consumer that gave up leaves the producer waiting on the window.
  acked.store(~std::uint64_t{0} / 2);
  acked.notify_one();
  producer.join();
  out.errors += producer_errors;
  out.produced = produced.load();
  out.consumed = next;
  if (out.consumed < out.produced) out.errors += out.produced - out.consumed;
  return out;
}

// --- output --------------------------------------------------------------

inline void print_figure(const std::string& name, double value, const char* unit) {
  if (value >= 100) {
    std::printf("figure %s %.0f %s\n", name.c_str(), value, unit);
  } else {
    std::printf("figure %s %.3g %s\n", name.c_str(), value, unit);
  }
}

inline void print_run(const char* what, const outcome& o, std::size_t message_bytes) {
  double gb_s = static_cast<double>(o.consumed) * static_cast<double>(message_bytes) / o.seconds / 1e9;
  std::printf("%s: %llu messages in %.2f s: %.0f msgs/s, %.3g GB/s, %llu bad, %llu errors\n", what,
              static_cast<unsigned long long>(o.consumed), o.seconds, o.messages_per_s(), gb_s,
              static_cast<unsigned long long>(o.bad), static_cast<unsigned long long>(o.errors));
  std::fflush(stdout);
}

/// MQ_SECONDS-style argument parsing shared by the drivers: --seconds S.
inline double seconds_arg(int argc, char** argv, double fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string{argv[i]} == "--seconds") return std::max(0.05, std::atof(argv[i + 1]));
  }
  return fallback;
}

}  // namespace mq_load
