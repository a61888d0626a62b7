// The codec's part for the cluster's status: members, and how each owner
// reaches the others (link states).
#include "runtime/wire/codec_detail.hpp"

namespace sluice::wire::codec_detail {

void write_links(capnp::List<s::LinkState>::Builder list, const std::vector<link_state>& links) {
  for (unsigned i = 0; i < links.size(); ++i) {
    const auto& l = links[i];
    auto out = list[i];
    out.setPeer(l.peer.value);
    out.setPeerName(l.peer_name);
    out.setActive(l.active);
    out.setVia(l.via.value);
    auto paths = out.initPaths(static_cast<unsigned>(l.paths.size()));
    for (unsigned n = 0; n < l.paths.size(); ++n) {
      paths[n].setKind(l.paths[n].kind);
      paths[n].setHealth(l.paths[n].health);
      paths[n].setFailures(l.paths[n].failures);
      paths[n].setRetryInUs(l.paths[n].retry_in_us);
      paths[n].setLastError(l.paths[n].last_error);
      paths[n].setBytes(l.paths[n].bytes);
    }
  }
}

std::vector<link_state> read_links(capnp::List<s::LinkState>::Reader list) {
  std::vector<link_state> out;
  for (auto l : list) {
    link_state x{node_id{l.getPeer()}, from_text(l.getPeerName()), from_text(l.getActive()), node_id{l.getVia()}, {}};
    for (auto p : l.getPaths()) {
      x.paths.push_back(path_state{from_text(p.getKind()), from_text(p.getHealth()), p.getFailures(),
                                   p.getRetryInUs(), from_text(p.getLastError()), p.getBytes()});
    }
    out.push_back(std::move(x));
  }
  return out;
}

void write_status(s::ClusterStatusReply::Builder b, const cluster_status_reply& x) {
  b.setMaster(x.master.value);
  b.setObjectCount(x.object_count);
  auto repair = b.initRepair();
  repair.setUnderReplicated(x.repair.under_replicated);
  repair.setWithoutLiveCopy(x.repair.without_live_copy);
  repair.setCopiesInFlight(x.repair.copies_in_flight);
  repair.setCopiesMade(x.repair.copies_made);
  repair.setBytesCopied(x.repair.bytes_copied);
  repair.setCopiesFailed(x.repair.copies_failed);
  auto list = b.initMembers(static_cast<unsigned>(x.members.size()));
  for (unsigned i = 0; i < x.members.size(); ++i) {
    const auto& m = x.members[i];
    auto out = list[i];
    out.setId(m.id.value);
    out.setRole(to_schema(m.member_role));
    out.setName(m.name);
    out.setAddress(m.address);
    out.setState(m.state == member_state::up ? s::MemberState::UP : s::MemberState::DOWN);
    out.setCapacityBytes(m.capacity_bytes);
    out.setUsedBytes(m.used_bytes);
    out.setObjectCount(m.object_count);
    out.setLastHeartbeatAgeUs(m.last_heartbeat_age_us);
    out.setEvictions(m.evictions);
    out.setStoredBytes(m.stored_bytes);
    out.setStoredObjects(m.stored_objects);
    out.setHomeSlots(m.home_slots);
    out.setOwnCommits(m.own_commits);
    out.setUnderReplicatedPuts(m.under_replicated_puts);
    out.setMasterVia(m.master_via.value);
    write_links(out.initLinks(static_cast<unsigned>(m.links.size())), m.links);
  }
}

cluster_status_reply read_status(s::ClusterStatusReply::Reader r) {
  cluster_status_reply out;
  out.master = node_id{r.getMaster()};
  out.object_count = r.getObjectCount();
  if (r.hasRepair()) {
    auto repair = r.getRepair();
    out.repair = {repair.getUnderReplicated(), repair.getWithoutLiveCopy(), repair.getCopiesInFlight(),
                  repair.getCopiesMade(), repair.getBytesCopied(), repair.getCopiesFailed()};
  }
  for (auto m : r.getMembers()) {
    member_status x;
    x.id = node_id{m.getId()};
    x.member_role = from_schema(m.getRole());
    x.name = from_text(m.getName());
    x.address = from_text(m.getAddress());
    x.state = m.getState() == s::MemberState::UP ? member_state::up : member_state::down;
    x.capacity_bytes = m.getCapacityBytes();
    x.used_bytes = m.getUsedBytes();
    x.object_count = m.getObjectCount();
    x.last_heartbeat_age_us = m.getLastHeartbeatAgeUs();
    x.evictions = m.getEvictions();
    x.stored_bytes = m.getStoredBytes();
    x.stored_objects = m.getStoredObjects();
    x.home_slots = m.getHomeSlots();
    x.own_commits = m.getOwnCommits();
    x.under_replicated_puts = m.getUnderReplicatedPuts();
    x.master_via = node_id{m.getMasterVia()};
    x.links = read_links(m.getLinks());
    out.members.push_back(std::move(x));
  }
  return out;
}

}  // namespace sluice::wire::codec_detail
