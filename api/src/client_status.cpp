// sluice::client::status(): the cluster as the master reports it, in
// the public types of sluice/status.hpp.
#include "api/src/kv_calls.hpp"

namespace sluice {
namespace {

result<cluster_status> to_status(result<wire::message>& reply) {
  auto body = reply_body<wire::cluster_status_reply>(reply);
  if (!body) return std::move(body).error();
  cluster_status out;
  out.master_id = body->master.to_string();
  out.object_count = body->object_count;
  out.repair = body->repair;
  for (auto& m : body->members) {
    member_info info;
    info.id = m.id.to_string();
    info.role = std::string{to_string(m.member_role)};
    info.name = m.name;
    info.address = m.address;
    info.up = m.state == wire::member_state::up;
    static_cast<member_usage&>(info) = m;
    info.since_heartbeat = std::chrono::microseconds{m.last_heartbeat_age_us};
    if (m.master_via.value != 0) info.master_via_id = m.master_via.to_string();
    for (auto& l : m.links) {
      link_info link{l.peer.to_string(), l.peer_name, l.active, l.via.value == 0 ? "" : l.via.to_string(), {}};
      for (auto& p : l.paths) {
        link.paths.push_back(path_info{p.kind, p.health, p.failures, std::chrono::microseconds{p.retry_in_us},
                                       p.last_error, p.bytes});
      }
      info.links.push_back(std::move(link));
    }
    out.members.push_back(std::move(info));
  }
  return out;
}

}  // namespace

result<cluster_status> client::status(call_options options) {
  auto [done, future] = promise_callback<cluster_status>();
  call<cluster_status>(*impl_, wire::cluster_status{}, {}, options, to_status, std::move(done));
  return wait_for(std::move(future), effective(*impl_, options));
}

}  // namespace sluice
