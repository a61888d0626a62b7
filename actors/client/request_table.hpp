// request_table: the requests one caller has in flight — their ids, their
// deadlines and what waits for each answer — for every piece of code that
// asks something of a peer and waits: a role actor's endpoint, a client's
// RPC channel and a thread's direct shm call.
//
// Plain code: the time is passed in, nothing here locks, sleeps or starts
// a thread; whoever owns a table uses it from one thread at a time (the
// endpoint from its actor, the RPC channel under its mutex). The
// simulator runs the endpoint's table on virtual time.
//
// Storage that stops allocating once warm: an open-addressing hash map
// of the open requests and a heap of their deadlines in a vector. A
// request that finishes leaves its heap entry behind; entries of finished
// requests are skipped when they come to the top, and the heap is rebuilt
// from the open requests when they outnumber those by far. (Each request
// on a caller's hot path — a get through the direct shm call — would
// otherwise cost two node allocations and two frees.)
//
// Invariants (asserted):
//   1. every open request has a deadline entry in the heap; the heap
//      holds at most 2 * size() + heap_slack entries;
//   2. ids are handed out once, growing from 1, never 0 (0 on the wire
//      means "no request");
//   3. at most `bound()` requests are open; open() refuses beyond it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include <sluice/result.hpp>

#include "runtime/assert.hpp"

namespace sluice {

/// The clock requests are timed by: CAF's actor clock is this one, and so
/// are the threads of the embedding API.
using request_clock = std::chrono::steady_clock;
using request_time = request_clock::time_point;

/// Bound on the requests one endpoint or RPC channel keeps open; beyond
/// it new requests fail with `overloaded` instead of growing memory
/// without limit.
inline constexpr std::size_t max_pending_requests = 1 << 20;

/// What a caller keeps per request is its own business: `Entry` (a reply
/// handler, the link the request went on, ...). Movable.
template <class Entry>
class request_table {
 public:
  /// `bound`: the most requests open at once (memory, not politeness: a
  /// peer that never answers makes a caller fill its table up to here).
  explicit request_table(std::size_t bound) : bound_(bound) { SLUICE_ASSERT(bound > 0); }

  /// Opens a request due by `deadline` and returns its id, or
  /// `overloaded` when `bound()` requests are open already.
  result<std::uint64_t> open(request_time deadline, Entry entry) {
    if (full()) {
      return fail(errc::overloaded, "too many requests in flight: " + std::to_string(bound_) + " are open");
    }
    auto id = next_id_++;
    SLUICE_ASSERT(id != 0);
    auto [it, inserted] = open_.try_emplace(id, slot{deadline, std::move(entry)});
    SLUICE_ASSERT(inserted);
    deadlines_.push_back({deadline, id});
    std::push_heap(deadlines_.begin(), deadlines_.end(), later);
    compact();
    return id;
  }

  /// The entry of an open request, or null once it finished.
  Entry* find(std::uint64_t id) {
    auto it = open_.find(id);
    return it == open_.end() ? nullptr : &it->second.entry;
  }
  const Entry* find(std::uint64_t id) const {
    auto it = open_.find(id);
    return it == open_.end() ? nullptr : &it->second.entry;
  }

  /// Finishes request `id` and hands its entry back: the answer came, it
  /// timed out, its link broke. Nothing when it finished already (a late
  /// answer, a second answer), so each request completes once.
  std::optional<Entry> close(std::uint64_t id) {
    auto it = open_.find(id);
    if (it == open_.end()) return std::nullopt;
    std::optional<Entry> entry{std::move(it->second.entry)};
    open_.erase(it);
    // Its heap entry stays until it comes to the top or a rebuild.
    compact();
    return entry;
  }

  /// The open request whose deadline comes first, when that deadline is
  /// not after `now`. A sweep closes these one at a time until none is left.
  std::optional<std::uint64_t> first_expired(request_time now) {
    drop_finished();
    if (deadlines_.empty() || deadlines_.front().first > now) return std::nullopt;
    return deadlines_.front().second;
  }

  /// The earliest deadline of an open request: when to sweep next.
  std::optional<request_time> next_deadline() {
    drop_finished();
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.front().first;
  }

  /// The ids of the open requests whose entry satisfies `pred`, in id
  /// order. Collected before anything is closed: the code that runs when
  /// a request closes may open new ones.
  template <class Pred>
  std::vector<std::uint64_t> ids_where(Pred pred) const {
    std::vector<std::uint64_t> out;
    for (auto& [id, s] : open_) {
      if (pred(s.entry)) out.push_back(id);
    }
    // The hash map's order is not the ids': sort, so that what callers
    // do with them does not depend on it.
    std::sort(out.begin(), out.end());
    return out;
  }

  /// True when open() would refuse: a caller that must answer a refused
  /// request itself asks first, so its entry is not spent.
  bool full() const noexcept { return open_.size() >= bound_; }
  std::size_t size() const noexcept { return open_.size(); }
  bool empty() const noexcept { return open_.empty(); }
  std::size_t bound() const noexcept { return bound_; }

 private:
  struct slot {
    request_time deadline;
    Entry entry;
  };

  using deadline_entry = std::pair<request_time, std::uint64_t>;
  /// Heap entries of finished requests tolerated beyond 2 * size().
  static constexpr std::size_t heap_slack = 64;

  /// The heap's order: the earliest deadline on top, then the lowest id.
  static bool later(const deadline_entry& a, const deadline_entry& b) { return a > b; }

  /// Pops heap entries of requests that finished, down to an open one.
  void drop_finished() {
    while (!deadlines_.empty() && !open_.contains(deadlines_.front().second)) {
      std::pop_heap(deadlines_.begin(), deadlines_.end(), later);
      deadlines_.pop_back();
    }
  }

  /// Rebuilds the heap from the open requests when finished ones
  /// outnumber them by far; keeps invariants 1 and 3.
  void compact() {
    if (deadlines_.size() > 2 * open_.size() + heap_slack) {
      deadlines_.clear();
      for (auto& [id, s] : open_) deadlines_.push_back({s.deadline, id});
      std::make_heap(deadlines_.begin(), deadlines_.end(), later);
    }
    SLUICE_ASSERT(deadlines_.size() >= open_.size());
    SLUICE_ASSERT(deadlines_.size() <= 2 * open_.size() + heap_slack);
    SLUICE_ASSERT(open_.size() <= bound_);
  }

  std::size_t bound_;
  std::uint64_t next_id_ = 1;
  absl::flat_hash_map<std::uint64_t, slot> open_;
  std::vector<deadline_entry> deadlines_;  // a heap by `later`
};

}  // namespace sluice
