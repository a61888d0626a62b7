#include "actors/master/repair.hpp"

#include <algorithm>
#include <limits>

#include "runtime/assert.hpp"

namespace sluice::master {
namespace {

std::int64_t one_second_of(const repair_limits& limits) {
  return static_cast<std::int64_t>(
      std::min<std::uint64_t>(limits.bytes_per_second, std::numeric_limits<std::int64_t>::max()));
}

}  // namespace

repair_queue::repair_queue(repair_limits limits) : limits_(limits), budget_(one_second_of(limits)) {
  SLUICE_ASSERT(limits_.concurrency >= 1);
  SLUICE_ASSERT(limits_.bytes_per_second >= 1);
}

void repair_queue::unqueue(const std::string& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  queue_.erase({it->second, key});
  by_key_.erase(it);
  SLUICE_ASSERT(queue_.size() == by_key_.size());
}

void repair_queue::want(const std::string& key, std::uint32_t live) {
  if (in_flight_.contains(key)) return;
  deferred_.erase(key);
  stranded_.erase(key);
  unqueue(key);
  queue_.emplace(live, key);
  by_key_.emplace(key, live);
  SLUICE_ASSERT(queue_.size() == by_key_.size());
}

void repair_queue::stranded(const std::string& key) {
  if (in_flight_.contains(key)) return;
  unqueue(key);
  deferred_.erase(key);
  stranded_.insert(key);
}

void repair_queue::drop(const std::string& key) {
  unqueue(key);
  deferred_.erase(key);
  stranded_.erase(key);
}

void repair_queue::clear() {
  queue_.clear();
  by_key_.clear();
  deferred_.clear();
  stranded_.clear();
}

void repair_queue::refill(clock_time now) {
  auto cap = one_second_of(limits_);
  if (!refilled_) refilled_ = now;
  auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(now - *refilled_).count();
  if (elapsed <= 0) return;
  refilled_ = now;
  // Computed in long double: rate × microseconds may not fit in 64 bits.
  auto gained = static_cast<long double>(limits_.bytes_per_second) * static_cast<long double>(elapsed) / 1e6L;
  auto next = static_cast<long double>(budget_) + gained;
  budget_ = next >= static_cast<long double>(cap) ? cap : static_cast<std::int64_t>(next);
  SLUICE_ASSERT(budget_ <= cap);
}

std::optional<std::string> repair_queue::next(clock_time now) {
  refill(now);
  if (queue_.empty() || in_flight_.size() >= limits_.concurrency || budget_ <= 0) return std::nullopt;
  auto key = queue_.begin()->second;
  unqueue(key);
  return key;
}

void repair_queue::started(const std::string& key, std::uint64_t bytes) {
  SLUICE_ASSERT(!by_key_.contains(key) && !deferred_.contains(key) && !stranded_.contains(key));
  SLUICE_ASSERT(in_flight_.size() < limits_.concurrency);
  auto [it, inserted] = in_flight_.emplace(key, bytes);
  SLUICE_ASSERT(inserted);
  auto charge = static_cast<std::int64_t>(std::min<std::uint64_t>(bytes, std::numeric_limits<std::int64_t>::max() / 2));
  budget_ = std::max(budget_ - charge, std::numeric_limits<std::int64_t>::min() / 2);
}

void repair_queue::finished(const std::string& key, bool ok, std::uint64_t bytes, clock_time retry_at) {
  auto it = in_flight_.find(key);
  SLUICE_ASSERT(it != in_flight_.end());
  in_flight_.erase(it);
  if (ok) {
    copies_made_ += 1;
    bytes_copied_ += bytes;
    return;
  }
  copies_failed_ += 1;
  deferred_[key] = retry_at;
}

void repair_queue::defer(const std::string& key, clock_time at) {
  SLUICE_ASSERT(!in_flight_.contains(key));
  unqueue(key);
  stranded_.erase(key);
  deferred_[key] = at;
}

std::vector<std::string> repair_queue::due(clock_time now) {
  std::vector<std::pair<clock_time, std::string>> ready;
  for (auto& [key, at] : deferred_) {
    if (at <= now) ready.emplace_back(at, key);
  }
  std::sort(ready.begin(), ready.end());
  std::vector<std::string> out;
  for (auto& [at, key] : ready) {
    deferred_.erase(key);
    out.push_back(std::move(key));
  }
  return out;
}

}  // namespace sluice::master
