#include "actors/master/homes.hpp"

#include <algorithm>

namespace sluice::master {

std::optional<node_id> homes::home_of(key_slot slot) const {
  auto h = home_.at(slot);
  if (h == node_id{}) return std::nullopt;
  return h;
}

bool homes::may_grant(key_slot slot, node_id owner, clock_time now) const {
  auto h = home_.at(slot);
  if (h == owner) return true;
  return h == node_id{} && now >= cooldown_until_.at(slot);
}

void homes::grant(key_slot slot, node_id owner) { home_.at(slot) = owner; }

void homes::release(key_slot slot, clock_time now, bool cooldown) {
  home_.at(slot) = node_id{};
  if (cooldown) cooldown_until_.at(slot) = now + std::chrono::duration_cast<clock_duration>(home_cooldown);
}

std::vector<key_slot> homes::release_all(node_id owner) {
  std::vector<key_slot> out;
  for (std::size_t s = 0; s < home_.size(); ++s) {
    if (home_[s] != owner) continue;
    home_[s] = node_id{};
    out.push_back(static_cast<key_slot>(s));
  }
  return out;
}

std::vector<node_id> homes::holders() const {
  std::vector<node_id> out;
  for (auto h : home_) {
    if (h != node_id{}) out.push_back(h);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::size_t homes::count_of(node_id owner) const {
  return static_cast<std::size_t>(std::count(home_.begin(), home_.end(), owner));
}

std::uint64_t owner_commit_log::applied(node_id owner) const {
  auto it = applied_.find(owner);
  return it == applied_.end() ? 0 : it->second;
}

void owner_commit_log::set_applied(node_id owner, std::uint64_t seq) { applied_[owner] = seq; }

void owner_commit_log::wait(node_id owner, std::uint64_t seq, clock_time deadline, waiter then) {
  if (applied(owner) >= seq) return then(result<void>{});
  auto& waits = waits_[owner];
  if (waits.size() >= waits_per_owner_max) {
    return then(error{errc::overloaded, "too much work waits for one owner's reports"});
  }
  waits.emplace(seq, pending_wait{seq, deadline, std::move(then)});
}

std::vector<owner_commit_log::waiter> owner_commit_log::ready(node_id owner) {
  std::vector<waiter> out;
  auto it = waits_.find(owner);
  if (it == waits_.end()) return out;
  auto through = applied(owner);
  auto& waits = it->second;
  while (!waits.empty() && waits.begin()->first <= through) {
    out.push_back(std::move(waits.begin()->second.then));
    waits.erase(waits.begin());
  }
  if (waits.empty()) waits_.erase(it);
  return out;
}

std::vector<owner_commit_log::waiter> owner_commit_log::expired(clock_time now) {
  std::vector<waiter> out;
  for (auto it = waits_.begin(); it != waits_.end();) {
    auto& waits = it->second;
    for (auto w = waits.begin(); w != waits.end();) {
      if (w->second.deadline <= now) {
        out.push_back(std::move(w->second.then));
        w = waits.erase(w);
      } else {
        ++w;
      }
    }
    it = waits.empty() ? waits_.erase(it) : std::next(it);
  }
  return out;
}

std::vector<owner_commit_log::waiter> owner_commit_log::forget(node_id owner) {
  std::vector<waiter> out;
  applied_.erase(owner);
  auto it = waits_.find(owner);
  if (it == waits_.end()) return out;
  for (auto& [seq, w] : it->second) out.push_back(std::move(w.then));
  waits_.erase(it);
  return out;
}

}  // namespace sluice::master
