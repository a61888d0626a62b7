#include "transports/link_manager.hpp"

#include <algorithm>

namespace sluice::transport {
namespace {

std::size_t index_of(path_kind kind) noexcept { return static_cast<std::size_t>(kind); }

}  // namespace

std::string_view to_string(path_kind kind) noexcept {
  switch (kind) {
    case path_kind::shm: return "shm";
    case path_kind::rdma: return "rdma";
    case path_kind::tcp: return "tcp";
    case path_kind::relay: return "relay";
  }
  return "unknown";
}

std::optional<path_kind> parse_path_kind(std::string_view name) noexcept {
  for (auto kind : {path_kind::shm, path_kind::rdma, path_kind::tcp, path_kind::relay}) {
    if (to_string(kind) == name) return kind;
  }
  return std::nullopt;
}

std::string_view to_string(path_health health) noexcept {
  switch (health) {
    case path_health::untried: return "untried";
    case path_health::up: return "up";
    case path_health::down: return "down";
  }
  return "unknown";
}

link_manager::link_manager(link_policy policy) : policy_(std::move(policy)) {}

void link_manager::set_available(path_kind kind, bool available) { available_[index_of(kind)] = available; }

bool link_manager::available(path_kind kind) const noexcept { return available_[index_of(kind)]; }

bool link_manager::usable(path_kind kind) const noexcept {
  return available(kind) && std::find(policy_.order.begin(), policy_.order.end(), kind) != policy_.order.end();
}

auto link_manager::touch(std::uint64_t peer, time_point now) -> peer_state& {
  auto it = peers_.find(peer);
  if (it == peers_.end()) {
    if (peers_.size() >= policy_.peers_max) {
      auto oldest = std::min_element(peers_.begin(), peers_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
      });
      peers_.erase(oldest);
    }
    it = peers_.emplace(peer, peer_state{}).first;
  }
  it->second.last_used = now;
  return it->second;
}

std::chrono::microseconds link_manager::backoff(std::uint32_t failures) const {
  auto wait = policy_.retry_initial;
  for (std::uint32_t i = 1; i < failures && wait < policy_.retry_max; ++i) wait *= 2;
  return std::min(wait, policy_.retry_max);
}

std::vector<path_kind> link_manager::plan(std::uint64_t peer, time_point now) {
  auto& p = touch(peer, now);
  std::vector<path_kind> healthy;
  std::vector<path_kind> down;
  for (auto kind : policy_.order) {
    if (!usable(kind)) continue;
    (p.paths[index_of(kind)].health == path_health::down ? down : healthy).push_back(kind);
  }
  healthy.insert(healthy.end(), down.begin(), down.end());
  return healthy;
}

std::optional<path_kind> link_manager::choose(std::uint64_t peer, time_point now) {
  auto paths = plan(peer, now);
  if (paths.empty()) return std::nullopt;
  return paths.front();
}

bool link_manager::succeeded(std::uint64_t peer, path_kind kind, time_point now) {
  auto& path = touch(peer, now).paths[index_of(kind)];
  bool restored = path.health == path_health::down;
  path.health = path_health::up;
  path.failures = 0;
  return restored;
}

path_health link_manager::health(std::uint64_t peer, path_kind kind) const {
  auto it = peers_.find(peer);
  return it == peers_.end() ? path_health::untried : it->second.paths[index_of(kind)].health;
}

bool link_manager::failed(std::uint64_t peer, path_kind kind, time_point now, std::string why) {
  auto& path = touch(peer, now).paths[index_of(kind)];
  bool demoted = path.health != path_health::down;
  path.health = path_health::down;
  path.failures += 1;
  path.retry_at = now + backoff(path.failures);
  path.last_error = std::move(why);
  return demoted;
}

void link_manager::carried(std::uint64_t peer, path_kind kind, std::uint64_t bytes, time_point now) {
  touch(peer, now).paths[index_of(kind)].bytes += bytes;
}

std::vector<std::pair<std::uint64_t, path_kind>> link_manager::due_retries(time_point now) {
  std::vector<std::pair<std::uint64_t, path_kind>> due;
  for (auto& [peer, p] : peers_) {
    for (auto kind : policy_.order) {
      auto& path = p.paths[index_of(kind)];
      if (!usable(kind) || path.health != path_health::down || path.retry_at > now) continue;
      // Handed out once per backoff: an answer that never comes does not
      // make the path retried in a tight loop.
      path.retry_at = now + backoff(path.failures);
      due.emplace_back(peer, kind);
    }
  }
  return due;
}

void link_manager::set_name(std::uint64_t peer, std::string name) {
  auto it = peers_.find(peer);
  if (it != peers_.end()) it->second.name = std::move(name);
}

void link_manager::set_via(std::uint64_t peer, std::uint64_t via) {
  auto it = peers_.find(peer);
  if (it != peers_.end()) it->second.via = via;
}

std::vector<peer_report> link_manager::report(time_point now) const {
  std::vector<peer_report> out;
  for (auto& [peer, p] : peers_) {
    peer_report r;
    r.peer = peer;
    r.name = p.name;
    r.via = p.via;
    for (auto kind : policy_.order) {
      if (!usable(kind)) continue;
      auto& path = p.paths[index_of(kind)];
      path_report pr{kind, path.health, path.failures, std::chrono::microseconds{0}, path.last_error, path.bytes};
      if (path.health == path_health::down && path.retry_at > now) {
        pr.retry_in = std::chrono::duration_cast<std::chrono::microseconds>(path.retry_at - now);
      }
      if (!r.active && path.health != path_health::down) r.active = kind;
      r.paths.push_back(std::move(pr));
    }
    if (!r.active && !r.paths.empty()) r.active = r.paths.front().kind;
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace sluice::transport
