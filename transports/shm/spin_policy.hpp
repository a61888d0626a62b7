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
//   - a spin that runs out, or that finds it was preempted (a gap between
//     two looks at the clock far longer than the loop takes: another
//     thread had the core), halves the budget; small budgets drop to 0,
//     and the waiter sleeps at once;
//   - at budget 0, one wait in probe_every spins the full budget again,
//     so a host that has quieted down gets spinning back within a few
//     dozen waits.
//
// Plain code, no clock of its own (the caller reads it) and no atomics:
// one policy per waiting thread.
#pragma once

#include <chrono>
#include <cstdint>

namespace sluice::transport::shm {

class spin_policy {
 public:
  /// One wait in this many spins while the budget is 0.
  static constexpr std::uint32_t probe_every = 32;
  /// Two looks at the clock further apart than this while spinning mean
  /// the thread did not run in between. Why 50 µs: a spin loop looks at
  /// the clock about every µs, and a time slice taken by another thread
  /// is milliseconds long.
  static constexpr std::chrono::microseconds preemption_gap{50};

  explicit spin_policy(std::chrono::nanoseconds max) noexcept : max_(max), budget_(max) {}

  /// How long the wait that starts now may spin (0: sleep at once).
  std::chrono::nanoseconds next_budget() noexcept {
    if (budget_.count() > 0 || max_.count() == 0) return budget_;
    if (++since_probe_ < probe_every) return budget_;
    since_probe_ = 0;
    return max_;
  }
  /// The wait ended while it spun.
  void paid() noexcept {
    budget_ = budget_.count() == 0 ? max_ / 4 : budget_ * 2;
    if (budget_ > max_) budget_ = max_;
    ++paid_;
  }
  /// The spin ran out, or was preempted: the waiter sleeps.
  void wasted() noexcept {
    budget_ /= 2;
    if (budget_ < max_ / 16) budget_ = std::chrono::nanoseconds{0};
    ++wasted_;
  }
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
  std::uint64_t paid_ = 0;
  std::uint64_t wasted_ = 0;
};

}  // namespace sluice::transport::shm
