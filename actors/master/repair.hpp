// repair: the objects below their copy target, and the copies being made
// to restore them, within limits on how many at once and how many bytes
// per second. Pure bookkeeping: no I/O, time passed in, deterministic
// order. The master counts each object's copies and starts the copies
// (master_repair.cpp); this decides which key goes next and when.
//
// A key is in one of four places, or none: queued (waiting for its turn,
// the fewest live copies first), in flight (a copy is being made),
// deferred (a copy failed or had nowhere to go; looked at again later) or
// stranded (below its target with no copy that can be read: nothing to
// copy from until a holder comes back).
//
// Invariants (asserted):
//   1. a key is in at most one of the four places, and queued at most
//      once (by_key_ and queue_ agree);
//   2. in flight never exceeds the concurrency limit;
//   3. the byte budget never exceeds one second's worth.
//
// Bounds: each place holds keys of the directory, at most one entry per
// object, so the directory's bound (the owners' memory, through their
// objects) is theirs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/common/endpoint.hpp"

namespace sluice::master {

struct repair_limits {
  std::uint32_t concurrency = 4;
  std::uint64_t bytes_per_second = 256ULL << 20;
};

class repair_queue {
 public:
  explicit repair_queue(repair_limits limits = {});

  /// `key` has `live` copies that count, fewer than its target, and one
  /// that can be read: queued (or moved to `live`) unless in flight.
  void want(const std::string& key, std::uint32_t live);
  /// `key` is below its target with nothing to copy from.
  void stranded(const std::string& key);
  /// `key` needs no copy (any more): out of every place but in flight.
  void drop(const std::string& key);
  /// Forgets what is queued, deferred and stranded (not what is in
  /// flight): a full count follows.
  void clear();

  /// The queued key with the fewest live copies, taken out of the queue,
  /// when the limits let another copy start at `now`; the caller starts
  /// it (started) or puts it back (want, defer, drop).
  std::optional<std::string> next(clock_time now);
  /// A copy of `bytes` of `key` (which next() handed out) started.
  void started(const std::string& key, std::uint64_t bytes);
  /// The copy of `key` ended; a failed one counts as failed and is
  /// looked at again at `retry_at`.
  void finished(const std::string& key, bool ok, std::uint64_t bytes, clock_time retry_at);
  /// `key` could not start (no owner to copy to): looked at again at `at`.
  void defer(const std::string& key, clock_time at);
  /// The deferred keys whose time came, taken out, in time order.
  std::vector<std::string> due(clock_time now);

  bool in_flight(const std::string& key) const { return in_flight_.contains(key); }
  std::size_t queued() const noexcept { return queue_.size(); }
  std::size_t in_flight_count() const noexcept { return in_flight_.size(); }
  /// Keys below their target that have a copy to read: queued, in flight
  /// or deferred.
  std::size_t under_replicated() const noexcept { return queue_.size() + in_flight_.size() + deferred_.size(); }
  std::size_t stranded_count() const noexcept { return stranded_.size(); }
  std::uint64_t copies_made() const noexcept { return copies_made_; }
  std::uint64_t bytes_copied() const noexcept { return bytes_copied_; }
  std::uint64_t copies_failed() const noexcept { return copies_failed_; }

 private:
  void refill(clock_time now);
  void unqueue(const std::string& key);

  repair_limits limits_;
  /// (live copies, key): the fewest first, then key order.
  std::set<std::pair<std::uint32_t, std::string>> queue_;
  std::map<std::string, std::uint32_t, std::less<>> by_key_;
  /// Key → bytes being copied.
  std::map<std::string, std::uint64_t, std::less<>> in_flight_;
  /// Key → when to look at it again.
  std::map<std::string, clock_time, std::less<>> deferred_;
  std::set<std::string, std::less<>> stranded_;
  /// Bytes that may start now; below 0 after a copy larger than the
  /// budget, which later refills pay back.
  std::int64_t budget_ = 0;
  std::optional<clock_time> refilled_;
  std::uint64_t copies_made_ = 0;
  std::uint64_t bytes_copied_ = 0;
  std::uint64_t copies_failed_ = 0;
};

}  // namespace sluice::master
