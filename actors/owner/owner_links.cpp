// How an owner reaches other owners: requests go over the best path the
// link manager knows (a direct tcp link, else a relay: a third owner that
// forwards), fall back to the next path when one fails, and demote the
// failing path; paths that are down are tried again on the owner's tick,
// with a ping, after their backoff.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>

#include "actors/owner/owner_state.hpp"

namespace sluice::owner_detail {
namespace {

using transport::path_kind;

/// The member list is asked for at most this often: a relay that does
/// not know a target, or an owner without relays, asks once, not per frame.
constexpr std::chrono::milliseconds owners_ask_interval{500};
/// Waiters for one answer of the master; more run at once (and find
/// whatever is known).
constexpr std::size_t owners_waiters_max = 4096;

/// One request on its way to another owner, path after path.
struct peer_call {
  wire::replica to;
  wire::body body;
  shared_bytes payload;
  clock_time deadline;
  std::optional<transport::receive_slot> into;
  reply_handler on_reply;
  std::vector<path_kind> plan;
  std::size_t next = 0;  // the plan's next path
  bool asked_master = false;  // for relays, once per call
  bool tried = false;         // a path carried the request at least once
  bool redialed = false;      // the direct path was dialed again, once per call
  error last{errc::unavailable, "no path to the owner is configured"};
};
using call_ptr = std::shared_ptr<peer_call>;

void attempt(self_ptr self, const call_ptr& c);

std::string name_of(self_ptr self, node_id id) {
  auto it = self->state.owners.find(id);
  if (it != self->state.owners.end() && !it->second.name.empty()) return it->second.name;
  return id.to_string();
}

/// The path failed for `why`: demote it (saying so once) and go on with
/// the next one.
void path_failed(self_ptr self, const call_ptr& c, path_kind kind, const error& why) {
  auto& st = self->state;
  if (st.links.failed(c->to.owner.value, kind, st.ep->now(), why.to_string())) {
    st.ep->log()->info("path to {} over {} is down: {}", name_of(self, c->to.owner), to_string(kind),
                       why.to_string());
  }
  if (kind == path_kind::relay) st.relay_turn[c->to.owner] += 1;  // another relay next time
  c->last = why;
  // A direct link lost under the request (closed after another request's
  // deadline, reset by the peer) is worth dialing once more while time
  // remains; a path that let the deadline pass is not.
  if (kind == path_kind::tcp && why.code() != errc::timeout && !c->redialed) {
    c->redialed = true;
    c->next -= 1;
  }
  attempt(self, c);
}

/// The path carried the request and its answer (success or the
/// addressee's own error).
void path_worked(self_ptr self, const call_ptr& c, path_kind kind, result<wire::message> reply) {
  auto& st = self->state;
  if (st.links.succeeded(c->to.owner.value, kind, st.ep->now())) {
    st.ep->log()->info("path to {} over {} is back", name_of(self, c->to.owner), to_string(kind));
  }
  auto moved = c->payload.size() + (reply ? reply->payload.size() : 0);
  if (moved > 0) st.links.carried(c->to.owner.value, kind, moved, st.ep->now());
  auto on_reply = std::move(c->on_reply);
  on_reply(std::move(reply));
}

/// Sends the call on `link` (to `target`, when that is not the link's
/// peer), waiting until `until`.
void send_on(self_ptr self, const call_ptr& c, path_kind kind, transport::link_id link, node_id target,
             clock_time until) {
  c->tried = true;
  self->state.ep->request(link, c->body, c->payload, until, request_options{target, c->into},
                          [self, c, kind, link](result<wire::message> reply, bool failed) {
                            if (!failed) return path_worked(self, c, kind, std::move(reply));
                            // A link that let a deadline pass is suspect: the next
                            // use dials afresh rather than waiting on it again.
                            if (reply.code() == errc::timeout && kind == path_kind::tcp) close_link(self, link);
                            path_failed(self, c, kind, reply.error());
                          });
}

/// Whether a try of `kind` could go anywhere: a relay needs another
/// owner to go through — one known, or one the master may list now that
/// its list here is old enough to ask again.
bool viable(self_ptr self, const call_ptr& c, path_kind kind) {
  if (kind == path_kind::rdma || kind == path_kind::shm) return false;  // carry no requests
  if (kind != path_kind::relay) return true;
  auto& st = self->state;
  return st.ep->now() - st.owners_asked >= owners_ask_interval || pick_relay(self, c->to.owner).has_value();
}

void via_relay(self_ptr self, const call_ptr& c, clock_time until) {
  auto& st = self->state;
  auto relay = pick_relay(self, c->to.owner);
  if (!relay && !c->asked_master) {
    // Relays are the other owners the master lists: ask for them once.
    c->asked_master = true;
    c->next -= 1;
    return refresh_owners(self, [self, c] { attempt(self, c); });
  }
  if (!relay) {
    // No relay is no failure of a path: keep what the paths tried said.
    if (!c->tried) {
      c->last = error{errc::unavailable, "no other owner to relay through to " + name_of(self, c->to.owner)};
    }
    return attempt(self, c);
  }
  auto link = owner_link(self, wire::replica{relay->first, relay->second.address});
  if (!link) return path_failed(self, c, path_kind::relay, link.error());
  st.links.set_via(c->to.owner.value, relay->first.value);
  send_on(self, c, path_kind::relay, *link, c->to.owner, until);
}

void attempt(self_ptr self, const call_ptr& c) {
  auto& st = self->state;
  auto now = st.ep->now();
  if (c->next >= c->plan.size() || now >= c->deadline) {
    if (c->next == 0 && !c->plan.empty()) c->last = error{errc::timeout, "the deadline passed before the request was sent"};
    auto on_reply = std::move(c->on_reply);
    return on_reply(c->last);
  }
  auto kind = c->plan[c->next++];
  // The last path that could go anywhere may take all the time there is;
  // the others get a bounded try, so a dead path costs [links] timeout.
  bool more = false;
  for (auto i = c->next; i < c->plan.size() && !more; ++i) more = viable(self, c, c->plan[i]);
  auto timeout = std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout);
  auto until = more ? std::min(c->deadline, now + timeout) : c->deadline;
  switch (kind) {
    case path_kind::tcp: {
      auto link = owner_link(self, c->to);
      if (!link) return path_failed(self, c, kind, link.error());
      return send_on(self, c, kind, *link, node_id{}, until);
    }
    case path_kind::relay: return via_relay(self, c, until);
    case path_kind::rdma:
      // rdma carries the bytes of reads (owner_rdma.cpp), not requests:
      // they go on over the next path.
    case path_kind::shm:
      // Never planned: init_links marks it unavailable.
      return attempt(self, c);
  }
}

}  // namespace

/// The owners that may relay to `target`, in id order, starting with the
/// one whose turn it is.
std::optional<std::pair<node_id, owner_entry>> pick_relay(self_ptr self, node_id target) {
  auto& st = self->state;
  std::vector<std::pair<node_id, owner_entry>> candidates;
  for (auto& [id, entry] : st.owners) {
    if (id == st.ep->me().id || id == target || entry.address.empty()) continue;
    // A relay this owner cannot reach directly is no help.
    if (st.links.health(id.value, path_kind::tcp) == transport::path_health::down) continue;
    candidates.emplace_back(id, entry);
  }
  if (candidates.empty()) return std::nullopt;
  return candidates[st.relay_turn[target] % candidates.size()];
}

void init_links(self_ptr self, const links_section& cfg) {
  auto& st = self->state;
  st.links_cfg = cfg;
  transport::link_policy policy;
  policy.order.clear();
  for (auto& name : cfg.order) {
    if (auto kind = transport::parse_path_kind(name)) policy.order.push_back(*kind);
  }
  policy.retry_initial = cfg.retry;
  policy.retry_max = cfg.retry_max;
  st.links = transport::link_manager{policy};
  // Between owners shared memory never applies; rdma only where the node
  // has a path (a device, or the software provider it was told to use).
  st.links.set_available(transport::path_kind::shm, false);
  st.links.set_available(transport::path_kind::rdma, st.rdma.path != nullptr);
  st.ep->set_forwarder([self](transport::link_id from, wire::message msg) { relay_frame(self, from, std::move(msg)); });
}

result<transport::link_id> owner_link(self_ptr self, const wire::replica& r) {
  auto& st = self->state;
  // A link this owner is closing stays known until its close is reported;
  // it carries nothing more.
  if (auto link = st.ep->link_to(r.owner); link && !st.closing.contains(*link)) return *link;
  if (auto it = st.dialing.find(r.owner); it != st.dialing.end() && !st.closing.contains(it->second)) {
    return it->second;
  }
  auto link = st.ep->connect(r.address);
  if (link) st.dialing[r.owner] = *link;
  return link;
}

void close_link(self_ptr self, transport::link_id link) {
  self->state.closing.insert(link);
  self->state.ep->close(link);
}

void peer_request(self_ptr self, const wire::replica& to, wire::body body, shared_bytes payload,
                  clock_time deadline, std::optional<transport::receive_slot> into, reply_handler on_reply) {
  auto& st = self->state;
  learn_owner(self, to.owner, to.address);
  auto c = std::make_shared<peer_call>();
  c->to = to;
  c->body = std::move(body);
  c->payload = std::move(payload);
  c->deadline = deadline;
  c->into = std::move(into);
  c->on_reply = std::move(on_reply);
  c->plan = st.links.plan(to.owner.value, st.ep->now());
  attempt(self, c);
}

void learn_owner(self_ptr self, node_id id, const std::string& address, const std::string& name) {
  auto& st = self->state;
  if (id == st.ep->me().id || id.value == 0) return;
  auto& entry = st.owners[id];
  if (!address.empty()) entry.address = address;
  if (!name.empty()) entry.name = name;
  if (!entry.name.empty()) st.links.set_name(id.value, entry.name);
}

void refresh_owners(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  auto now = st.ep->now();
  if (st.owners_asking) {
    if (st.owners_waiters.size() >= owners_waiters_max) return then();
    st.owners_waiters.push_back(std::move(then));
    return;
  }
  if (st.owners_asked != clock_time{} && now - st.owners_asked < owners_ask_interval) return then();
  st.owners_asking = true;
  st.owners_asked = now;
  st.owners_waiters.push_back(std::move(then));
  ask_master(self, wire::cluster_status{}, now + control_timeout, [self](result<wire::message> reply) {
    auto& st = self->state;
    st.owners_asking = false;
    if (auto members = reply_body<wire::cluster_status_reply>(reply)) {
      for (auto& m : members->members) {
        if (m.member_role != role::owner) continue;
        if (m.state == wire::member_state::up) {
          learn_owner(self, m.id, m.address, m.name);
        } else {
          st.owners.erase(m.id);  // a down owner relays nothing
        }
      }
    }
    auto waiters = std::move(st.owners_waiters);
    st.owners_waiters.clear();
    for (auto& w : waiters) w();
    release_parked(self);
  });
}

void retry_paths(self_ptr self) {
  auto& st = self->state;
  for (auto [peer, kind] : st.links.due_retries(st.ep->now())) {
    auto it = st.owners.find(node_id{peer});
    if (it == st.owners.end() || it->second.address.empty()) {
      st.links.forget(peer);  // an owner no longer listed: nothing to retry
      continue;
    }
    if (kind == path_kind::rdma) {
      rdma_retry(self, wire::replica{node_id{peer}, it->second.address});
      continue;
    }
    // A ping over just that path; its outcome updates the path.
    auto c = std::make_shared<peer_call>();
    c->to = wire::replica{node_id{peer}, it->second.address};
    c->body = wire::ping{};
    c->deadline = st.ep->now() + std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout);
    c->on_reply = [](result<wire::message>) {};
    c->plan = {kind};
    attempt(self, c);
  }
}

std::vector<wire::link_state> link_report(self_ptr self) {
  // A heartbeat is one envelope: this many peers, of a few hundred bytes
  // each, stay well within the default envelope limit (1 MiB).
  constexpr std::size_t reported_peers_max = 512;
  auto& st = self->state;
  std::vector<wire::link_state> out;
  for (auto& peer : st.links.report(st.ep->now())) {
    if (out.size() == reported_peers_max) break;
    wire::link_state l;
    l.peer = node_id{peer.peer};
    l.peer_name = peer.name;
    l.active = peer.active ? std::string{to_string(*peer.active)} : std::string{};
    l.via = node_id{peer.via};
    for (auto& p : peer.paths) {
      l.paths.push_back(wire::path_state{std::string{to_string(p.kind)}, std::string{to_string(p.health)},
                                         p.failures, static_cast<std::uint64_t>(p.retry_in.count()),
                                         p.last_error, p.bytes});
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace sluice::owner_detail
