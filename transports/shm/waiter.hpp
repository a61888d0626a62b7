// waiter: adaptive waiting on a shm ring — spin for a bounded time, then
// sleep on the ring's futex word until the peer wakes us (design.md, shm
// row: "busy-poll with a bounded spin, then futex sleep"; caf-0.17.md,
// "Scheduler latency": a path that must answer in microseconds after idle
// time needs a thread that is already spinning, and a park when idle).
//
// Protocol (one futex word per waiting side, in the ring header; the word
// is shared between processes, so the futex is NOT FUTEX_PRIVATE):
//
//   sleeper                                 waker
//   1. word = sleeping                      1. publish (commit/pop/close,
//   2. seq_cst fence                           release store)
//   3. re-check the ring; ready → word =    2. seq_cst fence
//      awake, return                        3. word == sleeping? then
//   4. futex_wait(word, sleeping, timeout)     exchange(awake) and, if it was
//   5. word = awake; go to 1                   sleeping, futex_wake
//
// The two fences order "flag, then check" against "publish, then check
// flag": at least one side sees the other's store, so either the sleeper
// sees the data and does not sleep, or the waker sees the flag and wakes
// it. futex_wait sleeps only while the word still reads `sleeping`, so a
// wake that comes between steps 3 and 4 is not lost. When the peer spins
// (its word reads awake) notify costs one fence and one load: no syscall.
//
// Every sleep has a timeout (waiter_config::nap_us), so a crashed peer or
// a garbage word in shared memory delays a waiter by at most one nap past
// its deadline.
//
// Thread safety: a waiter object is used by one thread. Wait for data on a
// ring only from its consumer thread, for room only from its producer.
#pragma once

#include <chrono>
#include <cstdint>

#include "transports/shm/ring.hpp"
#include "transports/shm/spin_policy.hpp"

namespace sluice::transport::shm {

struct waiter_config {
  /// How long a wait spins at most before it sleeps. Why 30 µs: a futex
  /// round trip across the two cores costs 37–74 µs (toolbox.md), so
  /// spinning for about half that catches most answers that are already
  /// on their way, while an idle waiter burns at most 30 µs of a core per
  /// wait. Each wait spins only as long as recent spins paid
  /// (spin_policy.hpp): on a busy host, not at all.
  std::chrono::microseconds spin_us{30};
  /// Longest single futex sleep. Why 10 ms: bounds how late a waiter sees
  /// a crashed peer or its deadline, and costs ~100 wake-ups/s when idle.
  std::chrono::microseconds nap_us{10'000};
  // Declared after nap_us, so that {spin_us, nap_us} still names those two.
  /// How long a wait spins at most after this side woke the peer (the
  /// wait's `woke_peer`). Why 100 µs: the answer then comes after a
  /// wake-up (37–74 µs, above) plus the peer's work, so a spin of
  /// spin_us never sees it; and when both sides sleep at once, each
  /// spins only if the other would answer within its spin — neither
  /// does, and every call pays two wake-ups (a 4 KiB put took 75–95 µs
  /// instead of 7–9 µs for thousands of calls after a phase of slow
  /// ones). A spin that lasts a wake-up is what gets both back to
  /// spinning. It has its own spin_policy, so on a busy host it stops.
  std::chrono::microseconds woke_spin_us{100};
};

enum class wait_result : std::uint8_t {
  ready,     ///< The ring has a record (consumer) or room (producer).
  closed,    ///< The ring is closed (and, for a consumer, drained).
  broken,    ///< The ring's shared state is inconsistent; close the channel.
  timed_out, ///< The deadline passed first.
};

/// Counters for tests and benchmarks: how waits ended.
struct waiter_stats {
  std::uint64_t ready_at_once = 0;  ///< Ready at the first look.
  std::uint64_t ready_spinning = 0; ///< Ready while spinning.
  std::uint64_t ready_after_sleep = 0;  ///< Ready after at least one futex sleep.
  std::uint64_t sleeps = 0;         ///< futex_wait calls.
};

class waiter {
 public:
  using clock = std::chrono::steady_clock;

  explicit waiter(waiter_config config = {}) noexcept
      : config_(config), policy_(config.spin_us), woke_policy_(config.woke_spin_us) {}

  /// Consumer: waits until peek() would return a record. Records left in a
  /// closed ring are still `ready`; `closed` only once it is drained.
  /// `woke_peer`: this side has just woken the peer that answers (its
  /// notify sent a wake-up), so an answer is at least a wake-up away: the
  /// spin is governed by woke_spin_us and a policy of its own.
  wait_result wait_readable(ring& r, clock::time_point deadline, bool woke_peer = false);
  /// Producer: waits until reserve(length) would succeed. REQUIRES:
  /// length <= r.record_bytes_max() (a longer record never fits: `broken`
  /// is returned at once rather than waiting forever).
  wait_result wait_writable(ring& r, std::uint32_t length, clock::time_point deadline);

  const waiter_stats& stats() const noexcept { return stats_; }
  const waiter_config& config() const noexcept { return config_; }
  const spin_policy& policy() const noexcept { return policy_; }

 private:
  template <class Check>
  wait_result wait(std::atomic<std::uint32_t>& word, clock::time_point deadline, spin_policy& policy,
                   Check check);
  template <class Check>
  wait_result sleep_until_ready(std::atomic<std::uint32_t>& word, clock::time_point deadline,
                                Check check);

  waiter_config config_;
  spin_policy policy_;
  spin_policy woke_policy_;  // waits that follow a wake-up this side sent
  waiter_stats stats_;
};

/// The waker half of the protocol, before the wake-up itself: after the
/// caller published (a release store, or a seq_cst one for close),
/// whether the side that sleeps on `word` flagged itself asleep; if so the
/// flag is cleared (one waker wins it) and the caller must wake that side
/// — a futex wake here, the owner's eventfd doorbell for its poller
/// (channel.hpp).
bool take_sleeper(std::atomic<std::uint32_t>& word) noexcept;

/// Producer, after commit() (one or a batch): wakes the consumer if it
/// sleeps. Returns whether a wake-up was sent (a syscall).
bool notify_consumer(ring& r) noexcept;
/// Consumer, after pop(): wakes the producer if it sleeps waiting for room.
bool notify_producer(ring& r) noexcept;
/// Either side: closes the ring and wakes both sides' sleepers (shutdown).
void close_and_wake(ring& r) noexcept;

}  // namespace sluice::transport::shm
