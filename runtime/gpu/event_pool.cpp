#include "runtime/gpu/event_pool.hpp"

#include <fmt/format.h>

#include "runtime/assert.hpp"

namespace sluice::gpu {

event_pool::event_pool(device& dev, std::uint32_t ordinal, std::size_t events_max)
    : device_(dev), ordinal_(ordinal), events_max_(events_max) {
  SLUICE_ASSERT(events_max > 0);
  SLUICE_ASSERT(events_max <= gpu_events_max);
}

event_pool::~event_pool() {
  for (auto e : free_) (void)device_.destroy_event(e);
  for (auto& p : outstanding_) (void)device_.destroy_event(p.event);
}

result<event_handle> event_pool::take() {
  if (!free_.empty()) {
    auto e = free_.front();
    free_.pop_front();
    return e;
  }
  if (created_ == events_max_) {
    return error{errc::overloaded,
                 fmt::format("device {} has {} copies in flight, the most it tracks; retry once some complete",
                             ordinal_, events_max_)};
  }
  auto e = device_.create_event(ordinal_);
  if (!e) return e.error();
  ++created_;
  return *e;
}

result<event_handle> event_pool::record(stream_handle stream, std::uint64_t token) {
  auto e = take();
  if (!e) return e;
  if (auto ok = device_.record(*e, stream); !ok) {
    // Never recorded, so nothing can be running before it: free at once.
    free_.push_front(*e);
    return ok.error();
  }
  outstanding_.push_back({*e, token});
  check_invariants();
  return *e;
}

std::vector<gpu_completion> event_pool::poll(std::size_t queries_max) {
  std::vector<gpu_completion> done;
  std::deque<pending> still;
  std::size_t queried = 0;
  for (auto& p : outstanding_) {
    if (queried == queries_max) {
      still.push_back(p);
      continue;
    }
    ++queried;
    auto state = device_.query(p.event);
    if (state && *state == event_state::pending) {
      still.push_back(p);
    } else if (state) {
      done.push_back({.token = p.token, .ok = true});
      free_.push_back(p.event);
    } else {
      // What ran before it failed: its state is unknown, so it is not reused.
      done.push_back({.token = p.token, .ok = false, .error = state.error().message()});
      (void)device_.destroy_event(p.event);
      --created_;
    }
  }
  outstanding_ = std::move(still);
  check_invariants();
  return done;
}

void event_pool::check_invariants() const {
  SLUICE_ASSERT(created_ <= events_max_);
  SLUICE_ASSERT(outstanding_.size() + free_.size() == created_);
}

}  // namespace sluice::gpu
