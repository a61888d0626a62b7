// The owner's session with the master: connecting and registering (then the
// inventory of what it holds), heartbeats on the tick and the lease their
// answers renew, and connecting again when the master is lost.
//
// Two paths lead to the master: this owner's own link, and another owner
// relaying (owner_relay.cpp on that side). Requests take the best path
// that is not down; a path that fails is demoted and tried again later
// with a ping, so an owner cut off from the master by the network, but not
// from another owner, keeps its session through that owner. The master is
// lost only when a heartbeat finds no path that works.
//
// Invariants (asserted):
//   1. a request through a relay names the master it is for (the target is
//      never 0: that would mean the relay itself);
//   2. a registration's answer counts only for the newest registration.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <array>

#include "actors/owner/owner_rpc.hpp"
#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice::owner_detail {
namespace {

using transport::path_kind;

/// The own link to the master, when down, is tried again at least this
/// often (sooner when [links] retry_max says so).
constexpr std::chrono::seconds master_retry_max{2};
/// A relay that could not pass a frame on to the master is tried last for
/// this long.
constexpr std::chrono::seconds relay_refusal_memory{2};

/// One path to the master, ready to carry a frame.
struct master_path {
  path_kind kind = path_kind::tcp;
  transport::link_id link = 0;
  node_id target;  ///< 0 on this owner's own link; the master through a relay
  node_id relay{};  ///< the relay, through one
};

/// This owner's own link to the master, dialing one when there is none.
result<transport::link_id> direct_link(self_ptr self) {
  auto& st = self->state;
  if (st.master_link) return *st.master_link;
  auto link = st.ep->connect(st.cfg.master);
  if (link) st.master_link = *link;
  return link;
}

/// The owner whose turn it is to relay to the master, of those the master
/// listed: first one whose path from this owner is not down and that did
/// not refuse lately; else one whose path is down (that may be out of
/// date: a last resort beats none); else one that refused. Without such a
/// list, any up owner it knows.
std::optional<std::pair<node_id, owner_entry>> master_relay(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  std::array<std::vector<std::pair<node_id, owner_entry>>, 3> tiers;
  for (auto id : st.master_relays) {
    auto it = st.owners.find(id);
    if (it == st.owners.end() || it->second.address.empty()) continue;
    auto refused = st.master_relay_refused.find(id);
    bool refused_lately = refused != st.master_relay_refused.end() && now - refused->second < relay_refusal_memory;
    bool is_down = st.links.health(id.value, path_kind::tcp) == transport::path_health::down;
    tiers[refused_lately ? 2 : is_down ? 1 : 0].emplace_back(id, it->second);
  }
  for (auto& candidates : tiers) {
    if (!candidates.empty()) return candidates[st.relay_turn[st.master_id] % candidates.size()];
  }
  return pick_relay(self, st.master_id);
}

/// A relay's link, when an owner that may relay to the master is known
/// (and the master's id is: a relayed frame must name it).
std::optional<master_path> relay_path(self_ptr self) {
  auto& st = self->state;
  if (st.master_id.value == 0 || !st.master_paths.available(path_kind::relay)) return std::nullopt;
  auto relay = master_relay(self);
  if (!relay) return std::nullopt;
  auto link = owner_link(self, wire::replica{relay->first, relay->second.address});
  if (!link) {
    st.relay_turn[st.master_id] += 1;  // another one next time
    return std::nullopt;
  }
  st.master_paths.set_via(master_peer, relay->first.value);
  return master_path{path_kind::relay, *link, st.master_id, relay->first};
}

std::string_view describe(path_kind kind) {
  return kind == path_kind::tcp ? "over this owner's own link" : "through another owner";
}

/// The best path to the master now: the first of the plan that can carry
/// a frame.
result<master_path> choose_path(self_ptr self) {
  auto& st = self->state;
  error last{errc::unavailable, "no path to the master at " + st.cfg.master};
  for (auto kind : st.master_paths.plan(master_peer, st.ep->now())) {
    if (kind == path_kind::tcp) {
      auto link = direct_link(self);
      if (link) return master_path{kind, *link, node_id{}};
      last = link.error();
      st.master_paths.failed(master_peer, kind, st.ep->now(), last.to_string());
    } else if (kind == path_kind::relay) {
      if (auto path = relay_path(self)) return *path;
    }
  }
  return last;
}

/// How much a request's outcome says about its path. A heartbeat or a
/// ping has a deadline the master always meets when the path works; a
/// request made for a client carries the client's deadline, which a busy
/// master may let pass: its timeout says nothing about the path.
enum class judge { all_failures, link_failures };

/// The path carried a request and its answer, or failed to.
void path_outcome(self_ptr self, const master_path& path, judge how, bool failed, const result<wire::message>& reply) {
  auto kind = path.kind;
  auto& st = self->state;
  auto now = st.ep->now();
  if (failed && how == judge::link_failures && reply.code() == errc::timeout) return;
  if (!failed) {
    if (st.master_paths.succeeded(master_peer, kind, now)) {
      st.ep->log()->info("the path to the master {} works again", describe(kind));
    }
    return;
  }
  auto why = reply ? std::string{"no answer"} : reply.error().to_string();
  if (kind == path_kind::relay) {
    st.relay_turn[st.master_id] += 1;
    // The link to the relay itself is gone: that path is down too, so the
    // relay is not taken first again; a relay that answered it cannot
    // pass the frame on is passed over for a while.
    if (!st.ep->link_to(path.relay)) {
      st.links.failed(path.relay.value, path_kind::tcp, now, why);
    } else {
      st.master_relay_refused[path.relay] = now;
    }
  }
  // The link stays: should the path come back, a ping over it tells.
  if (st.master_paths.failed(master_peer, kind, now, why)) {
    st.ep->log()->warn("the path to the master {} failed ({})", describe(kind), why);
  }
}

void send_on(self_ptr self, const master_path& path, wire::body body, clock_time deadline, judge how,
             path_reply_handler on_reply) {
  auto& st = self->state;
  SLUICE_ASSERT(path.kind != path_kind::relay || path.target.value != 0);
  st.ep->request(path.link, std::move(body), {}, deadline, request_options{path.target, {}},
                 [self, path, how, on_reply = std::move(on_reply)](result<wire::message> reply, bool failed) {
                   path_outcome(self, path, how, failed, reply);
                   on_reply(std::move(reply), failed);
                 });
}

/// Sends over the best path now, or fails at once when there is none.
void send_judged(self_ptr self, wire::body body, clock_time deadline, judge how, path_reply_handler on_reply) {
  auto path = choose_path(self);
  if (!path) return on_reply(path.error(), true);
  send_on(self, *path, std::move(body), deadline, how, std::move(on_reply));
}

/// The master answered a heartbeat (or registration) sent at `sent`: the
/// fast index may answer until the lease, counted from then, runs out.
void renew_lease(self_ptr self, clock_time sent) {
  auto& st = self->state;
  if (st.lease == clock_duration::zero()) return;
  auto until = sent + st.lease;
  if (until <= st.lease_until) return;
  st.lease_until = until;
  st.index->set_lease(until);
}

/// No path reaches the master: what this owner holds stays, but nothing
/// it answers on the master's behalf does (the lease, the key slots), and
/// it registers again once the master can be reached.
void lose_master(self_ptr self, const error& reason) {
  auto& st = self->state;
  if (!st.registered) return schedule_reconnect(self);
  // Say it once when the master goes away, not on every failed retry.
  auto level = st.master_warned ? spdlog::level::debug : spdlog::level::warn;
  st.master_warned = true;
  st.ep->log()->log(level, "no path to the master at {}: {}; retrying every {}", st.cfg.master,
                    reason.to_string(), format_duration(st.cfg.reconnect_interval));
  st.registered = false;
  st.index->set_lease({});
  st.index->give_up_all();
  st.lease_until = {};
  schedule_reconnect(self);
}

/// Tells a master this owner just registered with what it holds, all
/// pages at once — nothing else it sends can fall between them — and
/// frees what the master does not list.
void send_inventory(self_ptr self) {
  constexpr std::size_t page_entries = 4096;
  auto& st = self->state;
  auto held = st.store->inventory();
  auto deadline = st.ep->now() + control_timeout;
  std::string after;
  std::size_t at = 0;
  do {
    wire::inventory page;
    page.after = after;
    auto end = std::min(held.size(), at + page_entries);
    // A page ends between keys, never between two versions of one key.
    while (end < held.size() && end > at && held[end].first == held[end - 1].first) ++end;
    for (; at < end; ++at) page.entries.push_back(wire::key_version{held[at].first, held[at].second});
    page.final = at == held.size();
    if (!page.entries.empty()) after = page.entries.back().key;
    send_to_master(self, std::move(page), deadline, [self](result<wire::message> reply) {
      auto unknown = reply_body<wire::inventory_reply>(reply);
      if (!unknown) return;  // the next registration tries again
      auto& st = self->state;
      for (auto& u : unknown->unknown) {
        st.index->erase_version(u.key, u.version);
        if (st.store->drop(u.key, u.version)) gone(self, u.key, u.version);
      }
      if (!unknown->unknown.empty()) {
        st.ep->log()->info("freed {} values the master does not list", unknown->unknown.size());
      }
    });
  } while (at < held.size());
}

void on_registered(self_ptr self, const wire::message& reply, const wire::register_owner_reply& r, clock_time sent) {
  auto& st = self->state;
  bool first = !st.heartbeat_started;
  st.registered = true;
  st.master_warned = false;
  st.master_id = reply.env.source;
  st.lease = std::chrono::microseconds{r.lease_us};
  renew_lease(self, sent);
  st.heartbeat_interval = std::chrono::microseconds{r.heartbeat_interval_us};
  st.ep->log()->info("registered with the master as {}", st.ep->me().id.to_string());
  // The fast path's commits the last master did not acknowledge go
  // again, ahead of the inventory (which names them).
  st.index->resend();
  send_commits(self);
  send_inventory(self);
  // The other owners: who may relay, should a direct path fail.
  refresh_owners(self, [] {});
  rpc_registered(self);
  if (first) {
    st.heartbeat_started = true;
    self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
  }
}

void register_with_master(self_ptr self) {
  auto& st = self->state;
  // (Re)registering means the master may have declared this owner down
  // and moved on without it (or be a new master): whatever the fast index
  // holds may be stale from now on, whether or not the answer arrives.
  st.index->clear();
  st.index->set_lease({});
  st.index->give_up_all();
  st.lease_until = {};
  st.registered = false;
  wire::register_owner r{st.ep->me().name, st.ep->me().listen_address, st.store->capacity_bytes(),
                        st.incarnation, st.policy != nullptr, st.index->first_unacknowledged()};
  auto sent = st.ep->now();
  auto session = ++st.master_session;
  send_to_master(self, std::move(r), sent + control_timeout, [self, session, sent](result<wire::message> reply) {
    auto& st = self->state;
    if (session != st.master_session) return;  // a newer registration replaced this one
    SLUICE_ASSERT(!st.registered);
    auto r = reply_body<wire::register_owner_reply>(reply);
    if (r && r->heartbeat_interval_us == 0) r = error{errc::protocol, "heartbeat interval 0"};
    if (!r) {
      // A lost link is reported (once) by lose_master; anything else is
      // worth a line of its own.
      if (r.code() != errc::unavailable && r.code() != errc::timeout) {
        st.ep->log()->warn("registration with the master failed: {}", r.error().to_string());
      }
      return schedule_reconnect(self);
    }
    on_registered(self, *reply, *r, sent);
  });
}

/// The master's list of up owners changed: this owner's share of them are
/// its relays to the master from now on.
void learn_owners(self_ptr self, const wire::heartbeat_reply& r) {
  auto& st = self->state;
  st.owners_generation = r.owners_generation;
  st.master_relays.clear();
  st.master_relay_refused.clear();
  for (auto& o : r.owners) {
    if (o.id == st.ep->me().id || o.id.value == 0) continue;
    learn_owner(self, o.id, o.address, o.name);
    st.master_relays.push_back(o.id);
  }
  SLUICE_ASSERT(st.master_relays.size() <= r.owners.size());
}

/// Why a heartbeat goes out: the tick; a retry at once over the next path
/// after the tick's failed on its path; or a check, after this owner's own
/// link to the master went down, that a relay still reaches it — when none
/// does, the master is lost.
enum class beat { tick, retry, check };

/// Relays a retry or a check tries in turn, at most, when they refuse (one
/// that cannot reach the master either answers at once): as many as the
/// master lists (its relays_listed_max).
constexpr int relays_tried_max = 16;

/// `relays_left`: relays still to try; `next_relay`: take a relay (the
/// next one, when one just refused), not the best path.
void heartbeat(self_ptr self, beat why, int relays_left = relays_tried_max, bool next_relay = false);

/// What a heartbeat sent over a path of `kind` learnt.
void heartbeat_answered(self_ptr self, beat why, int relays_left, path_kind kind, clock_time sent,
                        std::uint64_t seen, result<wire::message>& reply, bool path_failed) {
  auto& st = self->state;
  auto r = reply_body<wire::heartbeat_reply>(reply);
  if (r && r->known) {
    // The list came along when the master's generation was not the one
    // this heartbeat named.
    if (r->owners_generation != seen) learn_owners(self, *r);
    return renew_lease(self, sent);
  }
  if (r) {
    st.ep->log()->warn("the master no longer knows this owner; registering again");
    return register_with_master(self);
  }
  if (!path_failed) return;  // the master's own answer; the next tick tries again
  // A relay that failed is passed over next time: try the next one while
  // another may reach the master.
  if (kind == path_kind::relay && why != beat::tick && relays_left > 1 && master_relay(self)) {
    return heartbeat(self, why, relays_left - 1, true);
  }
  // The tick's own link failed: a relay next; a relay failed: the best path.
  if (why == beat::tick) return heartbeat(self, beat::retry, relays_tried_max, kind == path_kind::tcp);
  if (why == beat::check) lose_master(self, r.error());
}

void heartbeat(self_ptr self, beat why, int relays_left, bool next_relay) {
  auto& st = self->state;
  wire::heartbeat h{st.store->used_bytes(), st.store->object_count(), st.evictions,
                    st.ep->peers_in_role(role::client, st.ep->now() - st.cfg.client_timeout), link_report(self),
                    st.under_replicated_puts, st.owners_generation};
  auto sent = st.ep->now();
  auto deadline = sent + st.heartbeat_interval * 2;
  auto session = st.master_session;
  auto seen = st.owners_generation;
  auto path = next_relay ? relay_path(self) : std::optional<master_path>{};
  if (!path) {
    auto best = choose_path(self);
    if (!best) {
      if (why == beat::check) lose_master(self, best.error());
      return;
    }
    path = *best;
  }
  send_on(self, *path, std::move(h), deadline, judge::all_failures,
          [self, session, sent, why, seen, relays_left, kind = path->kind](result<wire::message> reply, bool failed) {
            auto& st = self->state;
            if (session != st.master_session || !st.registered) return;
            heartbeat_answered(self, why, relays_left, kind, sent, seen, reply, failed);
          });
}

/// A ping over the `kind` path alone, whose outcome updates it.
void ping_over(self_ptr self, path_kind kind) {
  auto& st = self->state;
  std::optional<master_path> path;
  if (kind == path_kind::tcp) {
    if (auto link = direct_link(self)) path = master_path{kind, *link, node_id{}};
  } else if (kind == path_kind::relay) {
    path = relay_path(self);
  }
  if (!path) return;
  auto deadline = st.ep->now() + std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout);
  send_on(self, *path, wire::ping{}, deadline, judge::all_failures, [](result<wire::message>, bool) {});
}

}  // namespace

void ask_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply) {
  auto& st = self->state;
  if (!st.registered) {
    on_reply(error{errc::unavailable, "this owner is not connected to the master"});
    return;
  }
  // The fast path's commits go first: the request names them (after),
  // and the master would hold it until they came.
  send_commits(self);
  send_to_master(self, std::move(body), deadline, std::move(on_reply));
}

void send_to_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply) {
  send_judged(self, std::move(body), deadline, judge::link_failures,
              [on_reply = std::move(on_reply)](result<wire::message> reply, bool) { on_reply(std::move(reply)); });
}

void tell_master(self_ptr self, wire::body body) {
  auto path = choose_path(self);
  if (!path) return;
  SLUICE_ASSERT(path->kind != path_kind::relay || path->target.value != 0);
  self->state.ep->notify(path->link, std::move(body), {}, path->target);
}

void master_link_lost(self_ptr self, const error& reason) {
  auto& st = self->state;
  st.master_link.reset();
  if (st.master_paths.failed(master_peer, path_kind::tcp, st.ep->now(), reason.to_string()) && st.registered) {
    st.ep->log()->info("lost the link to the master ({}); trying a relay", reason.to_string());
  }
  if (!st.registered) return schedule_reconnect(self);
  // The master may be gone (a new one would not know what this owner
  // committed on its own since): until a heartbeat through a relay is
  // answered, nothing is answered on the master's behalf — no lease for
  // the fast index, no key slots to commit puts in (they are claimed
  // again when needed).
  st.index->set_lease({});
  st.index->give_up_all();
  st.lease_until = {};
  // A relay may still reach the master; without one it is lost.
  if (st.master_id.value != 0 && st.master_paths.available(path_kind::relay) && master_relay(self)) {
    return heartbeat(self, beat::check, relays_tried_max, true);
  }
  lose_master(self, reason);
}

void schedule_reconnect(self_ptr self) {
  auto& st = self->state;
  if (st.reconnect_armed) return;
  st.reconnect_armed = true;
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.reconnect_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), reconnect_atom::value);
}

void init_master_paths(self_ptr self) {
  auto& st = self->state;
  transport::link_policy policy;
  // The own link always; a relay only where [links] order lets owners
  // relay at all.
  policy.order = {path_kind::tcp, path_kind::relay};
  bool relays = std::find(st.links_cfg.order.begin(), st.links_cfg.order.end(), "relay") != st.links_cfg.order.end();
  policy.retry_initial = st.links_cfg.retry;
  // One link, one ping: cheap to try often, and an owner on a relay leans
  // on that relay's own link to the master, so it goes back to its own as
  // soon as it can.
  policy.retry_max = std::min<std::chrono::microseconds>(st.links_cfg.retry_max, master_retry_max);
  st.master_paths = transport::link_manager{policy};
  st.master_paths.set_available(path_kind::relay, relays);
  st.master_paths.set_name(master_peer, "master");
}

void connect_master(self_ptr self) {
  auto& st = self->state;
  if (st.registered) return;
  // The own link first, when it can be dialed: a registration goes over
  // it unless it failed lately and a relay is known.
  if (auto link = direct_link(self); !link) {
    st.ep->log()->debug("cannot reach the master at {}: {}", st.cfg.master, link.error().to_string());
    st.master_paths.failed(master_peer, path_kind::tcp, st.ep->now(), link.error().to_string());
  }
  register_with_master(self);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (!st.registered) {
    // Registration restarts the ticks.
    st.heartbeat_started = false;
    return;
  }
  retry_paths(self);
  rdma_tick(self);
  rpc_tick(self);
  expire_prefetched(self);
  for (auto [peer, kind] : st.master_paths.due_retries(st.ep->now())) ping_over(self, kind);
  heartbeat(self, beat::tick);
  self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
}

}  // namespace sluice::owner_detail
