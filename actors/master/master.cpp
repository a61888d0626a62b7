#include "actors/master/master.hpp"
#include "actors/master/master_state.hpp"

#include <algorithm>
#include <limits>

#include <caf/actor_system.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/overloaded.hpp"
#include "actors/master/directory.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/persistence.hpp"
#include "actors/master/placement.hpp"
#include "actors/master/registry.hpp"
#include "runtime/units.hpp"

namespace sluice {
namespace master_detail {

std::string describe_owner(const master::member& m) {
  return "owner '" + m.name + "' (" + m.id.to_string() + ")";
}

// --- durability -------------------------------------------------------------
//
// The master answers nothing that depends on a change before that change
// is durable: while changes wait for a sync, every reply and every drop
// it would send waits with them. The sync runs once the mailbox holds
// nothing older than it, so a burst of requests shares one (group commit).

void changed(self_ptr self) {
  auto& st = self->state;
  if (!st.journal->dirty() || st.sync_queued) return;
  st.sync_queued = true;
  self->send(self, sync_atom::value);
}

void when_durable(self_ptr self, std::function<void()> send) {
  auto& st = self->state;
  if (!st.journal->dirty()) return send();
  st.held.push_back(std::move(send));
}

void answer(self_ptr self, const request_context& ctx, wire::body body) {
  when_durable(self, [self, ctx, body = std::move(body)]() mutable {
    self->state.ep->reply(ctx, std::move(body));
  });
}

void answer_error(self_ptr self, const request_context& ctx, error err) {
  when_durable(self, [self, ctx, err = std::move(err)] { self->state.ep->reply_error(ctx, err); });
}

void tell_drop(self_ptr self, const master::stale_version& s) {
  when_durable(self, [self, s] {
    auto& st = self->state;
    auto* m = st.members.find(s.holder);
    if (m == nullptr || m->state != wire::member_state::up) return;  // it lost its data or will reconcile
    st.ep->notify(m->link, wire::drop{s.key, s.version});
  });
}

}  // namespace master_detail

namespace {

using namespace master_detail;
using master::directory;
using master::membership;
using master::persistence;

/// How long the master waits before it tries again a sync its store
/// refused for now.
constexpr std::chrono::milliseconds sync_retry{20};
/// Keys one listing returns when the request names no limit, and at most.
constexpr std::uint32_t list_limit_default = 1000;
constexpr std::uint32_t list_limit_max = 10000;
/// Expired keys taken out per tick, at most.
constexpr std::size_t expire_batch = 10000;

/// A key left the directory: its pins go with it.
void key_gone(self_ptr self, const std::string& key) {
  auto& st = self->state;
  if (st.pins.forget_key(key)) st.journal->pins_changed(key, {});
}

/// The master took `key` out on its own (not at a client's request).
void forgotten(self_ptr self, const std::string& key) {
  if (self->state.on_forgotten) self->state.on_forgotten(key);
}

/// Starts the master's state over from what its store holds, as a
/// restart would: members come back down until they register again.
result<master::recovery_stats> load_state(self_ptr self) {
  auto& st = self->state;
  st.dir = directory{};
  st.members = membership{};
  st.pins = master::pin_table{};
  st.slots = master::homes{};
  st.commits = master::owner_commit_log{};
  std::vector<master::member> members;
  auto stats = st.journal->load(st.dir, members, &st.pins, &st.slots, &st.commits);
  if (!stats) return stats;
  for (auto& m : members) st.members.restore(std::move(m), st.ep->now());
  return stats;
}

void on_sync(self_ptr self) {
  auto& st = self->state;
  st.sync_queued = false;
  auto ok = st.journal->sync();
  if (!ok && ok.code() == errc::unavailable) {
    // Nothing is lost yet: try again shortly; what waits keeps waiting.
    if (!st.sync_warned) st.ep->log()->warn("the master's store refused a sync ({}); retrying", ok.error().to_string());
    st.sync_warned = true;
    st.sync_queued = true;
    self->delayed_send(self, timer_delay(st.ep->faults(), sync_retry), sync_atom::value);
    return;
  }
  if (!ok) {
    // Changes the master made are lost: forget them, and everything that
    // waited on them, and carry on from what is durable.
    st.ep->log()->error("the master lost changes it could not persist ({}); reloading its durable state",
                        ok.error().to_string());
    st.journal->discard();
    st.held.clear();
    if (auto loaded = load_state(self); !loaded) {
      st.ep->log()->critical("the master cannot reload its state: {}", loaded.error().to_string());
      self->quit(caf::exit_reason::user_shutdown);
    }
    return;
  }
  st.sync_warned = false;
  auto held = std::exchange(st.held, {});
  for (auto& send : held) send();
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
/// When `holder` is the home of the key's slot, a lapsed lease is not
/// enough (it may hold commits the master has not seen): `then` gets
/// `unavailable` unless the invalidation was answered.
void when_not_served(self_ptr self, const std::string& key, node_id holder, continuation then) {
  // Sent in order with what the master holds back until its next sync:
  // an invalidation must not overtake the answer to a commit it follows.
  when_durable(self, [self, key, holder, then = std::move(then)]() mutable {
    auto& st = self->state;
    auto* m = st.members.find(holder);
    if (m == nullptr) return then(result<void>{});
    bool home = st.slots.home_of(slot_of(key)) == holder;
    // The holder may answer until its lease ran out; a home may also hold
    // commits the master never saw, so for a home that is not enough.
    auto lapse = [self, holder, home](error why, continuation then) {
      if (home) return then(std::move(why));
      after_lease(self, holder, [then = std::move(then)] { then(result<void>{}); });
    };
    if (m->state != wire::member_state::up) {
      return lapse(error{errc::unavailable, describe_owner(*m) + " is down"}, std::move(then));
    }
    auto deadline = st.ep->now() + std::chrono::duration_cast<clock_duration>(invalidate_timeout);
    invalidate_at(self, key, holder, false, deadline,
                  [self, holder, lapse, then = std::move(then)](result<void> ok) mutable {
                    if (ok) return then(std::move(ok));
                    auto& st = self->state;
                    if (st.members.mark_down(holder, "did not answer an invalidation")) {
                      st.ep->log()->warn("{} down: did not answer an invalidation ({})",
                                         describe_owner(*st.members.find(holder)), ok.error().to_string());
                    }
                    lapse(ok.error(), std::move(then));
                  });
  });
}

/// Tells every holder of a removed version to free it.
void drop_copies(self_ptr self, const std::string& key, const master::object_entry& removed) {
  tell_drop(self, {removed.holder, key, removed.version});
  for (auto r : removed.replicas) tell_drop(self, {r, key, removed.version});
}

/// Forgets every object `holder` held: it lost them.
void drop_holder(self_ptr self, node_id holder, const char* why) {
  auto& st = self->state;
  std::vector<std::string> kept;
  auto keys = st.dir.remove_holder(holder, &kept);
  for (auto& key : keys) {
    st.journal->object_removed(key);
    key_gone(self, key);
  }
  for (auto& key : kept) st.journal->object_committed(key, *st.dir.find_any(key));
  if (!keys.empty()) {
    st.ep->log()->info("dropped {} objects of owner {}: {}", keys.size(), holder.to_string(), why);
  }
  forget_owner_commits(self, holder);
  changed(self);
}

/// A new owner took the name of member `old`, which is down: once the
/// old one surely stopped serving, it and its objects are forgotten.
void replace_member(self_ptr self, node_id old) {
  after_lease(self, old, [self, old] {
    auto& st = self->state;
    auto* m = st.members.find(old);
    if (m == nullptr || m->state == wire::member_state::up) return;  // it came back
    st.ep->log()->info("{} was replaced by a new owner of that name; forgetting it", describe_owner(*m));
    drop_holder(self, old, "replaced");
    st.members.forget(old);
    st.journal->member_forgotten(old);
    changed(self);
  });
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
    s.evictions = m.evictions;
    s.stored_bytes = m.used_bytes;
    s.stored_objects = m.reported_objects;
    s.home_slots = static_cast<std::uint32_t>(st.slots.count_of(id));
    s.own_commits = st.commits.applied(id);
    s.links = m.links;
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
    answer_error(self, ctx, error{errc::invalid_argument, "only owners register with the master"});
    return;
  }
  const auto* known = st.members.find(ctx.source);
  bool record = known == nullptr || known->incarnation != r.incarnation || known->name != r.name ||
                known->address != r.address || known->capacity_bytes != r.capacity_bytes;
  if (known != nullptr && known->incarnation != r.incarnation) {
    // The same owner, started again: what it held is gone.
    drop_holder(self, ctx.source, "it restarted");
  }
  // The owner's own commits before commits_from were applied by a master:
  // if this one does not know of them, it lost its storage, and they are
  // gone with the rest (the owner's inventory frees them).
  if (r.commits_from > st.commits.applied(ctx.source) + 1) {
    st.commits.set_applied(ctx.source, r.commits_from - 1);
    st.journal->owner_commits_applied(ctx.source, r.commits_from - 1);
    changed(self);
  }
  std::vector<node_id> replaced;
  for (auto& [id, m] : st.members.all()) {
    if (id != ctx.source && m.name == r.name && m.state != wire::member_state::up) replaced.push_back(id);
  }
  for (auto id : replaced) replace_member(self, id);
  if (!st.members.join(ctx.source, r.name, r.address, ctx.link, r.capacity_bytes, r.incarnation,
                       st.ep->now(), r.evicts)) {
    answer_error(self, ctx, error{errc::overloaded, "the master's member table is full"});
    return;
  }
  if (record) {
    st.journal->member_joined(*st.members.find(ctx.source));
    changed(self);
  }
  st.ep->log()->info("owner '{}' ({}) up at {}, capacity {}", r.name, ctx.source.to_string(),
                     r.address, format_size(r.capacity_bytes));
  auto interval_us = static_cast<std::uint64_t>(st.cfg.heartbeat_interval.count());
  answer(self, ctx, wire::register_owner_reply{interval_us, lease_us(st.cfg)});
}

void on_place(self_ptr self, const request_context& ctx, const wire::place& p) {
  auto& st = self->state;
  if (p.condition.if_absent && p.condition.if_version != 0) {
    answer_error(self, ctx, error{errc::invalid_argument, "a put may require the key absent or at a version, not both"});
    return;
  }
  // The master hands out this version: the key's slot must be no owner's.
  // Another owner's slot comes back first; the requester's own it gave up
  // before asking.
  if (auto home = st.slots.home_of(slot_of(p.key)); home && *home != ctx.source) {
    return with_slot_settled(self, p.key, ctx.source, true, ctx.deadline, [self, ctx, p](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      on_place(self, ctx, p);
    });
  }
  home_gives_up(self, p.key, ctx.source);
  if (auto holds = st.dir.check(p.key, p.condition); !holds) {
    answer_error(self, ctx, holds.error());
    return;
  }
  std::vector<master::placement_candidate> candidates;
  for (auto id : st.members.up_owners()) {
    auto* m = st.members.find(id);
    // Puts placed but not yet committed count too, or a burst of puts
    // would all pick the same owner and fail when they store.
    auto usage = st.dir.usage_of(id);
    auto used = usage.bytes + usage.pending_bytes;
    candidates.push_back({id, m->capacity_bytes > used ? m->capacity_bytes - used : 0, m->capacity_bytes, m->evicts});
  }
  if (candidates.empty()) {
    answer_error(self, ctx, error{errc::unavailable, "no owner is up"});
    return;
  }
  // A put may name the owner it prefers; it gets it when that owner is up
  // and can take the value, like local-first does for the put's own owner.
  auto policy = st.cfg.placement;
  auto preferred = p.preferred;
  if (!p.prefer_owner.empty()) {
    for (auto& [id, m] : st.members.all()) {
      if (m.name == p.prefer_owner && m.state == wire::member_state::up) {
        policy = placement_policy::local_first;
        preferred = id;
      }
    }
  }
  auto chosen = master::choose_owner(policy, preferred, candidates, p.size, *st.random);
  if (!chosen) {
    answer_error(self, ctx, error{errc::no_capacity, "no up owner has room for " + format_size(p.size)});
    return;
  }
  // Further copies go to other owners, the emptiest first.
  std::vector<wire::replica> extra;
  auto wanted = std::max<std::uint32_t>(p.replicas, 1) - 1;
  auto others = candidates;
  while (extra.size() < wanted) {
    std::erase_if(others, [&](const master::placement_candidate& c) {
      return c.id == *chosen || std::any_of(extra.begin(), extra.end(), [&](auto& r) { return r.owner == c.id; });
    });
    auto next = master::choose_owner(placement_policy::most_free, p.preferred, others, p.size, *st.random);
    if (!next) {
      answer_error(self, ctx, error{errc::unavailable, std::to_string(p.replicas) + " copies asked, but only " +
                                                            std::to_string(extra.size() + 1) +
                                                            " up owners can take " + format_size(p.size)});
      return;
    }
    extra.push_back(wire::replica{*next, st.members.find(*next)->address});
  }
  auto expires = ctx.deadline + std::chrono::duration_cast<clock_duration>(pending_grace);
  auto version = st.dir.begin_put(p.key, p.size, *chosen, expires, p.condition, p.ttl_ms);
  st.journal->versions_used(st.dir.next_version());
  changed(self);
  auto* m = st.members.find(*chosen);
  answer(self, ctx, wire::place_reply{version, wire::replica{*chosen, m->address}, std::move(extra)});
}

void apply_commit(self_ptr self, const request_context& ctx, const wire::commit& c) {
  auto& st = self->state;
  auto outcome = st.dir.commit(c.key, c.version, ctx.source);
  if (!outcome) {
    answer_error(self, ctx, outcome.error());
    return;
  }
  bool current = !(outcome->stale && outcome->stale->version == c.version);
  if (current) {
    st.journal->object_committed(c.key, *st.dir.find_any(c.key));
    changed(self);
  }
  if (outcome->stale) tell_drop(self, *outcome->stale);
  for (auto& s : outcome->stale_replicas) tell_drop(self, s);
  answer(self, ctx, wire::commit_reply{current});
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
  auto* entry = st.dir.find_any(c.key);
  // Another owner may answer gets of this key from its fast index: it must
  // stop before this version becomes current.
  if (may_be_served(entry, ctx.source, cleared) && entry->version < c.version) {
    served_by now{entry->holder, entry->version};
    when_not_served(self, c.key, entry->holder, [self, ctx, c, now](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      on_commit(self, ctx, c, now);
    });
    return;
  }
  apply_commit(self, ctx, c);
}

/// Whether `key`'s slot is handed to an owner other than `requester`.
bool foreign_home(const master_state& st, const std::string& key, node_id requester) {
  auto home = st.slots.home_of(slot_of(key));
  return home && *home != requester;
}

/// Runs `serve` once the master's directory holds every commit another
/// owner made on its own in `key`'s slot before now (a barrier), and
/// answers the error when that cannot be had.
void settled_then(self_ptr self, const request_context& ctx, const std::string& key, std::function<void()> serve) {
  with_slot_settled(self, key, ctx.source, false, ctx.deadline, [self, ctx, serve = std::move(serve)](result<void> ok) {
    if (!ok) return answer_error(self, ctx, ok.error());
    serve();
  });
}

void on_locate(self_ptr self, const request_context& ctx, const wire::locate& l, bool settled = false) {
  auto& st = self->state;
  if (!settled && foreign_home(st, l.key, ctx.source)) {
    return settled_then(self, ctx, l.key, [self, ctx, l] { on_locate(self, ctx, l, true); });
  }
  auto* entry = st.dir.find(l.key);
  if (entry == nullptr) {
    answer_error(self, ctx, error{errc::not_found, "key has no committed version"});
    return;
  }
  wire::locate_reply out{entry->version, entry->size, {}};
  auto add = [&](node_id id) {
    auto* m = st.members.find(id);
    if (m != nullptr && m->state == wire::member_state::up) out.replicas.push_back(wire::replica{id, m->address});
  };
  add(entry->holder);
  for (auto r : entry->replicas) add(r);
  if (out.replicas.empty()) {
    auto* m = st.members.find(entry->holder);
    std::string who = m ? describe_owner(*m) : "owner " + entry->holder.to_string();
    auto copies = entry->replicas.empty() ? "the key's only holder, " + who + ", is down"
                                          : "every holder of the key (" + std::to_string(entry->replicas.size() + 1) +
                                                " copies) is down";
    answer_error(self, ctx, error{errc::unavailable, copies});
    return;
  }
  answer(self, ctx, std::move(out));
}

void on_remove(self_ptr self, const request_context& ctx, const wire::remove_key& r,
               std::optional<served_by> cleared = {}) {
  auto& st = self->state;
  if (foreign_home(st, r.key, ctx.source)) {
    // The home may hold newer commits of the key: it gives the slot back first.
    return with_slot_settled(self, r.key, ctx.source, true, ctx.deadline, [self, ctx, r, cleared](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      on_remove(self, ctx, r, cleared);
    });
  }
  auto* entry = st.dir.find_any(r.key);
  bool live = st.dir.find(r.key) != nullptr;
  if (r.if_version != 0 && !live) entry = nullptr;
  if (r.if_version != 0 && (entry == nullptr || entry->version != r.if_version)) {
    auto now = entry == nullptr ? std::string{"has no committed version"}
                                : "is at version " + std::to_string(entry->version);
    answer_error(self, ctx, error{errc::conflict, "the key " + now + ", not " + std::to_string(r.if_version)});
    return;
  }
  if (may_be_served(entry, ctx.source, cleared)) {
    served_by now{entry->holder, entry->version};
    when_not_served(self, r.key, entry->holder, [self, ctx, r, now](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      on_remove(self, ctx, r, now);
    });
    return;
  }
  live = st.dir.find(r.key) != nullptr;
  auto removed = st.dir.remove(r.key);
  if (removed) {
    st.journal->object_removed(r.key);
    key_gone(self, r.key);
    changed(self);
    drop_copies(self, r.key, *removed);
  }
  answer(self, ctx, wire::remove_key_reply{removed.has_value() && live});
}

/// The holder of a key's current version wants to evict it: granted
/// unless the key moved on (or the asker does not hold it). The holder
/// already stopped serving it from its fast index and frees the bytes
/// itself once granted.
void on_evict(self_ptr self, const request_context& ctx, const wire::evict& e) {
  auto& st = self->state;
  auto* entry = st.dir.find_any(e.key);
  bool granted = entry != nullptr && !st.pins.pinned(e.key, st.wall_ms());
  auto outcome = granted ? st.dir.evict(e.key, e.version, ctx.source) : master::evicted_copy::refused;
  if (outcome == master::evicted_copy::key) {
    st.journal->object_removed(e.key);
    key_gone(self, e.key);
    forgotten(self, e.key);
    changed(self);
  } else if (outcome == master::evicted_copy::replica) {
    st.journal->object_committed(e.key, *st.dir.find_any(e.key));
    changed(self);
  }
  answer(self, ctx, wire::evict_reply{outcome != master::evicted_copy::refused});
}

/// Takes out an expired version once its holder surely stopped serving
/// it (unless the key moved on meanwhile).
void expire_key(self_ptr self, const std::string& key, std::uint64_t version) {
  auto* entry = self->state.dir.find_any(key);
  if (entry == nullptr || entry->version != version) return (void)self->state.expiring.erase(key);
  // The holder may be the home of the key's slot and hold a newer commit:
  // the invalidation brings it in (and a later tick tries again when the
  // holder cannot be reached).
  when_not_served(self, key, entry->holder, [self, key, version](result<void> ok) {
    auto& st = self->state;
    st.expiring.erase(key);
    if (!ok) return;
    auto* now = st.dir.find_any(key);
    if (now == nullptr || now->version != version) return;
    auto removed = st.dir.remove(key);
    st.journal->object_removed(key);
    key_gone(self, key);
    forgotten(self, key);
    changed(self);
    drop_copies(self, key, *removed);
  });
}

void pins_changed(self_ptr self, const std::vector<std::string>& keys) {
  auto& st = self->state;
  for (auto& key : keys) st.journal->pins_changed(key, st.pins.holds(key));
  if (!keys.empty()) changed(self);
}

void on_pin(self_ptr self, const request_context& ctx, const wire::pin& p, bool settled = false) {
  auto& st = self->state;
  if (!settled && foreign_home(st, p.key, ctx.source)) {
    return settled_then(self, ctx, p.key, [self, ctx, p] { on_pin(self, ctx, p, true); });
  }
  auto* entry = st.dir.find(p.key);
  if (entry == nullptr) return answer_error(self, ctx, error{errc::not_found, "key has no committed version"});
  auto until = p.ttl_ms == 0 ? master::pinned_forever
                             : st.wall_ms() + static_cast<std::int64_t>(std::min<std::uint64_t>(p.ttl_ms, 1ULL << 50));
  st.pins.pin(p.key, ctx.source, p.session, until);
  pins_changed(self, {p.key});
  answer(self, ctx, wire::pin_reply{entry->version});
}

/// One page of an owner's inventory: versions the master does not list
/// for it go back to be freed; versions the master lists for it in the
/// page's key range that it no longer holds lose that copy. An owner sends
/// its whole inventory right after registering, before anything else, so
/// no change it makes can fall between its pages.
void on_inventory(self_ptr self, const request_context& ctx, const wire::inventory& inv) {
  auto& st = self->state;
  bool ordered = std::is_sorted(inv.entries.begin(), inv.entries.end()) &&
                 (inv.entries.empty() || inv.after.empty() || inv.after < inv.entries.front().key);
  if (!ordered) {
    return answer_error(self, ctx, error{errc::invalid_argument, "an inventory page must list keys after its start, in order"});
  }
  wire::inventory_reply out;
  for (auto& e : inv.entries) {
    auto* entry = st.dir.find_any(e.key);
    bool listed = entry != nullptr && entry->version == e.version && entry->held_by(ctx.source);
    if (!listed && !st.dir.pending_on(e.key, e.version, ctx.source)) out.unknown.push_back(e);
  }
  auto through = inv.entries.empty() ? inv.after : inv.entries.back().key;
  std::vector<wire::key_version> lost;
  for (auto& held : st.dir.held_in_range(ctx.source, inv.after, through, inv.final)) {
    if (!std::binary_search(inv.entries.begin(), inv.entries.end(), held)) lost.push_back(held);
  }
  for (auto& l : lost) {
    auto outcome = st.dir.evict(l.key, l.version, ctx.source);
    if (outcome == master::evicted_copy::key) {
      st.journal->object_removed(l.key);
      key_gone(self, l.key);
      forgotten(self, l.key);
    } else if (outcome == master::evicted_copy::replica) {
      st.journal->object_committed(l.key, *st.dir.find_any(l.key));
    }
  }
  if (!lost.empty()) {
    st.ep->log()->warn("owner {} no longer holds {} objects the master listed for it; dropped them",
                       ctx.source.to_string(), lost.size());
    changed(self);
  }
  answer(self, ctx, std::move(out));
}

void on_add_replica(self_ptr self, const request_context& ctx, const wire::add_replica& r) {
  auto& st = self->state;
  if (foreign_home(st, r.key, ctx.source)) {
    // The key's slot has a home, which holds every copy of its keys (so a
    // home that dies takes no newer commit with it while an older copy
    // lives on). A copy a read left elsewhere is not worth the slot: it
    // is refused and freed. (A put with copies takes the slot back when
    // it is placed, before its copies are made.)
    return answer(self, ctx, wire::add_replica_reply{false});
  }
  bool added = st.dir.add_replica(r.key, r.version, ctx.source);
  if (added) {
    st.journal->object_committed(r.key, *st.dir.find_any(r.key));
    changed(self);
  }
  answer(self, ctx, wire::add_replica_reply{added});
}

/// Answers with what `read` finds once every other owner's own commits are
/// in the directory (listing and counting see every key).
void with_all_commits(self_ptr self, const request_context& ctx, std::function<wire::body()> read) {
  with_all_settled(self, ctx.source, ctx.deadline, [self, ctx, read = std::move(read)](result<void> ok) {
    if (!ok) return answer_error(self, ctx, ok.error());
    self->state.dir.advance(self->state.wall_ms());
    answer(self, ctx, read());
  });
}

void dispatch(self_ptr self, transport::link_id link, wire::message msg);

/// Whether the answer to `body` depends on the directory — so it must see
/// the sender's own commits first. Registration, heartbeats and the
/// commits themselves do not (they are how the commits get here), nor
/// does the RPC registry.
bool reads_directory(const wire::body& body) {
  return !(std::holds_alternative<wire::register_owner>(body) || std::holds_alternative<wire::heartbeat>(body) ||
           std::holds_alternative<wire::owner_commits>(body) || std::holds_alternative<wire::leave>(body) ||
           std::holds_alternative<wire::cluster_status>(body) || std::holds_alternative<wire::rpc>(body));
}

void on_request(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  // An owner's request that follows commits it made itself waits until
  // they are applied, so it sees them (they may arrive late or be sent
  // again).
  if (msg.env.after > st.commits.applied(msg.env.source) && reads_directory(msg.env.body)) {
    auto* peer = st.ep->peer(link);
    if (peer != nullptr && peer->peer_role == role::owner) {
      auto ctx = st.ep->context_of(link, msg);
      auto held = std::make_shared<wire::message>(std::move(msg));
      st.commits.wait(ctx.source, held->env.after, ctx.deadline, [self, link, ctx, held](result<void> ok) {
        if (self->state.ep->peer(link) == nullptr) return;  // the link went away meanwhile
        if (!ok) return answer_error(self, ctx, ok.error());
        dispatch(self, link, std::move(*held));
      });
      return;
    }
  }
  dispatch(self, link, std::move(msg));
}

void dispatch(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  st.dir.advance(st.wall_ms());
  auto ctx = st.ep->context_of(link, msg);
  const peer_info& peer = *st.ep->peer(link);
  std::visit(
      overloaded{
          [&](const wire::register_owner& r) { on_register(self, ctx, peer, r); },
          [&](const wire::heartbeat& h) {
            bool known = st.members.heartbeat(ctx.source, h.used_bytes, h.object_count, st.ep->now(), h.evictions,
                                              h.links);
            if (known) {
              auto live = h.sessions;
              std::sort(live.begin(), live.end());
              pins_changed(self, st.pins.keep_sessions(ctx.source, live));
              st.registry.keep_sessions(ctx.source, live);
            }
            answer(self, ctx, wire::heartbeat_reply{known});
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
          [&](const wire::evict& e) { on_evict(self, ctx, e); },
          [&](const wire::inventory& inv) { on_inventory(self, ctx, inv); },
          [&](const wire::add_replica& r) { on_add_replica(self, ctx, r); },
          [&](const wire::claim& c) { on_claim(self, ctx, c); },
          [&](const wire::owner_commits& c) { on_owner_commits(self, ctx, c); },
          [&](const wire::pin& p) { on_pin(self, ctx, p); },
          [&](const wire::unpin& u) {
            bool was = st.pins.unpin(u.key, u.session, st.wall_ms());
            st.journal->pins_changed(u.key, st.pins.holds(u.key));
            changed(self);
            answer(self, ctx, wire::unpin_reply{was});
          },
          [&](const wire::cluster_status&) { answer(self, ctx, status_of(st)); },
          [&](const wire::list_keys& l) {
            with_all_commits(self, ctx, [self, l]() -> wire::body {
              auto limit = l.limit == 0 ? list_limit_default : std::min(l.limit, list_limit_max);
              auto listed = self->state.dir.list(l.prefix, l.start_after, limit);
              return wire::list_keys_reply{std::move(listed.keys), listed.more};
            });
          },
          [&](const wire::count_keys& c) {
            with_all_commits(self, ctx, [self, c]() -> wire::body {
              return wire::count_keys_reply{self->state.dir.count(c.prefix)};
            });
          },
          [&](const wire::rpc& r) {
            auto out = master::serve_registry(st.registry, ctx.source, peer.peer_role, r, [&st](node_id id) {
              auto* m = st.members.find(id);
              return m != nullptr && m->state == wire::member_state::up ? &m->address : nullptr;
            });
            if (!out) return answer_error(self, ctx, out.error());
            answer(self, ctx, std::move(*out));
          },
          [&](const auto& other) {
            answer_error(self, ctx, error{errc::invalid_argument,
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
  expire_commit_waits(self);
  st.dir.advance(st.wall_ms());
  // Pins of sessions through owners that are down lapse, and so do pins
  // whose time ran out.
  std::vector<node_id> down;
  for (auto& [id, m] : st.members.all()) {
    if (m.state != wire::member_state::up) down.push_back(id);
  }
  for (auto id : down) pins_changed(self, st.pins.drop_owner(id));
  // Instances behind a down owner cannot be reached; it sends them again
  // when it registers.
  for (auto id : down) st.registry.drop_owner(id);
  pins_changed(self, st.pins.prune(st.wall_ms()));
  for (auto& [key, version] : st.dir.expired(expire_batch)) {
    if (st.expiring.insert(key).second) expire_key(self, key, version);
  }
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.heartbeat_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), tick_atom::value);
}

master_actor::behavior_type master_behavior(self_ptr self, master_deps deps,
                                            std::shared_ptr<boot_state> boot) {
  auto& st = self->state;
  st.cfg = deps.config;
  st.random.emplace(deps.seed);
  st.on_forgotten = std::move(deps.on_forgotten);
  st.wall_ms = std::move(deps.wall_ms);
  st.ep.emplace(self, *deps.net, deps.identity, get_logger("master"),
                [self](clock_duration d) { self->delayed_send(self, d, sweep_atom::value); },
                deps.faults);
  st.journal.emplace(deps.store);
  st.dir = std::move(boot->dir);
  st.pins = std::move(boot->pins);
  st.slots = std::move(boot->slots);
  st.commits = std::move(boot->commits);
  // Owners it knew are down until they register again; until then their
  // leases may still run (they started before this master did).
  for (auto& m : boot->members) st.members.restore(std::move(m), st.ep->now());
  boot.reset();
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
      [self](inbound_batch_atom, std::vector<inbound_item>& batch) {
        auto& ep = *self->state.ep;
        ep.begin_batch();
        for (auto& item : batch) {
          if (auto request = ep.inbound(item.link, std::move(item.msg))) on_request(self, item.link, std::move(*request));
        }
        ep.end_batch();
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
      [self](flush_atom) { self->state.ep->flush(); },
      [self](tick_atom) { on_tick(self); },
      [self](sync_atom) { on_sync(self); },
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

result<master_actor> spawn_master(caf::actor_system& sys, master_deps deps, master_recovery* recovered) {
  if (!deps.wall_ms) return fail(errc::invalid_argument, "the master needs a wall clock (master_deps::wall_ms)");
  auto boot = std::make_shared<boot_state>();
  persistence journal{deps.store};
  auto stats = journal.load(boot->dir, boot->members, &boot->pins, &boot->slots, &boot->commits);
  if (!stats) return stats.error();
  if (recovered != nullptr) {
    recovered->objects = stats->objects;
    recovered->members = stats->members;
  }
  return sys.spawn(master_behavior, std::move(deps), std::move(boot));
}

}  // namespace sluice
