// Repair: objects that lost copies get new ones (docs/concepts.md,
// "Repair"). A copy counts toward its object's target while its owner is
// up, or down for less than [master] repair_after; an owner that left, or
// came back without what it held, loses its copies at once. The master
// counts every object again when the set of owners whose copies no longer
// count changes (and once after it starts: the count is rebuilt from the
// directory and membership, so repair goes on after a restart), and looks
// at single keys when they change. A copy is made by the owner that
// placement picks, which reads the value from a live holder and registers
// it (add_replica); the master only chooses and paces: [master]
// repair_concurrency copies at once, repair_rate bytes per second, the
// keys with the fewest live copies first.
//
// A full count walks the whole directory: O(objects) each time the set of
// lost owners changes, which is rare; a tick otherwise costs the keys it
// starts and the checks that fell due.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>

#include "actors/master/master_state.hpp"
#include "actors/master/placement.hpp"
#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice::master_detail {
namespace {

/// A failed copy, or one with nowhere to go, is tried again this much later.
constexpr std::chrono::seconds repair_retry{2};
/// The least time a copy is given; larger ones get more, by repair_rate.
constexpr std::chrono::seconds repair_copy_time{10};

bool copy_counts(const master_state& st, node_id holder, clock_time now) {
  auto* m = st.members.find(holder);
  if (m == nullptr) return false;
  if (m->state == wire::member_state::up) return true;
  if (m->left) return false;
  return now - m->last_heartbeat < std::chrono::duration_cast<clock_duration>(st.cfg.repair_after);
}

struct copies_now {
  std::uint32_t counted = 0;            ///< copies that count toward the target
  std::vector<wire::replica> readable;  ///< on owners up now: what a copy is read from
};

copies_now count_copies(const master_state& st, const master::object_entry& e, clock_time now) {
  copies_now out;
  auto add = [&](node_id id) {
    if (!copy_counts(st, id, now)) return;
    out.counted += 1;
    auto* m = st.members.find(id);
    if (m->state == wire::member_state::up) out.readable.push_back(wire::replica{id, m->address});
  };
  add(e.holder);
  for (auto r : e.replicas) add(r);
  return out;
}

bool expired(const master_state& st, const master::object_entry& e) {
  return e.expires_ms != 0 && e.expires_ms <= st.wall_ms();
}

/// Files `key` where its copies put it: nowhere (enough), stranded or
/// queued; a key whose put is still making its copies waits for them.
void file(master_state& st, const std::string& key, const master::object_entry& e, clock_time now) {
  if (e.copies <= 1 || expired(st, e) || st.repair_settling.contains(key)) return st.repair.drop(key);
  auto c = count_copies(st, e, now);
  if (c.counted >= e.copies) return st.repair.drop(key);
  if (c.readable.empty()) return st.repair.stranded(key);
  st.repair.want(key, c.counted);
}

std::set<node_id> lost_owners(const master_state& st, clock_time now) {
  std::set<node_id> out;
  for (auto& [id, m] : st.members.all()) {
    if (!copy_counts(st, id, now)) out.insert(id);
  }
  return out;
}

void count_all(self_ptr self, clock_time now) {
  auto& st = self->state;
  st.repair.clear();
  st.dir.for_each([&](std::string_view key, const master::object_entry& e) {
    // An object with one copy asked for is nowhere in the queue just cleared.
    if (e.copies > 1) file(st, std::string{key}, e, now);
  });
  if (st.repair.under_replicated() + st.repair.stranded_count() > 0) {
    st.ep->log()->info("repair: {} objects below their copy target, {} of them with no live copy",
                       st.repair.under_replicated() + st.repair.stranded_count(), st.repair.stranded_count());
  }
}

/// Copies that no longer count are taken out of an object that has its
/// target again: their owners free them if they ever come back (their
/// inventory lists versions the master does not).
void forget_lost_copies(self_ptr self, const std::string& key, clock_time now) {
  auto& st = self->state;
  auto* e = st.dir.find_any(key);
  if (e == nullptr || count_copies(st, *e, now).counted < e->copies) return;
  std::vector<node_id> lost;
  if (!copy_counts(st, e->holder, now)) lost.push_back(e->holder);
  for (auto r : e->replicas) {
    if (!copy_counts(st, r, now)) lost.push_back(r);
  }
  if (lost.empty()) return;
  auto version = e->version;
  for (auto id : lost) {
    // Never the last copy: the counted ones stay.
    auto outcome = st.dir.evict(key, version, id);
    SLUICE_ASSERT(outcome == master::evicted_copy::replica);
  }
  st.journal->object_committed(key, *st.dir.find_any(key));
  changed(self);
}

void start_copies(self_ptr self);

void start_copy(self_ptr self, const std::string& key) {
  auto& st = self->state;
  auto now = st.ep->now();
  auto* e = st.dir.find(key);
  if (e == nullptr) return st.repair.drop(key);
  auto c = count_copies(st, *e, now);
  if (e->copies <= 1 || c.counted >= e->copies) return st.repair.drop(key);
  if (c.readable.empty()) return st.repair.stranded(key);
  // The owner placement picks among those up that hold no copy of it.
  std::vector<master::placement_candidate> candidates;
  for (auto id : st.members.up_owners()) {
    if (e->held_by(id)) continue;
    auto* m = st.members.find(id);
    auto usage = st.dir.usage_of(id);
    auto used = usage.bytes + usage.pending_bytes;
    candidates.push_back({id, m->capacity_bytes > used ? m->capacity_bytes - used : 0, m->capacity_bytes, m->evicts});
  }
  auto target = master::choose_owner(placement_policy::most_free, node_id{}, candidates, e->size, *st.random);
  if (!target) {
    st.ep->log()->debug("repair {}: no up owner without a copy has room for {}", key, format_size(e->size));
    return st.repair.defer(key, now + std::chrono::duration_cast<clock_duration>(repair_retry));
  }
  auto* m = st.members.find(*target);
  auto size = e->size;
  auto version = e->version;
  st.repair.started(key, size);
  auto extra = std::chrono::microseconds{static_cast<std::int64_t>(
      std::min<long double>(4e6L * static_cast<long double>(size) / static_cast<long double>(st.cfg.repair_rate_bytes),
                            3.6e9L))};
  auto deadline = now + std::chrono::duration_cast<clock_duration>(repair_copy_time + extra);
  st.ep->log()->debug("repair {}: copying version {} ({}) to {}", key, version, format_size(size),
                      describe_owner(*m));
  auto failed = [self, key, size, target = *target](const error& why) {
    auto& st = self->state;
    st.repair.finished(key, false, size, st.ep->now() + std::chrono::duration_cast<clock_duration>(repair_retry));
    if (st.on_repair) st.on_repair(false);
    st.ep->log()->info("repair {}: the copy to owner {} failed: {}", key, target.to_string(), why.to_string());
    start_copies(self);
  };
  auto send = [self, key, size, failed, target = *target,
               request = wire::repair_copy{key, version, size, std::move(c.readable)}, deadline]() mutable {
    auto* m = self->state.members.find(target);
    if (m == nullptr || m->state != wire::member_state::up) return failed(error{errc::unavailable, "it is down"});
    ask_member(self, *m, std::move(request), deadline, [self, key, size, failed](result<wire::message> reply) {
      auto& st = self->state;
      auto ok = reply_body<wire::ok_reply>(reply);
      if (!ok) return failed(ok.error());
      st.repair.finished(key, true, size, st.ep->now());
      if (st.on_repair) st.on_repair(true);
      forget_lost_copies(self, key, st.ep->now());
      repair_check(self, key);
      start_copies(self);
    });
  };
  // A key whose only live holder has since been handed its slot: the
  // slot comes back first, or the new copy would be refused.
  if (auto home = st.slots.home_of(slot_of(key)); home && *home != *target) {
    return with_slot_settled(self, key, *target, true, deadline,
                             [send = std::move(send), failed](result<void> ok) mutable {
                               if (!ok) return failed(ok.error());
                               send();
                             });
  }
  send();
}

void start_copies(self_ptr self) {
  auto& st = self->state;
  if (st.plant_no_repair) return;
  while (auto key = st.repair.next(st.ep->now())) start_copy(self, *key);
}

}  // namespace

void repair_check(self_ptr self, const std::string& key) {
  auto& st = self->state;
  auto* e = st.dir.find(key);
  if (e == nullptr) return st.repair.drop(key);
  file(st, key, *e, st.ep->now());
}

void repair_recount(self_ptr self) { self->state.repair_count_due = true; }

void repair_after_put(self_ptr self, const std::string& key, clock_time deadline) {
  auto& st = self->state;
  if (st.repair_checks.size() >= repair_checks_max) return repair_recount(self);
  st.repair_checks.emplace_back(deadline, key);
  auto& due = st.repair_settling[key];
  due = std::max(due, deadline);
}

void repair_tick(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  auto lost = lost_owners(st, now);
  if (st.repair_count_due || lost != st.repair_lost) {
    st.repair_count_due = false;
    st.repair_lost = std::move(lost);
    count_all(self, now);
  }
  // Deadlines arrive roughly in order; one out of order waits for those
  // before it, which only delays its look.
  while (!st.repair_checks.empty() && st.repair_checks.front().first <= now) {
    auto key = std::move(st.repair_checks.front().second);
    st.repair_checks.pop_front();
    // A later put of the key made it wait longer: that one's check comes.
    auto it = st.repair_settling.find(key);
    if (it == st.repair_settling.end() || it->second > now) continue;
    st.repair_settling.erase(it);
    repair_check(self, key);
  }
  for (auto& key : st.repair.due(now)) repair_check(self, key);
  start_copies(self);
}

}  // namespace sluice::master_detail
