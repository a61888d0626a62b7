// The object lifecycle on the master: places and commits, locates,
// removals, evictions and expiry, pins, owners' inventories and replicas
// (see docs/concepts.md). The actor's loop, membership and durability are
// in master.cpp; the key slots handed to owners in master_homes.cpp.

#include <algorithm>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/master/master_state.hpp"
#include "actors/master/persistence.hpp"
#include "actors/master/placement.hpp"
#include "runtime/keys.hpp"
#include "runtime/units.hpp"

namespace sluice::master_detail {

/// A key left the directory: its pins go with it.
void key_gone(self_ptr self, const std::string& key) {
  auto& st = self->state;
  if (st.pins.forget_key(key)) st.journal->pins_changed(key, {});
}

/// The master took `key` out on its own (not at a client's request).
void forgotten(self_ptr self, const std::string& key) {
  if (self->state.on_forgotten) self->state.on_forgotten(key);
}

namespace {

/// Which owner's fast index was made to forget a key, at which version.
struct served_by {
  node_id holder;
  std::uint64_t version = 0;
  friend bool operator==(const served_by&, const served_by&) = default;
};

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
                      if (st.on_member_down) st.on_member_down(holder, "did not answer an invalidation");
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

}  // namespace

void on_place(self_ptr self, const request_context& ctx, const wire::place& p) {
  auto& st = self->state;
  if (p.condition.if_absent && p.condition.if_version != 0) {
    answer_error(self, ctx, error{errc::invalid_argument, "a put may require the key absent or at a version, not both"});
    return;
  }
  if (auto ok = check_key(p.key); !ok) return answer_error(self, ctx, ok.error());
  if (p.size > master::object_size_max) {
    return answer_error(self, ctx, error{errc::invalid_argument, "a value of " + std::to_string(p.size) +
                                                                     " bytes is over the largest an object may be, " +
                                                                     std::to_string(master::object_size_max)});
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
  // Further copies go to other owners, the emptiest first. Fewer owners
  // than asked is refused, never capped silently — unless the put accepts
  // fewer copies (min_replicas): then it gets as many as can take it, and
  // its owner reports how many.
  std::vector<wire::replica> extra;
  auto asked = std::max<std::uint32_t>(p.replicas, 1);
  auto needed = p.min_replicas == 0 ? asked : std::min(p.min_replicas, asked);
  auto others = candidates;
  while (extra.size() + 1 < asked) {
    std::erase_if(others, [&](const master::placement_candidate& c) {
      return c.id == *chosen || std::any_of(extra.begin(), extra.end(), [&](auto& r) { return r.owner == c.id; });
    });
    auto next = master::choose_owner(placement_policy::most_free, p.preferred, others, p.size, *st.random);
    if (!next && extra.size() + 1 >= needed) break;
    if (!next) {
      auto at_least = needed < asked ? " (at least " + std::to_string(needed) + ")" : std::string{};
      answer_error(self, ctx, error{errc::unavailable, std::to_string(asked) + " copies asked" + at_least +
                                                            ", but only " + std::to_string(extra.size() + 1) +
                                                            " up owners can take " + format_size(p.size) +
                                                            "; nothing was stored"});
      return;
    }
    extra.push_back(wire::replica{*next, st.members.find(*next)->address});
  }
  auto expires = ctx.deadline + std::chrono::duration_cast<clock_duration>(pending_grace);
  auto version = st.dir.begin_put(p.key, p.size, *chosen, expires, p.condition, p.ttl_ms,
                                  std::min(asked, master::max_copies));
  st.journal->versions_used(st.dir.next_version());
  changed(self);
  auto* m = st.members.find(*chosen);
  answer(self, ctx, wire::place_reply{version, wire::replica{*chosen, m->address}, std::move(extra)});
}

namespace {

void apply_commit(self_ptr self, const request_context& ctx, const wire::commit& c) {
  auto& st = self->state;
  auto outcome = st.dir.commit(c.key, c.version, ctx.source);
  if (!outcome) {
    answer_error(self, ctx, outcome.error());
    return;
  }
  bool current = !(outcome->stale && outcome->stale->version == c.version);
  if (current) {
    auto* entry = st.dir.find_any(c.key);
    st.journal->object_committed(c.key, *entry);
    changed(self);
    // Its owner makes the other copies by the put's deadline; any missing
    // then are repair's.
    if (entry->copies > 1) {
      repair_after_put(self, c.key, ctx.deadline + std::chrono::duration_cast<clock_duration>(pending_grace));
    }
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

void commit_once_cleared(self_ptr self, const request_context& ctx, const wire::commit& c,
                         std::optional<served_by> cleared) {
  auto& st = self->state;
  auto* entry = st.dir.find_any(c.key);
  // Another owner may answer gets of this key from its fast index: it must
  // stop before this version becomes current.
  if (may_be_served(entry, ctx.source, cleared) && entry->version < c.version) {
    served_by now{entry->holder, entry->version};
    when_not_served(self, c.key, entry->holder, [self, ctx, c, now](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      commit_once_cleared(self, ctx, c, now);
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

}  // namespace

void on_commit(self_ptr self, const request_context& ctx, const wire::commit& c) {
  commit_once_cleared(self, ctx, c, std::nullopt);
}

void on_locate(self_ptr self, const request_context& ctx, const wire::locate& l, bool settled) {
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

namespace {

void remove_once_cleared(self_ptr self, const request_context& ctx, const wire::remove_key& r,
                         std::optional<served_by> cleared) {
  auto& st = self->state;
  if (foreign_home(st, r.key, ctx.source)) {
    // The home may hold newer commits of the key: it gives the slot back first.
    return with_slot_settled(self, r.key, ctx.source, true, ctx.deadline, [self, ctx, r, cleared](result<void> ok) {
      if (!ok) return answer_error(self, ctx, ok.error());
      remove_once_cleared(self, ctx, r, cleared);
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
      remove_once_cleared(self, ctx, r, now);
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

}  // namespace

void on_remove(self_ptr self, const request_context& ctx, const wire::remove_key& r) {
  remove_once_cleared(self, ctx, r, std::nullopt);
}

/// The holder of a key's current version wants to evict it: granted
/// unless the key moved on (or the asker does not hold it). The holder
/// already stopped serving it from its fast index and frees the bytes
/// itself once granted.
void on_evict(self_ptr self, const request_context& ctx, const wire::evict& e) {
  auto& st = self->state;
  auto* entry = st.dir.find_any(e.key);
  // A version the master lists for nobody here and that is no put's in
  // flight on this owner is bytes nothing names (a drop that never
  // arrived, a copy taken out while the owner was away): it may go. (The
  // request names the owner's own commits; they are applied by now.)
  bool listed = entry != nullptr && entry->version == e.version && entry->held_by(ctx.source);
  if (!listed && !st.dir.pending_on(e.key, e.version, ctx.source)) {
    return answer(self, ctx, wire::evict_reply{true});
  }
  bool granted = entry != nullptr && !st.pins.pinned(e.key, st.wall_ms());
  auto outcome = granted ? st.dir.evict(e.key, e.version, ctx.source) : master::evicted_copy::refused;
  if (outcome == master::evicted_copy::key) {
    st.journal->object_removed(e.key);
    key_gone(self, e.key);
    forgotten(self, e.key);
    changed(self);
  } else if (outcome == master::evicted_copy::replica) {
    // Evicted on purpose, to make room: repair does not put it back.
    st.dir.settle_copies(e.key);
    st.journal->object_committed(e.key, *st.dir.find_any(e.key));
    changed(self);
    if (st.on_copy_evicted) st.on_copy_evicted(e.key);
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

void on_pin(self_ptr self, const request_context& ctx, const wire::pin& p, bool settled) {
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
      repair_check(self, l.key);
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
    auto* now = st.dir.find_any(r.key);
    st.journal->object_committed(r.key, *now);
    changed(self);
    // The put made every copy it asked for: nothing left to wait for.
    if (now->copy_count() >= now->copies) st.repair_settling.erase(r.key);
  }
  // Registered already (an answer before was lost): the copy stays.
  auto* entry = st.dir.find_any(r.key);
  bool listed = entry != nullptr && entry->version == r.version && entry->held_by(ctx.source);
  answer(self, ctx, wire::add_replica_reply{added || listed});
}

}  // namespace sluice::master_detail
