// trace: what happened in a run, folded into one hash. Two runs of one
// seed on one build must produce the same hash; --check-determinism keeps
// a short description of every event too and names the first one where
// two runs differ.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/time.hpp"

namespace sluice::sim {

class trace {
 public:
  /// `keep_events`: remember a description and running hash per event.
  explicit trace(bool keep_events) : keep_(keep_events) {}

  /// Folds one event into the hash. `describe` runs only when events are
  /// kept, so it may be costly.
  template <class Describe>
  void add(sim_time at, std::uint64_t kind, std::uint64_t a, std::uint64_t b, std::uint64_t c,
           Describe&& describe) {
    fold(at, kind, a, b, c);
    if (keep_) events_.push_back({hash_, describe()});
  }

  std::uint64_t hash() const noexcept { return hash_; }
  std::uint64_t count() const noexcept { return count_; }

  struct event {
    std::uint64_t hash_after;
    std::string text;
  };
  const std::vector<event>& events() const noexcept { return events_; }

 private:
  void fold(sim_time at, std::uint64_t kind, std::uint64_t a, std::uint64_t b, std::uint64_t c);

  bool keep_;
  std::uint64_t hash_ = 0x5eed;
  std::uint64_t count_ = 0;
  std::vector<event> events_;
};

/// 64-bit hash of bytes (for frames and values in the trace).
std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace sluice::sim
