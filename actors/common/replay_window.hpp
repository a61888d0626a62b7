// replay_window: which request ids arrived from one sender lately, so a
// request delivered twice is served once. Plain code, no I/O.
//
// Invariants (asserted):
//   1. ids are never 0: 0 on the wire means "no request", and callers
//      pass only requests;
//   2. bit 0 of the window stands for the highest id seen, which has
//      arrived (once any id arrived).
#pragma once

#include <bitset>
#include <cstdint>

#include "runtime/assert.hpp"

namespace sluice {

/// Ids from one sender grow; the window tolerates them arriving somewhat
/// out of order.
class replay_window {
 public:
  /// Ids more than this far below the highest seen count as repeats.
  static constexpr std::uint64_t size = 1024;
  /// True the first time `id` is seen (and records it).
  bool first_time(std::uint64_t id) {
    SLUICE_ASSERT(id != 0);
    if (id > highest_) {
      auto shift = id - highest_;
      seen_ = shift >= size ? std::bitset<size>{} : seen_ << shift;
      seen_.set(0);
      highest_ = id;
      return true;
    }
    SLUICE_ASSERT(seen_.test(0));
    auto age = highest_ - id;
    if (age >= size || seen_.test(age)) return false;
    seen_.set(age);
    return true;
  }

 private:
  std::uint64_t highest_ = 0;
  std::bitset<size> seen_;  // bit i: highest_ - i arrived
};

}  // namespace sluice
