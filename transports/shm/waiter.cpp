#include "transports/shm/waiter.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <ctime>
#include <optional>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sluice::transport::shm {
namespace {

// Spin iterations between two looks at the clock. Why 16: a pause is
// 10–140 cycles, so the clock (a vDSO call, ~20 ns) is read every ~1 µs
// at most, well inside the 30 µs spin budget.
constexpr std::uint32_t spins_per_clock_read = 16;

void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

std::uint32_t* futex_address(std::atomic<std::uint32_t>& word) noexcept {
  // Layout-compatible with a u32 (static_asserts in ring.cpp).
  return reinterpret_cast<std::uint32_t*>(&word);
}

// Sleeps while `word` reads `expected`, at most `timeout`. Shared futex (no
// FUTEX_PRIVATE_FLAG): the word lives in memory other processes map. Any
// return — woken, timed out, EAGAIN (the word changed), EINTR — sends the
// caller back to re-check the ring, so the result is not needed.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::chrono::nanoseconds timeout) noexcept {
  const auto ns = std::max<std::int64_t>(timeout.count(), 0);
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  relative.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  ::syscall(SYS_futex, futex_address(word), FUTEX_WAIT, expected, &relative, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>& word, int count) noexcept {
  ::syscall(SYS_futex, futex_address(word), FUTEX_WAKE, count, nullptr, nullptr, 0);
}

bool wake_if_sleeping(std::atomic<std::uint32_t>& word, int count) noexcept {
  if (!take_sleeper(word)) return false;
  futex_wake(word, count);
  return true;
}

std::optional<wait_result> readable_now(ring& r) {
  if (r.peek()) return wait_result::ready;
  if (r.broken()) return wait_result::broken;
  if (!r.closed()) return std::nullopt;
  // Commits made before the close are visible now: drain them first.
  if (r.peek()) return wait_result::ready;
  return r.broken() ? wait_result::broken : wait_result::closed;
}

std::optional<wait_result> writable_now(ring& r, std::uint32_t length) {
  if (r.closed()) return wait_result::closed;
  if (r.writable(length)) return wait_result::ready;
  if (r.broken()) return wait_result::broken;
  return std::nullopt;
}

}  // namespace

bool take_sleeper(std::atomic<std::uint32_t>& word) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (word.load(std::memory_order_relaxed) == ring_awake) return false;  // hot path: peer spins
  return word.exchange(ring_awake, std::memory_order_relaxed) != ring_awake;
}

template <class Check>
wait_result waiter::wait(std::atomic<std::uint32_t>& word, clock::time_point deadline, spin_policy& policy,
                         Check check) {
  if (auto now = check()) {
    if (*now == wait_result::ready) ++stats_.ready_at_once;
    return *now;
  }
  const auto budget = policy.next_budget();
  if (budget.count() == 0) {
    const auto started = clock::now();
    auto outcome = sleep_until_ready(word, deadline, check);
    if (outcome == wait_result::ready && clock::now() - started <= policy.max()) policy.would_have_paid();
    return outcome;
  }
  const auto spin_end = std::min(deadline, clock::now() + budget);
  // A spin cut short by a time slice goes on when it runs again, and is
  // not taken as a sign to stop spinning: most often the slice went to a
  // sibling (another client thread waiting on the same owner, whose
  // poller runs elsewhere), and the answer is there when this one runs
  // again. Ending the spin there sent 8 clients sharing a core to the
  // futex on every wait (4 KiB gets from 8 clients fell from ~415k to
  // ~285k ops/s). Spins that do not pay still shrink the budget
  // (spin_policy); a spin that hands the core away on purpose — the RPC
  // channel's, which yields — still stops when a yield took a slice.
  for (std::uint32_t spin = 1;; ++spin) {
    cpu_relax();
    if (auto now = check()) {
      if (*now == wait_result::ready) ++stats_.ready_spinning;
      policy.paid();
      return *now;
    }
    if (spin % spins_per_clock_read != 0) continue;
    if (clock::now() >= spin_end) break;
  }
  policy.wasted();
  return sleep_until_ready(word, deadline, check);
}

template <class Check>
wait_result waiter::sleep_until_ready(std::atomic<std::uint32_t>& word, clock::time_point deadline,
                                      Check check) {
  // Bound: each round sleeps at most nap_us and the loop ends at the
  // deadline; a peer spamming wake-ups only makes it re-check sooner.
  for (;;) {
    word.store(ring_sleeping, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // flag before the re-check
    if (auto now = check()) {
      word.store(ring_awake, std::memory_order_relaxed);
      if (*now == wait_result::ready) ++stats_.ready_after_sleep;
      return *now;
    }
    const auto now = clock::now();
    if (now >= deadline) {
      word.store(ring_awake, std::memory_order_relaxed);
      return wait_result::timed_out;
    }
    ++stats_.sleeps;
    futex_wait(word, ring_sleeping, std::min<clock::duration>(config_.nap_us, deadline - now));
    word.store(ring_awake, std::memory_order_relaxed);
  }
}

wait_result waiter::wait_readable(ring& r, clock::time_point deadline, bool woke_peer) {
  return wait(r.consumer_wake_word(), deadline, woke_peer ? woke_policy_ : policy_,
              [&r] { return readable_now(r); });
}

wait_result waiter::wait_writable(ring& r, std::uint32_t length, clock::time_point deadline) {
  if (length > r.record_bytes_max()) return wait_result::broken;
  return wait(r.producer_wake_word(), deadline, policy_, [&r, length] { return writable_now(r, length); });
}

bool notify_consumer(ring& r) noexcept { return wake_if_sleeping(r.consumer_wake_word(), 1); }

bool notify_producer(ring& r) noexcept { return wake_if_sleeping(r.producer_wake_word(), 1); }

void close_and_wake(ring& r) noexcept {
  r.close();
  // INT_MAX: at shutdown, wake anyone, even a misbehaving extra waiter.
  wake_if_sleeping(r.consumer_wake_word(), INT_MAX);
  wake_if_sleeping(r.producer_wake_word(), INT_MAX);
}

}  // namespace sluice::transport::shm
