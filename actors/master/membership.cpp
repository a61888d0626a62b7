#include "actors/master/membership.hpp"

#include "runtime/assert.hpp"

namespace sluice::master {

bool membership::join(node_id id, std::string name, std::string address,
                      transport::link_id link, std::uint64_t capacity_bytes,
                      std::uint64_t incarnation, clock_time now, bool evicts, node_id via) {
  SLUICE_ASSERT(via != id);
  auto it = members_.find(id);
  if (it == members_.end()) {
    if (members_.size() >= max_members) return false;
    it = members_.emplace(id, member{}).first;
  }
  auto& m = it->second;
  if (m.state != wire::member_state::up || m.name != name || m.address != address) changed();
  m.id = id;
  m.name = std::move(name);
  m.address = std::move(address);
  m.link = link;
  m.via = via;
  m.state = wire::member_state::up;
  m.capacity_bytes = capacity_bytes;
  m.incarnation = incarnation;
  m.evicts = evicts;
  m.last_heartbeat = now;
  m.down_reason.clear();
  m.left = false;
  m.lost_link_by.reset();
  return true;
}

void membership::route(node_id id, transport::link_id link, node_id via) {
  SLUICE_ASSERT(via != id);
  auto it = members_.find(id);
  if (it == members_.end()) return;
  it->second.link = link;
  it->second.via = via;
  it->second.lost_link_by.reset();
}

void membership::restore(member m, clock_time now) {
  m.link = 0;
  m.via = {};
  m.state = wire::member_state::down;
  m.down_reason = "not registered since the master restarted";
  m.last_heartbeat = now;
  auto id = m.id;
  members_.insert_or_assign(id, std::move(m));
  changed();
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
  it->second.lost_link_by.reset();
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
  changed();
  return true;
}

std::vector<node_id> membership::link_lost(transport::link_id link, clock_time now, clock_duration grace) {
  std::vector<node_id> lost;
  for (auto& [id, m] : members_) {
    if (m.link != link) continue;
    m.link = 0;
    bool relayed = m.via.value != 0;
    m.via = {};
    // Relayed: another path may still work; heartbeats will tell.
    if (relayed || m.state != wire::member_state::up) continue;
    // Its own link: the owner may still reach the master through another
    // owner, and says so at once; the grace is for that.
    m.lost_link_by = now + grace;
    lost.push_back(id);
  }
  return lost;
}

std::vector<node_id> membership::detect_failures(clock_time now, clock_duration timeout) {
  std::vector<node_id> out;
  for (auto& [id, m] : members_) {
    if (m.state != wire::member_state::up) continue;
    bool unlinked = m.lost_link_by && now >= *m.lost_link_by;
    if (!unlinked && now - m.last_heartbeat <= timeout) continue;
    m.state = wire::member_state::down;
    m.down_reason = unlinked ? "link lost" : "missed heartbeats";
    m.lost_link_by.reset();
    changed();
    out.push_back(id);
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

std::vector<wire::owner_address> membership::relays_for(node_id asker, std::size_t limit) const {
  std::vector<wire::owner_address> out;
  auto take = [&](auto from, auto to) {
    for (auto it = from; it != to && out.size() < limit; ++it) {
      auto& m = it->second;
      if (m.id != asker && m.state == wire::member_state::up) out.push_back(wire::owner_address{m.id, m.name, m.address});
    }
  };
  auto after = members_.upper_bound(asker);
  take(after, members_.end());
  take(members_.begin(), after);
  SLUICE_ASSERT(out.size() <= limit);
  return out;
}

std::vector<node_id> membership::up_owners() const {
  std::vector<node_id> out;
  for (auto& [id, m] : members_) {
    if (m.state == wire::member_state::up) out.push_back(id);
  }
  return out;
}

}  // namespace sluice::master
