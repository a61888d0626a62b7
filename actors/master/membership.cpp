#include "actors/master/membership.hpp"

namespace sluice::master {

bool membership::join(node_id id, std::string name, std::string address,
                      transport::link_id link, std::uint64_t capacity_bytes,
                      std::uint64_t incarnation, clock_time now, bool evicts) {
  auto it = members_.find(id);
  if (it == members_.end()) {
    if (members_.size() >= max_members) return false;
    it = members_.emplace(id, member{}).first;
  }
  auto& m = it->second;
  m.id = id;
  m.name = std::move(name);
  m.address = std::move(address);
  m.link = link;
  m.state = wire::member_state::up;
  m.capacity_bytes = capacity_bytes;
  m.incarnation = incarnation;
  m.evicts = evicts;
  m.last_heartbeat = now;
  m.down_reason.clear();
  m.left = false;
  return true;
}

void membership::restore(member m, clock_time now) {
  m.link = 0;
  m.state = wire::member_state::down;
  m.down_reason = "not registered since the master restarted";
  m.last_heartbeat = now;
  auto id = m.id;
  members_.insert_or_assign(id, std::move(m));
}

bool membership::heartbeat(node_id id, std::uint64_t used_bytes, std::uint64_t objects,
                           clock_time now, std::uint64_t evictions, std::vector<wire::link_state> links,
                           std::uint64_t under_replicated_puts) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.state != wire::member_state::up) return false;
  it->second.links = std::move(links);
  it->second.used_bytes = used_bytes;
  it->second.reported_objects = objects;
  it->second.evictions = evictions;
  it->second.under_replicated_puts = under_replicated_puts;
  it->second.last_heartbeat = now;
  return true;
}

bool membership::leave(node_id id) {
  if (!mark_down(id, "left")) return false;
  members_.at(id).left = true;
  return true;
}

bool membership::mark_down(node_id id, std::string reason) {
  auto it = members_.find(id);
  if (it == members_.end() || it->second.state != wire::member_state::up) return false;
  it->second.state = wire::member_state::down;
  it->second.down_reason = std::move(reason);
  return true;
}

std::optional<node_id> membership::link_lost(transport::link_id link) {
  for (auto& [id, m] : members_) {
    if (m.link == link && m.state == wire::member_state::up) {
      m.state = wire::member_state::down;
      m.down_reason = "link lost";
      return id;
    }
  }
  return std::nullopt;
}

std::vector<node_id> membership::detect_failures(clock_time now, clock_duration timeout) {
  std::vector<node_id> out;
  for (auto& [id, m] : members_) {
    if (m.state == wire::member_state::up && now - m.last_heartbeat > timeout) {
      m.state = wire::member_state::down;
      m.down_reason = "missed heartbeats";
      out.push_back(id);
    }
  }
  return out;
}

const member* membership::find(node_id id) const {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

bool membership::is_up(node_id id) const {
  auto* m = find(id);
  return m != nullptr && m->state == wire::member_state::up;
}

std::vector<node_id> membership::up_owners() const {
  std::vector<node_id> out;
  for (auto& [id, m] : members_) {
    if (m.state == wire::member_state::up) out.push_back(id);
  }
  return out;
}

}  // namespace sluice::master
