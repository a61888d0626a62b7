#include "actors/master/pins.hpp"

#include <algorithm>

namespace sluice::master {

void pin_table::pin(const std::string& key, node_id owner, std::uint64_t session, std::int64_t until_ms) {
  auto& holds = by_key_[key];
  for (auto& h : holds) {
    if (h.owner == owner && h.session == session) {
      h.until_ms = std::max(h.until_ms, until_ms);
      return;
    }
  }
  holds.push_back(pin_hold{owner, session, until_ms});
  if (session != 0) by_session_[owner][session].insert(key);
}

void pin_table::erase_hold(const std::string& key, const pin_hold& h) {
  if (h.session != 0) {
    auto o = by_session_.find(h.owner);
    if (o != by_session_.end()) {
      auto s = o->second.find(h.session);
      if (s != o->second.end()) {
        s->second.erase(key);
        if (s->second.empty()) o->second.erase(s);
      }
      if (o->second.empty()) by_session_.erase(o);
    }
  }
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return;
  std::erase(it->second, h);
  if (it->second.empty()) by_key_.erase(it);
}

bool pin_table::unpin(const std::string& key, std::uint64_t session, std::int64_t now_ms) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  bool was = false;
  for (auto h : std::vector<pin_hold>{it->second}) {
    if (h.session != session) continue;
    was = was || h.until_ms > now_ms;
    erase_hold(key, h);
  }
  return was;
}

bool pin_table::pinned(const std::string& key, std::int64_t now_ms) const {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  return std::any_of(it->second.begin(), it->second.end(), [now_ms](const pin_hold& h) { return h.until_ms > now_ms; });
}

bool pin_table::forget_key(const std::string& key) {
  auto it = by_key_.find(key);
  if (it == by_key_.end()) return false;
  for (auto h : std::vector<pin_hold>{it->second}) erase_hold(key, h);
  return true;
}

std::vector<std::string> pin_table::keep_sessions(node_id owner, const std::vector<std::uint64_t>& live) {
  std::set<std::string> changed;
  auto o = by_session_.find(owner);
  if (o == by_session_.end()) return {};
  std::vector<std::pair<std::uint64_t, std::vector<std::string>>> lapsed;
  for (auto& [session, keys] : o->second) {
    if (std::binary_search(live.begin(), live.end(), session)) continue;
    lapsed.emplace_back(session, std::vector<std::string>{keys.begin(), keys.end()});
  }
  for (auto& [session, keys] : lapsed) {
    for (auto& key : keys) {
      auto holds = by_key_.find(key);
      if (holds == by_key_.end()) continue;
      for (auto h : std::vector<pin_hold>{holds->second}) {
        if (h.owner == owner && h.session == session) erase_hold(key, h);
      }
      changed.insert(key);
    }
  }
  return {changed.begin(), changed.end()};
}

std::vector<std::string> pin_table::drop_owner(node_id owner) { return keep_sessions(owner, {}); }

std::vector<std::string> pin_table::prune(std::int64_t now_ms) {
  std::vector<std::string> changed;
  std::vector<std::pair<std::string, pin_hold>> lapsed;
  for (auto& [key, holds] : by_key_) {
    for (auto& h : holds) {
      if (h.until_ms <= now_ms) lapsed.emplace_back(key, h);
    }
  }
  for (auto& [key, h] : lapsed) {
    erase_hold(key, h);
    if (changed.empty() || changed.back() != key) changed.push_back(key);
  }
  return changed;
}

std::vector<pin_hold> pin_table::holds(const std::string& key) const {
  auto it = by_key_.find(key);
  return it == by_key_.end() ? std::vector<pin_hold>{} : it->second;
}

void pin_table::restore(const std::string& key, const std::vector<pin_hold>& holds) {
  for (auto& h : holds) pin(key, h.owner, h.session, h.until_ms);
}

}  // namespace sluice::master
