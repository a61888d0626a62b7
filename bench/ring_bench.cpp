// ring_bench: round-trip latency through the shm rings between two
// processes, the client ↔ owner fast path of design.md ("Hot path").
//
// A client process and an echo server process (fork) share one memfd with
// two rings (requests, responses); the client is pinned to CPU 0 and the
// server to CPU 1 when both are available (toolbox.md: placement changes
// results 2–3×). For 64 B and 4 KiB payloads it measures:
//   hot     back-to-back round trips, both sides spinning;
//   idle    one round trip after each idle gap (default 200 µs), longer
//           than the spin budget, so the server is asleep on its futex
//           and every request pays a wake-up.
// A round trip: the client builds the request in place, commits, notifies,
// waits for the response and copies it out; the server copies each
// request into a response.
//
// Output: one line per figure, `figure <name> <value> us`, plus `#` notes.
// Usage: ring_bench [--hot N] [--idle N] [--gap-us N] [--client-spin-us N]
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "transports/shm/ring.hpp"
#include "transports/shm/waiter.hpp"

namespace {

using namespace sluice::transport::shm;
using clock_type = std::chrono::steady_clock;

// Room for a few 4 KiB records in flight; one is enough for ping-pong.
constexpr std::uint32_t ring_capacity_bytes = 1u << 20;
constexpr std::uint64_t warmup_messages = 2'000;
constexpr auto wait_limit = std::chrono::seconds{5};  // a stuck peer ends the run

struct bench_options {
  std::uint64_t hot_messages = 200'000;
  std::uint64_t idle_messages = 5'000;
  std::chrono::microseconds gap_us{200};
  /// The client's spin budget (the server keeps the default).
  std::chrono::microseconds client_spin_us = waiter_config{}.spin_us;
};

struct scenario {
  std::string name;  // "hot_64b"
  std::uint32_t payload_bytes = 0;
  std::uint64_t messages = 0;
  std::chrono::microseconds gap_us{0};
  std::chrono::microseconds client_spin_us{0};
};

// Lies in the shared memfd after the two rings: the server's report.
struct server_report {
  waiter_stats stats;
  int exit_code = -1;
};

// Whether CPUs 0 and 1 are both ours to pin to (read before any pinning).
bool can_pin_both() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  return ::sched_getaffinity(0, sizeof allowed, &allowed) == 0 && CPU_ISSET(0, &allowed) &&
         CPU_ISSET(1, &allowed);
}

void pin_to_cpu(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  ::sched_setaffinity(0, sizeof one, &one);
}

// The echo server: runs until the client closes the request ring.
int serve(std::span<std::byte> requests_area, std::span<std::byte> responses_area, server_report& report) {
  auto requests = ring::attach(requests_area);
  auto responses = ring::attach(responses_area);
  if (!requests || !responses) return 1;
  waiter w;
  for (;;) {
    const auto outcome = w.wait_readable(*requests, clock_type::time_point::max());
    if (outcome == wait_result::closed) break;
    if (outcome != wait_result::ready) return 2;
    auto request = requests->peek();
    if (!request) return 3;
    auto response = responses->reserve(static_cast<std::uint32_t>(request->size()));
    if (!response) return 4;  // one in flight: there is always room
    std::memcpy(response->data(), request->data(), request->size());
    responses->commit();
    requests->pop();
    notify_consumer(*responses);
    notify_producer(*requests);
  }
  report.stats = w.stats();
  return 0;
}

// One round trip from the client; nothing on failure (the server died or
// the rings broke).
std::optional<std::chrono::nanoseconds> round_trip(ring& requests, ring& responses, waiter& w,
                                                   std::uint64_t sequence, std::vector<std::byte>& copy) {
  const auto start = clock_type::now();
  auto request = requests.reserve(static_cast<std::uint32_t>(copy.size()));
  if (!request) return std::nullopt;
  std::memset(request->data(), static_cast<int>(sequence & 0xff), request->size());
  requests.commit();
  notify_consumer(requests);
  if (w.wait_readable(responses, clock_type::now() + wait_limit) != wait_result::ready) return std::nullopt;
  auto response = responses.peek();
  if (!response || response->size() != copy.size()) return std::nullopt;
  std::memcpy(copy.data(), response->data(), response->size());
  responses.pop();
  notify_producer(responses);
  return clock_type::now() - start;
}

double percentile_us(std::vector<std::chrono::nanoseconds>& samples, double fraction) {
  const auto at = static_cast<std::size_t>(fraction * static_cast<double>(samples.size() - 1));
  std::nth_element(samples.begin(), samples.begin() + static_cast<std::ptrdiff_t>(at), samples.end());
  return static_cast<double>(samples[at].count()) / 1000.0;
}

// The client side of one scenario. Returns false when the run failed.
bool measure(const scenario& s, ring& requests, ring& responses, std::vector<std::chrono::nanoseconds>& samples) {
  waiter w{waiter_config{s.client_spin_us, waiter_config{}.nap_us}};
  std::vector<std::byte> copy(s.payload_bytes);
  samples.reserve(s.messages);
  for (std::uint64_t i = 0; i < warmup_messages + s.messages; ++i) {
    if (s.gap_us.count() > 0) std::this_thread::sleep_for(s.gap_us);
    auto rtt = round_trip(requests, responses, w, i, copy);
    if (!rtt) return false;
    if (i >= warmup_messages) samples.push_back(*rtt);
  }
  const auto& st = w.stats();
  std::printf("# %s client waits: at once %llu, spinning %llu, after sleep %llu\n", s.name.c_str(),
              static_cast<unsigned long long>(st.ready_at_once), static_cast<unsigned long long>(st.ready_spinning),
              static_cast<unsigned long long>(st.ready_after_sleep));
  return true;
}

class shared_memory {
 public:
  explicit shared_memory(std::size_t bytes) : bytes_(bytes) {
    const int fd = ::memfd_create("sluice-ring-bench", MFD_CLOEXEC);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) std::exit(1);
    void* mapped = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);  // the mapping keeps the memory
    if (mapped == MAP_FAILED) std::exit(1);
    base_ = static_cast<std::byte*>(mapped);
  }
  shared_memory(const shared_memory&) = delete;
  shared_memory& operator=(const shared_memory&) = delete;
  ~shared_memory() { ::munmap(base_, bytes_); }
  std::span<std::byte> slice(std::size_t offset, std::size_t bytes) const { return {base_ + offset, bytes}; }

 private:
  std::size_t bytes_;
  std::byte* base_ = nullptr;
};

bool run_scenario(const scenario& s, bool pinned) {
  const std::size_t ring_bytes = ring_area_bytes(ring_capacity_bytes);
  shared_memory memory{2 * ring_bytes + 4096};
  auto requests_area = memory.slice(0, ring_bytes);
  auto responses_area = memory.slice(ring_bytes, ring_bytes);
  auto* report = new (memory.slice(2 * ring_bytes, 4096).data()) server_report{};
  auto requests = ring::format(requests_area, ring_capacity_bytes);
  auto responses = ring::format(responses_area, ring_capacity_bytes);
  if (!requests || !responses) return false;

  const pid_t server = ::fork();
  if (server < 0) return false;
  if (server == 0) {
    if (pinned) pin_to_cpu(1);
    ::_exit(serve(requests_area, responses_area, *report));
  }
  std::vector<std::chrono::nanoseconds> samples;
  const bool ok = measure(s, *requests, *responses, samples);
  close_and_wake(*requests);
  int status = 0;
  ::waitpid(server, &status, 0);
  if (!ok || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::printf("# %s failed (server status %d)\n", s.name.c_str(), status);
    return false;
  }
  const auto& st = report->stats;
  std::printf("# %s server waits: at once %llu, spinning %llu, after sleep %llu (futex sleeps %llu)\n",
              s.name.c_str(), static_cast<unsigned long long>(st.ready_at_once),
              static_cast<unsigned long long>(st.ready_spinning), static_cast<unsigned long long>(st.ready_after_sleep),
              static_cast<unsigned long long>(st.sleeps));
  std::printf("figure shm_ring_rtt_%s_p50_us %.2f us\n", s.name.c_str(), percentile_us(samples, 0.50));
  std::printf("figure shm_ring_rtt_%s_p99_us %.2f us\n", s.name.c_str(), percentile_us(samples, 0.99));
  std::fflush(stdout);
  return true;
}

bench_options parse(int argc, char** argv) {
  bench_options out;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view flag = argv[i];
    const auto value = std::strtoull(argv[i + 1], nullptr, 10);
    if (flag == "--hot") out.hot_messages = value;
    else if (flag == "--idle") out.idle_messages = value;
    else if (flag == "--gap-us") out.gap_us = std::chrono::microseconds{value};
    else if (flag == "--client-spin-us") out.client_spin_us = std::chrono::microseconds{value};
    else {
      std::fprintf(stderr, "usage: ring_bench [--hot N] [--idle N] [--gap-us N] [--client-spin-us N]\n");
      std::exit(2);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bench_options options = parse(argc, argv);
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // the idle gaps should last what they say
  const bool pinned = can_pin_both();
  if (pinned) pin_to_cpu(0);
  std::printf("# client spins %lld us before it sleeps; the server 30 us\n",
              static_cast<long long>(options.client_spin_us.count()));
  std::printf("# %s\n", pinned ? "client pinned to CPU 0, server to CPU 1" : "not pinned (CPUs 0 and 1 not both available)");
  const std::string gap = "idle" + std::to_string(options.gap_us.count()) + "us";
  const scenario scenarios[] = {
      {"hot_64b", 64, options.hot_messages, {}, options.client_spin_us},
      {"hot_4kib", 4096, options.hot_messages, {}, options.client_spin_us},
      {gap + "_64b", 64, options.idle_messages, options.gap_us, options.client_spin_us},
      {gap + "_4kib", 4096, options.idle_messages, options.gap_us, options.client_spin_us},
  };
  bool ok = true;
  for (const auto& s : scenarios) ok = run_scenario(s, pinned) && ok;
  return ok ? 0 : 1;
}
