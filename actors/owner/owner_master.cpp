// The owner's session with the master: connecting and registering (then the
// inventory of what it holds), heartbeats on the tick and the lease their
// answers renew, and connecting again when the link is lost.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>

#include "actors/owner/owner_rpc.hpp"
#include "actors/owner/owner_state.hpp"

namespace sluice::owner_detail {

void ask_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply) {
  auto& st = self->state;
  if (!st.master_link || !st.registered) {
    on_reply(error{errc::unavailable, "this owner is not connected to the master"});
    return;
  }
  // The fast path's commits go first: the request names them (after),
  // and the master would hold it until they came.
  send_commits(self);
  st.ep->request(*st.master_link, std::move(body), {}, deadline, std::move(on_reply));
}

void schedule_reconnect(self_ptr self) {
  auto& st = self->state;
  if (st.reconnect_armed) return;
  st.reconnect_armed = true;
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.reconnect_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), reconnect_atom::value);
}

namespace {

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

/// Tells a master this owner just registered with what it holds, all
/// pages at once — nothing else it sends can fall between them — and
/// frees what the master does not list.
void send_inventory(self_ptr self, transport::link_id link) {
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
    st.ep->request(link, std::move(page), {}, deadline, [self](result<wire::message> reply) {
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

void register_with_master(self_ptr self) {
  auto& st = self->state;
  // (Re)registering means the master may have declared this owner down
  // and moved on without it (or be a new master): whatever the fast index
  // holds may be stale from now on, whether or not the answer arrives.
  st.index->clear();
  st.index->set_lease({});
  st.index->give_up_all();
  st.lease_until = {};
  wire::register_owner r{st.ep->me().name, st.ep->me().listen_address, st.store->capacity_bytes(),
                        st.incarnation, st.policy != nullptr, st.index->first_unacknowledged()};
  auto sent = st.ep->now();
  auto deadline = sent + control_timeout;
  auto link = *st.master_link;
  st.ep->request(link, std::move(r), {}, deadline, [self, link, sent](result<wire::message> reply) {
    auto& st = self->state;
    if (st.master_link != link) return;  // a newer link replaced this one
    auto r = reply_body<wire::register_owner_reply>(reply);
    if (r && r->heartbeat_interval_us == 0) r = error{errc::protocol, "heartbeat interval 0"};
    if (!r) {
      // A lost link is reported (once) by on_link_down; anything else is
      // worth a line of its own.
      if (r.code() != errc::unavailable) {
        st.ep->log()->warn("registration with the master failed: {}", r.error().to_string());
      }
      st.ep->close(link);
      return;
    }
    bool first = !st.registered;
    st.registered = true;
    st.master_warned = false;
    st.master_id = reply->env.source;
    st.lease = std::chrono::microseconds{r->lease_us};
    renew_lease(self, sent);
    st.heartbeat_interval = std::chrono::microseconds{r->heartbeat_interval_us};
    st.ep->log()->info("registered with the master as {}", st.ep->me().id.to_string());
    // The fast path's commits the last master did not acknowledge go
    // again, ahead of the inventory (which names them).
    st.index->resend();
    send_commits(self);
    send_inventory(self, link);
    // The other owners: who may relay, should a direct path fail.
    refresh_owners(self, [] {});
    rpc_registered(self);
    if (first) self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
  });
}

}  // namespace

void connect_master(self_ptr self) {
  auto& st = self->state;
  auto link = st.ep->connect(st.cfg.master);
  if (!link) {
    st.ep->log()->debug("cannot reach the master at {}: {}", st.cfg.master, link.error().to_string());
    schedule_reconnect(self);
    return;
  }
  st.master_link = *link;
  register_with_master(self);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (!st.registered) return;  // registration restarts the ticks
  retry_paths(self);
  rdma_tick(self);
  rpc_tick(self);
  wire::heartbeat h{st.store->used_bytes(), st.store->object_count(), st.evictions,
                    st.ep->peers_in_role(role::client, st.ep->now() - st.cfg.client_timeout), link_report(self),
                    st.under_replicated_puts};
  auto sent = st.ep->now();
  auto deadline = sent + st.heartbeat_interval * 2;
  auto link = *st.master_link;
  st.ep->request(link, std::move(h), {}, deadline, [self, link, sent](result<wire::message> reply) {
    auto& st = self->state;
    if (st.master_link != link) return;
    auto r = reply_body<wire::heartbeat_reply>(reply);
    if (r && r->known) renew_lease(self, sent);
    if (r && !r->known) {
      st.ep->log()->warn("the master no longer knows this owner; registering again");
      register_with_master(self);
    }
  });
  self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
}

}  // namespace sluice::owner_detail
