// spin_policy: how long a waiter spins before it sleeps, learned from its
// own recent waits, so that spinning happens only while it pays.
//
// A spin pays when what it waits for comes while it spins: the answer of
// a peer that runs on another core at that moment. It does not on a busy
// host, where the peer is waiting for a core — often the very one the
// spinner holds. Spinning there burns the time slice the peer needs, and
// each hop of a call costs a slice (milliseconds) instead of a wake-up
// (tens of µs). So:
//
//   - a wait that ends while spinning keeps (or doubles back to) the full
//     budget;
//   - spins that run out misses_to_shrink times in a row halve the budget
//     (one miss now and then is a wait a little longer than usual, not a
//     busy host), and so does a spin that finds it was preempted (a gap
//     between two looks at the clock far longer than the loop takes:
//     another thread had the core for a time slice), where the caller
//     counts that — the owner's poller and the RPC channel's yielding
//     spin do; a client's direct waiter does not, since the slice it
//     loses mostly goes to a sibling waiting on the same owner and its
//     answer is there when it runs again; small budgets drop to 0, and
//     the waiter sleeps at once;
//   - at budget 0, one wait in probe_every_min spins the full budget
//     again, so a host that has quieted down gets spinning back within a
//     few dozen waits; each probe that does not pay doubles that interval
//     (up to probe_every_max), since on a busy host a probe is a wait
//     spent spinning while the peer waits for the core;
//   - a wait that slept but whose answer came within the full budget
//     (the caller times it) says a spin would have paid: the probes come
//     at probe_every_min again. Without that, a phase of slow answers
//     (puts of new keys, which ask the master) spaces the probes out so
//     far that the fast answers after it go on paying a wake-up each for
//     thousands of calls.
//
// Plain code, no clock of its own (the caller reads it) and no atomics:
// one policy per waiting thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice::transport::shm {

class spin_policy {
 public:
  /// While the budget is 0, one wait in this many spins (a probe): at
  /// first, and after a probe that paid...
  static constexpr std::uint32_t probe_every_min = 32;
  /// ...and at most this far apart, doubling after each that did not.
  static constexpr std::uint32_t probe_every_max = 1 << 14;
  /// Spins that run out in a row before the budget is halved.
  static constexpr std::uint32_t misses_to_shrink = 4;
  /// Two looks at the clock further apart than this while spinning mean
  /// another thread had the core for a time slice. Why 500 µs: a spin
  /// loop looks at the clock about every µs, a thread it yields to on a
  /// quiet core (the owner's poller, a handler) gives it back within tens
  /// of µs, and a time slice taken by a CPU-bound neighbour is
  /// milliseconds long.
  static constexpr std::chrono::microseconds preemption_gap{500};

  explicit spin_policy(std::chrono::nanoseconds max) noexcept : max_(max), budget_(max) {}

  /// How long the wait that starts now may spin (0: sleep at once).
  std::chrono::nanoseconds next_budget() noexcept {
    probing_ = false;
    if (budget_.count() > 0 || max_.count() == 0) return budget_;
    if (++since_probe_ < probe_every_) return budget_;
    since_probe_ = 0;
    probing_ = true;
    return max_;
  }
  /// The wait ended while it spun.
  void paid() noexcept {
    budget_ = budget_.count() == 0 ? max_ / 4 : budget_ * 2;
    if (budget_ > max_) budget_ = max_;
    misses_in_row_ = 0;
    probe_every_ = probe_every_min;
    ++paid_;
  }
  /// The spin ran out (`preempted`: it found another thread had had the
  /// core): the waiter sleeps.
  void wasted(bool preempted = false) noexcept {
    ++wasted_;
    if (probing_) {
      if (probe_every_ < probe_every_max) probe_every_ *= 2;
      return;
    }
    if (!preempted && ++misses_in_row_ < misses_to_shrink) return;
    misses_in_row_ = 0;
    budget_ /= 2;
    if (budget_ < max_ / 16) budget_ = std::chrono::nanoseconds{0};
  }
  /// A wait that did not spin (budget 0) had its answer within max():
  /// a spin would have paid, so probe soon.
  void would_have_paid() noexcept { probe_every_ = probe_every_min; }
  /// Whether `gap` between two looks at the clock in a spin means the
  /// thread was preempted: then stop spinning (and call wasted()).
  static bool preempted(std::chrono::nanoseconds gap) noexcept { return gap > preemption_gap; }

  std::chrono::nanoseconds budget() const noexcept { return budget_; }
  std::chrono::nanoseconds max() const noexcept { return max_; }
  void set_max(std::chrono::nanoseconds max) noexcept {
    max_ = max;
    if (budget_ > max_) budget_ = max_;
  }
  std::uint64_t paid_count() const noexcept { return paid_; }
  std::uint64_t wasted_count() const noexcept { return wasted_; }

 private:
  std::chrono::nanoseconds max_;
  std::chrono::nanoseconds budget_;
  std::uint32_t since_probe_ = 0;
  std::uint32_t probe_every_ = probe_every_min;
  bool probing_ = false;  // the wait under way is a probe
  std::uint32_t misses_in_row_ = 0;
  std::uint64_t paid_ = 0;
  std::uint64_t wasted_ = 0;
};

/// Whether a sched_yield() to a thread that shares the core pays. It does
/// when that thread has a little to do and gives the core back (a handler
/// next to its owner answering a call: microseconds); it does not on a
/// busy host, where the core goes to a CPU-bound neighbour for a whole
/// time slice, and where a thread that yields also loses its place for
/// the next wake-up. A yield that took longer than
/// spin_policy::preemption_gap turns yielding off. Then one chance in
/// probe_every_min tries it again, and each probe that fails doubles that
/// interval (up to probe_every_max): a failed probe costs a time slice.
class yield_policy {
 public:
  static constexpr std::uint32_t probe_every_min = spin_policy::probe_every_min;
  static constexpr std::uint32_t probe_every_max = spin_policy::probe_every_max;

  /// Whether to yield now.
  bool allowed() noexcept {
    if (on_) return true;
    if (++since_probe_ < probe_every_) return false;
    since_probe_ = 0;
    return true;
  }
  /// A yield took `took`, from the call until it returned.
  void yielded(std::chrono::nanoseconds took) noexcept {
    bool was_on = on_;
    on_ = !spin_policy::preempted(took);
    if (on_) {
      probe_every_ = probe_every_min;
    } else if (!was_on && probe_every_ < probe_every_max) {
      probe_every_ *= 2;
    }
  }
  bool on() const noexcept { return on_; }

 private:
  bool on_ = true;
  std::uint32_t since_probe_ = 0;
  std::uint32_t probe_every_ = probe_every_min;
};

}  // namespace sluice::transport::shm
