#include "actors/master/master.hpp"

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/overloaded.hpp"
#include "actors/master/directory.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/placement.hpp"
#include "runtime/units.hpp"

namespace sluice {
namespace {

using master::directory;
using master::membership;

/// Pending puts get this long beyond their own deadline to commit.
constexpr std::chrono::seconds pending_grace{2};
/// How long an owner has to answer an invalidation before it is declared
/// down (and then its lease is waited out).
constexpr std::chrono::seconds invalidate_timeout{2};

struct master_state {
  std::optional<endpoint> ep;
  master_section cfg;
  membership members;
  directory dir;
  std::optional<rng> random;
  /// Work waiting for an owner's lease to run out, by id.
  std::map<std::uint64_t, std::function<void()>> waiting;
  std::uint64_t next_waiting = 1;
  static inline const char* name = "sluice.master";
};

using self_ptr = master_actor::stateful_pointer<master_state>;

std::string describe_owner(const master::member& m) {
  return "owner '" + m.name + "' (" + m.id.to_string() + ")";
}

/// An owner's fast index may answer for this long after it sent a
/// heartbeat the master answered; half the heartbeat timeout, so the
/// master declares a silent owner down only after its lease ran out.
std::uint64_t lease_us(const master_section& cfg) {
  return static_cast<std::uint64_t>(cfg.heartbeat_timeout.count()) / 2;
}

/// Which owner's fast index was made to forget a key, at which version.
struct served_by {
  node_id holder;
  std::uint64_t version = 0;
  friend bool operator==(const served_by&, const served_by&) = default;
};

/// Runs `then` once the lease `holder` may still hold has surely run out:
/// a lease starts before the heartbeat that renewed it reached us.
void after_lease(self_ptr self, node_id holder, std::function<void()> then) {
  auto& st = self->state;
  auto* m = st.members.find(holder);
  if (m == nullptr) return then();
  auto until = m->last_heartbeat + std::chrono::microseconds{lease_us(st.cfg)};
  auto now = st.ep->now();
  if (until <= now) return then();
  auto id = st.next_waiting++;
  st.waiting.emplace(id, std::move(then));
  self->delayed_send(self, until - now, resume_atom::value, id);
}

/// Runs `then` once `holder` surely no longer answers gets of `key` from
/// its fast index: it confirmed an invalidation, or its lease ran out.
void when_not_served(self_ptr self, const std::string& key, node_id holder, std::function<void()> then) {
  auto& st = self->state;
  auto* m = st.members.find(holder);
  if (m == nullptr) return then();
  if (m->state != wire::member_state::up) return after_lease(self, holder, std::move(then));
  auto deadline = st.ep->now() + std::chrono::duration_cast<clock_duration>(invalidate_timeout);
  st.ep->request(m->link, wire::invalidate{key}, {}, deadline,
                 [self, holder, then = std::move(then)](result<wire::message> reply) mutable {
                   if (reply) return then();
                   auto& st = self->state;
                   if (st.members.mark_down(holder, "did not answer an invalidation")) {
                     st.ep->log()->warn("{} down: did not answer an invalidation ({})",
                                        describe_owner(*st.members.find(holder)), reply.error().to_string());
                   }
                   after_lease(self, holder, std::move(then));
                 });
}

void tell_drop(self_ptr self, const master::stale_version& s) {
  auto& st = self->state;
  auto* m = st.members.find(s.holder);
  if (m == nullptr || m->state != wire::member_state::up) return;  // it lost its data or will reconcile
  st.ep->notify(m->link, wire::drop{s.key, s.version});
}

wire::cluster_status_reply status_of(master_state& st) {
  wire::cluster_status_reply out;
  out.master = st.ep->me().id;
  out.object_count = st.dir.object_count();
  auto now = st.ep->now();
  for (auto& [id, m] : st.members.all()) {
    auto usage = st.dir.usage_of(id);
    wire::member_status s;
    s.id = id;
    s.member_role = role::owner;
    s.name = m.name;
    s.address = m.address;
    s.state = m.state;
    s.capacity_bytes = m.capacity_bytes;
    s.used_bytes = usage.bytes;
    s.object_count = usage.objects;
    s.last_heartbeat_age_us =
        static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(now - m.last_heartbeat).count());
    out.members.push_back(std::move(s));
  }
  return out;
}

void on_register(self_ptr self, const request_context& ctx, const peer_info& peer,
                 const wire::register_owner& r) {
  auto& st = self->state;
  if (peer.peer_role != role::owner) {
    st.ep->reply_error(ctx, error{errc::invalid_argument, "only owners register with the master"});
    return;
  }
  if (!st.members.join(ctx.source, r.name, r.address, ctx.link, r.capacity_bytes, st.ep->now())) {
    st.ep->reply_error(ctx, error{errc::overloaded, "the master's member table is full"});
    return;
  }
  st.ep->log()->info("owner '{}' ({}) up at {}, capacity {}", r.name, ctx.source.to_string(),
                     r.address, format_size(r.capacity_bytes));
  auto interval_us = static_cast<std::uint64_t>(st.cfg.heartbeat_interval.count());
  st.ep->reply(ctx, wire::register_owner_reply{interval_us, lease_us(st.cfg)});
}

void on_place(self_ptr self, const request_context& ctx, const wire::place& p) {
  auto& st = self->state;
  std::vector<master::placement_candidate> candidates;
  for (auto id : st.members.up_owners()) {
    auto* m = st.members.find(id);
    // Puts placed but not yet committed count too, or a burst of puts
    // would all pick the same owner and fail when they store.
    auto usage = st.dir.usage_of(id);
    auto used = usage.bytes + usage.pending_bytes;
    candidates.push_back({id, m->capacity_bytes > used ? m->capacity_bytes - used : 0});
  }
  if (candidates.empty()) {
    st.ep->reply_error(ctx, error{errc::unavailable, "no owner is up"});
    return;
  }
  auto chosen = master::choose_owner(st.cfg.placement, p.preferred, candidates, p.size, *st.random);
  if (!chosen) {
    st.ep->reply_error(ctx, error{errc::no_capacity, "no up owner has room for " + format_size(p.size)});
    return;
  }
  auto expires = ctx.deadline + std::chrono::duration_cast<clock_duration>(pending_grace);
  auto version = st.dir.begin_put(p.key, p.size, *chosen, expires);
  auto* m = st.members.find(*chosen);
  st.ep->reply(ctx, wire::place_reply{version, wire::replica{*chosen, m->address}});
}

void apply_commit(self_ptr self, const request_context& ctx, const wire::commit& c) {
  auto& st = self->state;
  auto outcome = st.dir.commit(c.key, c.version, ctx.source);
  if (!outcome) {
    st.ep->reply_error(ctx, outcome.error());
    return;
  }
  bool current = !(outcome->stale && outcome->stale->version == c.version);
  if (outcome->stale) tell_drop(self, *outcome->stale);
  st.ep->reply(ctx, wire::commit_reply{current});
}

/// Whether the holder of `entry` may still answer gets of its key from its
/// fast index, given the state `cleared` already made it forget. On a
/// request's first look (no `cleared`), a requester holding the key has
/// forgotten it already (owners do before they commit or remove); after a
/// wait, the entry may have moved on and must be cleared again, whoever
/// holds it.
bool may_be_served(const master::object_entry* entry, node_id requester,
                   const std::optional<served_by>& cleared) {
  if (entry == nullptr) return false;
  if (!cleared) return entry->holder != requester;
  return !(*cleared == served_by{entry->holder, entry->version});
}

void on_commit(self_ptr self, const request_context& ctx, const wire::commit& c,
               std::optional<served_by> cleared = {}) {
  auto& st = self->state;
  auto* entry = st.dir.find(c.key);
  // Another owner may answer gets of this key from its fast index: it must
  // stop before this version becomes current.
  if (may_be_served(entry, ctx.source, cleared) && entry->version < c.version) {
    served_by now{entry->holder, entry->version};
    when_not_served(self, c.key, entry->holder, [self, ctx, c, now] { on_commit(self, ctx, c, now); });
    return;
  }
  apply_commit(self, ctx, c);
}

void on_locate(self_ptr self, const request_context& ctx, const wire::locate& l) {
  auto& st = self->state;
  auto* entry = st.dir.find(l.key);
  if (entry == nullptr) {
    st.ep->reply_error(ctx, error{errc::not_found, "key has no committed version"});
    return;
  }
  auto* m = st.members.find(entry->holder);
  if (m == nullptr || m->state != wire::member_state::up) {
    std::string who = m ? describe_owner(*m) : "owner " + entry->holder.to_string();
    st.ep->reply_error(ctx, error{errc::unavailable, "the key's only holder, " + who + ", is down"});
    return;
  }
  wire::locate_reply out{entry->version, entry->size, {wire::replica{m->id, m->address}}};
  st.ep->reply(ctx, std::move(out));
}

void on_remove(self_ptr self, const request_context& ctx, const wire::remove_key& r,
               std::optional<served_by> cleared = {}) {
  auto& st = self->state;
  auto* entry = st.dir.find(r.key);
  if (may_be_served(entry, ctx.source, cleared)) {
    served_by now{entry->holder, entry->version};
    when_not_served(self, r.key, entry->holder, [self, ctx, r, now] { on_remove(self, ctx, r, now); });
    return;
  }
  auto removed = st.dir.remove(r.key);
  if (removed) tell_drop(self, {removed->holder, r.key, removed->version});
  st.ep->reply(ctx, wire::remove_key_reply{removed.has_value()});
}

void on_request(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  auto ctx = st.ep->context_of(link, msg);
  const peer_info& peer = *st.ep->peer(link);
  std::visit(
      overloaded{
          [&](const wire::register_owner& r) { on_register(self, ctx, peer, r); },
          [&](const wire::heartbeat& h) {
            bool known = st.members.heartbeat(ctx.source, h.used_bytes, h.object_count, st.ep->now());
            st.ep->reply(ctx, wire::heartbeat_reply{known});
          },
          [&](const wire::place& p) { on_place(self, ctx, p); },
          [&](const wire::commit& c) { on_commit(self, ctx, c); },
          [&](const wire::abort_put& a) { st.dir.abort(a.version); },
          [&](const wire::leave&) {
            if (st.members.leave(ctx.source)) {
              st.ep->log()->info("{} left", describe_owner(*st.members.find(ctx.source)));
            }
          },
          [&](const wire::locate& l) { on_locate(self, ctx, l); },
          [&](const wire::remove_key& r) { on_remove(self, ctx, r); },
          [&](const wire::cluster_status&) { st.ep->reply(ctx, status_of(st)); },
          [&](const auto& other) {
            st.ep->reply_error(ctx, error{errc::invalid_argument,
                                          "the master does not serve " +
                                              std::string{wire::body_name(wire::body{other})} +
                                              "; send key-value requests to an owner"});
          },
      },
      msg.env.body);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  auto timeout = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_timeout);
  for (auto id : st.members.detect_failures(now, timeout)) {
    st.ep->log()->warn("{} down: no heartbeat for {}", describe_owner(*st.members.find(id)),
                       format_duration(st.cfg.heartbeat_timeout));
  }
  for (auto& s : st.dir.expire(now)) tell_drop(self, s);
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), tick_atom::value);
}

master_actor::behavior_type master_behavior(self_ptr self, master_deps deps) {
  auto& st = self->state;
  st.cfg = deps.config;
  st.random.emplace(deps.seed);
  st.ep.emplace(self, *deps.net, deps.identity, get_logger("master"),
                [self](clock_duration d) { self->delayed_send(self, d, sweep_atom::value); },
                deps.faults);
  self->delayed_send(self, st.cfg.heartbeat_interval, tick_atom::value);
  return {
      [self](link_up_atom, transport::link_id link, const std::string& peer) {
        self->state.ep->link_up(link, peer);
      },
      [self](inbound_atom, transport::link_id link, wire::message& msg) {
        if (auto request = self->state.ep->inbound(link, std::move(msg))) {
          on_request(self, link, std::move(*request));
        }
      },
      [self](link_down_atom, transport::link_id link, const error& reason) {
        auto& st = self->state;
        st.ep->link_down(link, reason);
        if (auto id = st.members.link_lost(link)) {
          st.ep->log()->warn("{} down: link lost ({})", describe_owner(*st.members.find(*id)),
                             reason.to_string());
        }
      },
      [self](sweep_atom) { self->state.ep->sweep(); },
      [self](tick_atom) { on_tick(self); },
      [self](resume_atom, std::uint64_t id) {
        auto& st = self->state;
        auto it = st.waiting.find(id);
        if (it == st.waiting.end()) return;
        auto then = std::move(it->second);
        st.waiting.erase(it);
        then();
      },
      [self](stop_atom) {
        self->quit();
        return true;
      },
  };
}

}  // namespace

master_actor spawn_master(caf::actor_system& sys, master_deps deps) {
  return sys.spawn(master_behavior, std::move(deps));
}

}  // namespace sluice
