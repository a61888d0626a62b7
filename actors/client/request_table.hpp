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
// Invariants (asserted):
//   1. every open request has exactly one deadline entry, and every
//      deadline entry names an open request;
//   2. ids are handed out once, growing from 1, never 0 (0 on the wire
//      means "no request");
//   3. at most `bound()` requests are open; open() refuses beyond it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
    auto [it, inserted] = open_.emplace(id, slot{deadline, std::move(entry)});
    SLUICE_ASSERT(inserted);
    auto [when, fresh] = deadlines_.emplace(deadline, id);
    SLUICE_ASSERT(fresh);
    check();
    return id;
  }

  /// The entry of an open request, or null once it finished.
  Entry* find(std::uint64_t id) {
    auto it = open_.find(id);
    return it == open_.end() ? nullptr : &it->second.entry;
  }

  /// Finishes request `id` and hands its entry back: the answer came, it
  /// timed out, its link broke. Nothing when it finished already (a late
  /// answer, a second answer), so each request completes once.
  std::optional<Entry> close(std::uint64_t id) {
    auto it = open_.find(id);
    if (it == open_.end()) return std::nullopt;
    auto erased = deadlines_.erase({it->second.deadline, id});
    SLUICE_ASSERT(erased == 1);
    std::optional<Entry> entry{std::move(it->second.entry)};
    open_.erase(it);
    check();
    return entry;
  }

  /// The open request whose deadline comes first, when that deadline is
  /// not after `now`. A sweep closes these one at a time until none is left.
  std::optional<std::uint64_t> first_expired(request_time now) const {
    if (deadlines_.empty() || deadlines_.begin()->first > now) return std::nullopt;
    return deadlines_.begin()->second;
  }

  /// The earliest deadline of an open request: when to sweep next.
  std::optional<request_time> next_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.begin()->first;
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

  void check() const {
    SLUICE_ASSERT(open_.size() == deadlines_.size());
    SLUICE_ASSERT(open_.size() <= bound_);
  }

  std::size_t bound_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, slot> open_;
  std::set<std::pair<request_time, std::uint64_t>> deadlines_;
};

}  // namespace sluice
