// mq_bench: MQ throughput on one owner's host, one producer and one
// consumer group of one member, both clients of the owner over shared
// memory (bench/run mq; docs/benchmarks.md, "mq").
//
//   mq_bench local --sluice HOST:PORT [--seconds S]
//       one process, two threads (the producer's and the consumer's, each
//       with its own sluice::client), against `sluice up`:
//       1 MiB and 64 MiB messages written in place (reserve, fill,
//       produce), 64 MiB through produce(topic, bytes), a 64 MiB memcpy in
//       the same process, the load's own fill and check of 64 MiB with no
//       queue, and 4 KiB messages through produce(topic, bytes), each batch
//       acked with its own call and, in a second run, by the next poll
//       --only 4k|1m|64m runs one size
//   mq_bench produce --sluice HOST:PORT --topic T [--seconds S]
//   mq_bench consume --sluice HOST:PORT --topic T
//       the two ends of a 64 MiB run between two hosts (bench/run mq, in
//       network namespaces): the producer writes for S seconds, then an
//       end mark; the consumer reports the rate from its first message to
//       the end mark
//
// Every message's bytes are checked by the consumer (mq_load::check).
// Output: a human line per run, then `figure NAME VALUE UNIT` lines.
// Exit status: 0 when every message arrived intact, 1 otherwise, 2 for
// bad usage.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/mq_load.hpp"
#include "sluice/client.hpp"
#include "sluice/mq.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::size_t small_bytes = 4u << 10;
constexpr std::size_t medium_bytes = 1u << 20;
constexpr std::size_t big_bytes = 64u << 20;

/// Warm-up before each measured run: a few messages through a topic of
/// their own, so links are open and the pool's pages have memory (16
/// messages of 64 MiB cover the default 1 GiB pool).
constexpr std::uint64_t warmup_messages_max = 2000;
constexpr std::uint64_t warmup_big_messages = 16;
constexpr double warmup_seconds_max = 1.0;
/// An end mark (xhost runs): a message this short is not a payload.
constexpr std::size_t end_mark_bytes = 8;

std::unique_ptr<sluice::client> connect(const std::string& address) {
  sluice::client_options options;
  options.transport = sluice::client_transport::shared_memory;
  options.timeout = 30s;  // a 64 MiB produce waits for room behind acks
  auto c = sluice::client::connect(address, options);
  if (!c) {
    std::fprintf(stderr, "mq_bench: connect %s: %s\n", address.c_str(), c.error().to_string().c_str());
    return nullptr;
  }
  return std::move(*c);
}

enum class produce_path { in_place, copy };
/// How the consumer acks a batch: with its own call (ack_upto, as the
/// peers do), or carried by the poll that takes the next batch
/// (ack_and_poll: committed before that poll runs).
enum class ack_path { own_call, in_poll };

/// The producer's and the consumer's clients, and a topic of one
/// partition for one run.
class sluice_run {
 public:
  sluice_run(sluice::client& producer, sluice::client& consumer) : producer_(producer), consumer_(consumer) {}

  /// Runs the load through a fresh topic, then deletes it.
  std::optional<mq_load::outcome> run(const std::string& topic, std::size_t bytes, produce_path path, ack_path acks,
                                      double seconds, std::uint64_t messages_max) {
    auto window = mq_load::window_for(bytes);
    sluice::topic_options options;
    // Above the load's own window, so the topic's bound never decides.
    options.max_messages = 2 * window;
    options.max_message_bytes = bytes;
    if (auto made = producer_.create_topic(topic, options); !made) {
      std::fprintf(stderr, "mq_bench: create_topic %s: %s\n", topic.c_str(), made.error().to_string().c_str());
      return std::nullopt;
    }
    auto batch = mq_load::batch_for(bytes);
    auto member = consumer_.subscribe(topic, {topic}, {.prefetch = static_cast<std::uint32_t>(batch)});
    if (!member) {
      std::fprintf(stderr, "mq_bench: subscribe: %s\n", member.error().to_string().c_str());
      return std::nullopt;
    }
    std::vector<std::byte> staging(path == produce_path::copy ? bytes : 0);
    mq_load::system_calls calls;
    calls.produce = [&](std::uint64_t n) { return produce_one(topic, bytes, path, staging, n); };
    std::vector<sluice::mq_message> unacked;  // ack_path::in_poll: the last batch, acked by the next poll
    calls.consume = [&](std::size_t max, const std::function<void(std::span<const std::byte>)>& seen) {
      if (acks == ack_path::in_poll) return consume_batch_acking(*member, max, unacked, seen);
      return consume_batch(*member, topic, max, seen);
    };
    auto out = mq_load::run(calls, bytes, seconds, messages_max);
    if (!unacked.empty() && !report(member->ack_upto(topic, unacked.back().partition, unacked.back().offset),
                                    "ack_upto")) {
      ++out.errors;
    }
    // Leaving nothing behind: a failure here counts against the run.
    if (!report(member->close(), "close") || !report(consumer_.delete_group(topic), "delete_group") ||
        !report(producer_.delete_topic(topic), "delete_topic")) {
      ++out.errors;
    }
    return out;
  }

 private:
  bool produce_one(const std::string& topic, std::size_t bytes, produce_path path, std::vector<std::byte>& staging,
                   std::uint64_t n) {
    if (path == produce_path::copy) {
      mq_load::fill(staging, n);
      auto at = producer_.produce(topic, std::span<const std::byte>{staging});
      return report(at, "produce");
    }
    auto room = producer_.reserve(topic, bytes);
    if (!report(room, "reserve")) return false;
    mq_load::fill(room->bytes(), n);
    return report(producer_.produce(std::move(*room)), "produce");
  }

  static long consume_batch(sluice::mq_consumer& member, const std::string& topic, std::size_t max,
                            const std::function<void(std::span<const std::byte>)>& seen) {
    auto batch = member.poll({.max_messages = max, .wait = std::chrono::milliseconds{mq_load::batch_wait_ms}});
    if (!report(batch, "poll")) return -1;
    if (batch->empty()) return 0;
    for (auto& m : *batch) seen(m.payload ? m.payload->bytes() : std::span<const std::byte>{});
    // One ack settles the batch: every message of the partition up to
    // its last offset (the peers ack a batch with one call too).
    auto acked = member.ack_upto(topic, batch->back().partition, batch->back().offset);
    if (!report(acked, "ack_upto")) return -1;
    return static_cast<long>(batch->size());
  }

  /// Takes a batch with the poll that acks the one before (`unacked`),
  /// which this batch then replaces.
  static long consume_batch_acking(sluice::mq_consumer& member, std::size_t max,
                                   std::vector<sluice::mq_message>& unacked,
                                   const std::function<void(std::span<const std::byte>)>& seen) {
    auto batch = member.ack_and_poll(unacked, {.max_messages = max, .wait = std::chrono::milliseconds{mq_load::batch_wait_ms}});
    if (!report(batch, "ack_and_poll")) return -1;
    unacked.clear();
    for (auto& m : *batch) seen(m.payload ? m.payload->bytes() : std::span<const std::byte>{});
    for (auto& m : *batch) m.payload = sluice::value{};  // only what an ack names is kept
    unacked = std::move(*batch);
    return static_cast<long>(unacked.size());
  }

  template <typename T>
  static bool report(const sluice::result<T>& r, const char* what) {
    if (r) return true;
    std::fprintf(stderr, "mq_bench: %s: %s\n", what, r.error().to_string().c_str());
    return false;
  }

  sluice::mq producer_;
  sluice::mq consumer_;
};

/// GB/s of the load's own work on one 64 MiB message, with no queue: fill
/// a warm buffer with message n, then check every byte of it, as the
/// producer and the consumer do (mq_load::fill, mq_load::check), on the
/// one thread, for `seconds`. The MQ run does that same work on one CPU
/// (both its threads are pinned to it), so this is what a hand-off that
/// cost nothing would reach there.
double fill_check_rate(double seconds) {
  std::vector<std::byte> buffer(big_bytes, std::byte{1});
  std::uint64_t n = 0, bad = 0;
  auto t0 = mq_load::clock::now();
  double took = 0;
  while (took < seconds) {
    mq_load::fill(buffer, n);
    if (mq_load::check(buffer, big_bytes) != n) ++bad;
    ++n;
    took = std::chrono::duration<double>(mq_load::clock::now() - t0).count();
  }
  if (bad != 0) std::fputs("mq_bench: fill and check: wrong bytes\n", stderr);
  return static_cast<double>(n * big_bytes) / took / 1e9;
}

/// GB/s of memcpy between two warm 64 MiB buffers, for `seconds`.
double memcpy_rate(double seconds) {
  std::vector<std::byte> source(big_bytes), dest(big_bytes, std::byte{1});
  mq_load::fill(source, 1);
  std::memcpy(dest.data(), source.data(), big_bytes);  // warm
  std::uint64_t copies = 0;
  auto t0 = mq_load::clock::now();
  double took = 0;
  while (took < seconds) {
    std::memcpy(dest.data(), source.data(), big_bytes);
    ++copies;
    took = std::chrono::duration<double>(mq_load::clock::now() - t0).count();
  }
  if (mq_load::check(dest, big_bytes) != 1) std::fputs("mq_bench: memcpy: wrong bytes\n", stderr);
  return static_cast<double>(copies * big_bytes) / took / 1e9;
}

struct measured {
  double value = 0;
  std::uint64_t failures = 0;  ///< bad messages and errors
};

/// One warm-up and one measured run of a message size and path.
measured measure(sluice_run& r, const char* label, std::size_t bytes, produce_path path, double seconds,
                  ack_path acks = ack_path::own_call) {
  static int topics = 0;  // a fresh topic per run: nothing left over from the last one
  auto name = [&](const char* what) { return std::string{"mq-bench-"} + label + "-" + what + std::to_string(++topics); };
  auto warmup_max = bytes == big_bytes ? warmup_big_messages : warmup_messages_max;
  auto warm = r.run(name("warm"), bytes, path, acks, std::min(seconds, warmup_seconds_max), warmup_max);
  auto got = r.run(name("run"), bytes, path, acks, seconds, 0);
  if (!warm || !got) return {0, 1};
  mq_load::print_run(label, *got, bytes);
  measured m;
  m.failures = got->bad + got->errors + warm->bad + warm->errors;
  m.value = bytes == small_bytes ? got->messages_per_s()
                                 : static_cast<double>(got->consumed * bytes) / got->seconds / 1e9;
  return m;
}

std::string arg(int argc, char** argv, const char* flag) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string{argv[i]} == flag) return argv[i + 1];
  }
  return {};
}

/// `--only 4k|1m|64m`: one message size of the local runs (for profiling
/// one path); empty runs them all.
int run_local(const std::string& address, double seconds, const std::string& only) {
  auto producer = connect(address);
  auto consumer = connect(address);
  if (!producer || !consumer) return 1;
  sluice_run r{*producer, *consumer};
  auto wanted = [&](const char* size) { return only.empty() || only == size; };
  std::uint64_t failures = 0;
  if (wanted("1m")) {
    auto m1 = measure(r, "1m", medium_bytes, produce_path::in_place, seconds);
    failures += m1.failures;
    mq_load::print_figure("mq_1m_gb_per_s", m1.value, "GB/s");
  }
  if (wanted("64m")) {
    auto m64 = measure(r, "64m", big_bytes, produce_path::in_place, seconds);
    auto m64_copy = measure(r, "64m-copy", big_bytes, produce_path::copy, seconds);
    double copy = memcpy_rate(seconds);
    std::printf("memcpy 64 MiB: %.3g GB/s\n", copy);
    failures += m64.failures + m64_copy.failures;
    mq_load::print_figure("mq_64m_gb_per_s", m64.value, "GB/s");
    mq_load::print_figure("mq_64m_produce_copy_gb_per_s", m64_copy.value, "GB/s");
    mq_load::print_figure("memcpy_64m_gb_per_s", copy, "GB/s");
    mq_load::print_figure("mq_64m_vs_memcpy", copy > 0 ? m64.value / copy : 0, "ratio");
    double own = fill_check_rate(seconds);
    std::printf("fill and check 64 MiB, no queue: %.3g GB/s\n", own);
    mq_load::print_figure("fill_check_64m_gb_per_s", own, "GB/s");
    mq_load::print_figure("mq_64m_vs_fill_check", own > 0 ? m64.value / own : 0, "ratio");
  }
  if (wanted("4k")) {
    auto m4 = measure(r, "4k", small_bytes, produce_path::copy, seconds);
    failures += m4.failures;
    mq_load::print_figure("mq_4k_msgs_per_s", m4.value, "msgs/s");
    auto m4_in_poll = measure(r, "4k-ack-in-poll", small_bytes, produce_path::copy, seconds, ack_path::in_poll);
    failures += m4_in_poll.failures;
    mq_load::print_figure("mq_4k_ack_in_poll_msgs_per_s", m4_in_poll.value, "msgs/s");
  }
  std::printf("figure mq_errors %llu count\n", static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}

// --- between hosts ---------------------------------------------------------

/// The topic both ends of an xhost run create, the same options on both:
/// one partition, at most `window` messages held (a produce past them
/// waits for the consumer's acks).
sluice::topic_options xhost_topic() {
  sluice::topic_options options;
  options.max_messages = mq_load::window_for(big_bytes);
  options.max_message_bytes = big_bytes;
  return options;
}
/// Messages of an xhost run before its clock starts: links open, and the
/// pages of both pools get memory.
constexpr std::uint64_t xhost_warmup_messages = 8;

/// Produces 64 MiB messages written in place for `seconds` after the
/// warm-up, then the end mark.
int run_produce(const std::string& address, const std::string& topic, double seconds) {
  auto c = connect(address);
  if (!c) return 1;
  sluice::mq q{*c};
  if (auto made = q.create_topic(topic, xhost_topic()); !made) {
    std::fprintf(stderr, "mq_bench: create_topic: %s\n", made.error().to_string().c_str());
    return 1;
  }
  mq_load::clock::time_point stop_at{};
  for (std::uint64_t n = 0; n <= xhost_warmup_messages || mq_load::clock::now() < stop_at; ++n) {
    if (n == xhost_warmup_messages) {
      stop_at = mq_load::clock::now() + std::chrono::duration_cast<mq_load::clock::duration>(
                                            std::chrono::duration<double>(seconds));
    }
    auto room = q.reserve(topic, big_bytes);
    if (!room) {
      std::fprintf(stderr, "mq_bench: reserve: %s\n", room.error().to_string().c_str());
      return 1;
    }
    mq_load::fill(room->bytes(), n);
    if (auto at = q.produce(std::move(*room)); !at) {
      std::fprintf(stderr, "mq_bench: produce: %s\n", at.error().to_string().c_str());
      return 1;
    }
  }
  std::vector<std::byte> end(end_mark_bytes);
  if (auto at = q.produce(topic, std::span<const std::byte>{end}); !at) {
    std::fprintf(stderr, "mq_bench: produce the end mark: %s\n", at.error().to_string().c_str());
    return 1;
  }
  return 0;
}

/// Consumes, checking every byte, until the end mark; reports GB/s from
/// the last warm-up message to the end mark.
int run_consume(const std::string& address, const std::string& topic) {
  auto c = connect(address);
  if (!c) return 1;
  sluice::mq q{*c};
  if (auto made = q.create_topic(topic, xhost_topic()); !made) {
    std::fprintf(stderr, "mq_bench: create_topic: %s\n", made.error().to_string().c_str());
    return 1;
  }
  auto batch = mq_load::batch_for(big_bytes);
  auto member = q.subscribe(topic, {topic}, {.prefetch = static_cast<std::uint32_t>(batch)});
  if (!member) {
    std::fprintf(stderr, "mq_bench: subscribe: %s\n", member.error().to_string().c_str());
    return 1;
  }
  // The group exists from here on: what the producer appends is kept for it.
  std::printf("ready\n");
  std::fflush(stdout);
  std::uint64_t next = 0, bad = 0;
  bool ended = false;
  mq_load::clock::time_point t0{};
  auto idle_until = mq_load::clock::now() + mq_load::drain_limit;
  while (!ended && mq_load::clock::now() < idle_until) {
    auto got = member->poll({.max_messages = batch, .wait = std::chrono::milliseconds{mq_load::batch_wait_ms}});
    if (!got) {
      std::fprintf(stderr, "mq_bench: poll: %s\n", got.error().to_string().c_str());
      return 1;
    }
    if (got->empty()) continue;
    idle_until = mq_load::clock::now() + mq_load::drain_limit;
    for (auto& m : *got) {
      auto bytes = m.payload ? m.payload->bytes() : std::span<const std::byte>{};
      if (bytes.size() == end_mark_bytes) {
        ended = true;
        break;
      }
      if (mq_load::check(bytes, big_bytes) != next) ++bad;
      if (++next == xhost_warmup_messages) t0 = mq_load::clock::now();
    }
    if (auto acked = member->ack_upto(topic, got->back().partition, got->back().offset); !acked) {
      std::fprintf(stderr, "mq_bench: ack_upto: %s\n", acked.error().to_string().c_str());
      return 1;
    }
  }
  double took = std::chrono::duration<double>(mq_load::clock::now() - t0).count();
  if (!ended || next <= xhost_warmup_messages) {
    std::fprintf(stderr, "mq_bench: no end mark after %llu messages\n", static_cast<unsigned long long>(next));
    return 1;
  }
  double gb_s = static_cast<double>((next - xhost_warmup_messages) * big_bytes) / took / 1e9;
  std::printf("64m across hosts: %llu messages (after %llu of warm-up) in %.2f s: %.3g GB/s, %llu bad\n",
              static_cast<unsigned long long>(next - xhost_warmup_messages),
              static_cast<unsigned long long>(xhost_warmup_messages), took, gb_s,
              static_cast<unsigned long long>(bad));
  mq_load::print_figure("mq_64m_xhost_gb_per_s", gb_s, "GB/s");
  std::printf("figure mq_xhost_errors %llu count\n", static_cast<unsigned long long>(bad));
  (void)member->close();  // leaving: the group's offsets are settled already
  return bad == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  auto address = arg(argc, argv, "--sluice");
  double seconds = mq_load::seconds_arg(argc, argv, 2.0);
  auto topic = arg(argc, argv, "--topic");
  if (mode == "local" && !address.empty()) return run_local(address, seconds, arg(argc, argv, "--only"));
  if (mode == "produce" && !address.empty() && !topic.empty()) return run_produce(address, topic, seconds);
  if (mode == "consume" && !address.empty() && !topic.empty()) return run_consume(address, topic);
  std::fputs("usage: mq_bench local --sluice HOST:PORT [--seconds S] [--only 4k|1m|64m]\n"
             "       mq_bench produce --sluice HOST:PORT --topic T [--seconds S]\n"
             "       mq_bench consume --sluice HOST:PORT --topic T\n",
             stderr);
  return 2;
}
