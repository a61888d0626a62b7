// event_pool: the bounded set of events one device's copies complete
// through, and the poller step that finds which completed. Plain,
// deterministic code over the device interface: no threads, no waiting,
// no device synchronisation — a poll queries each outstanding event once
// and returns what it found, and the owner turns those completions into
// actor messages.
//
// Invariants (asserted):
//   1. created() <= events_max, and outstanding() + free_count() == created();
//   2. an event is handed out by record() only from the free list, and goes
//      back to it only when a query found it done: an event is never
//      recorded again while work before its last record may still run;
//   3. completions are returned in the order their events were recorded
//      (among those one poll found done), each token exactly once.
//
// Thread safety: none; one thread (the owner actor) uses a pool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "runtime/gpu/device.hpp"

namespace sluice::gpu {

/// Events one device's pool keeps at most; a record beyond it answers
/// `overloaded`. Why 1024: each outstanding event is one copy (or one
/// chunk of a pipelined one) in flight; 1024 in flight at 4 MiB each is
/// 4 GiB on its way per device, more than any link fills, while a poll
/// step stays a bounded ~1024 queries (each well under a microsecond).
inline constexpr std::size_t gpu_events_max = 1024;

/// What a poll found about one recorded event.
struct gpu_completion {
  std::uint64_t token = 0;  ///< as given to record()
  bool ok = false;
  std::string error{};  ///< why not, when !ok
};

class event_pool {
 public:
  /// Events are created on `ordinal` as needed, up to `events_max`.
  /// REQUIRES: `dev` outlives the pool; 0 < events_max <= gpu_events_max.
  event_pool(device& dev, std::uint32_t ordinal, std::size_t events_max = gpu_events_max);
  /// Destroys every event it created; work still queued before an
  /// outstanding one runs on (CUDA lets a destroyed event's work finish).
  ~event_pool();
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  /// Records an event after the work queued on `stream` so far; the poll
  /// that finds it done reports `token`. The event is returned so that
  /// other streams may wait for it (device::stream_wait); it stays valid
  /// until a poll reports `token`. Errors: overloaded when events_max are
  /// outstanding; the device's own (the pool is unchanged then).
  result<event_handle> record(stream_handle stream, std::uint64_t token);

  /// One poller step: queries the outstanding events, oldest first, at
  /// most `queries_max` of them, and returns those found done or failed,
  /// in record order. A done event becomes free for reuse; a failed one
  /// (the device reported an error) is destroyed rather than reused.
  std::vector<gpu_completion> poll(std::size_t queries_max = gpu_events_max);

  std::size_t outstanding() const noexcept { return outstanding_.size(); }
  std::size_t free_count() const noexcept { return free_.size(); }
  std::size_t created() const noexcept { return created_; }
  std::size_t events_max() const noexcept { return events_max_; }

 private:
  struct pending {
    event_handle event{};
    std::uint64_t token = 0;
  };
  /// A free event, creating one when none is free and the bound allows.
  result<event_handle> take();
  void check_invariants() const;

  device& device_;
  std::uint32_t ordinal_;
  std::size_t events_max_;
  std::size_t created_ = 0;
  std::deque<event_handle> free_;     ///< the oldest freed is reused first
  std::deque<pending> outstanding_;  ///< in record order
};

}  // namespace sluice::gpu
