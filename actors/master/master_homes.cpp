// Key slots handed to owners: the master's side of owner-committed puts
// (see homes.hpp and docs/concepts.md, "Owner-committed puts").

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/master/master_state.hpp"

namespace sluice::master_detail {
namespace {

void set_home(self_ptr self, key_slot slot, std::optional<node_id> owner) {
  auto& st = self->state;
  if (owner) {
    st.slots.grant(slot, *owner);
  } else {
    st.slots.release(slot, st.ep->now(), false);
  }
  st.journal->home_changed(slot, owner);
  changed(self);
}

/// Runs what waited for `owner`'s commits, now applied further.
void run_ready(self_ptr self, node_id owner) {
  for (auto& then : self->state.commits.ready(owner)) then(result<void>{});
}

/// `owner` answered flushed{seq}: goes on once the master applied its
/// commits through `seq`.
void after_flushed(self_ptr self, node_id owner, result<wire::message>& reply, clock_time deadline,
                   continuation then) {
  auto done = reply_body<wire::flushed>(reply);
  if (!done) return then(std::move(done).error());
  self->state.commits.wait(owner, done->seq, deadline, std::move(then));
}

error unreachable(const master::member* m, const std::string& why) {
  auto who = m != nullptr ? describe_owner(*m) : std::string{"an owner the master no longer knows"};
  return error{errc::unavailable, "the key's slot is written by " + who + ", which " + why +
                                      "; retry once it is back"};
}

}  // namespace

void invalidate_at(self_ptr self, const std::string& key, node_id holder, bool for_other, clock_time deadline,
                   continuation then) {
  auto& st = self->state;
  auto* m = st.members.find(holder);
  if (m == nullptr || m->state != wire::member_state::up) return then(unreachable(m, "is down"));
  auto slot = slot_of(key);
  bool home = st.slots.home_of(slot) == holder;
  if (home) st.recalling.insert(slot);
  wire::invalidate inv{key, st.slots.generation()};
  auto cap = st.ep->now() + std::chrono::duration_cast<clock_duration>(invalidate_timeout);
  ask_member(self, *m, std::move(inv), std::min(deadline, cap),
                 [self, holder, slot, home, for_other, deadline, then = std::move(then)](result<wire::message> reply) mutable {
                   after_flushed(self, holder, reply, deadline, [self, holder, slot, home, for_other, then](result<void> ok) {
                     auto& st = self->state;
                     if (home) st.recalling.erase(slot);
                     if (ok && home && st.slots.home_of(slot) == holder) {
                       set_home(self, slot, std::nullopt);
                       if (for_other) st.slots.release(slot, st.ep->now(), true);
                     }
                     then(std::move(ok));
                   });
                 });
}

void with_slot_settled(self_ptr self, const std::string& key, node_id requester, bool recall,
                       clock_time deadline, continuation then) {
  auto& st = self->state;
  auto home = st.slots.home_of(slot_of(key));
  if (!home || *home == requester) return then(result<void>{});
  if (recall) return invalidate_at(self, key, *home, true, deadline, std::move(then));
  auto* m = st.members.find(*home);
  if (m == nullptr || m->state != wire::member_state::up) return then(unreachable(m, "is down"));
  auto owner = *home;
  auto cap = st.ep->now() + std::chrono::duration_cast<clock_duration>(invalidate_timeout);
  ask_member(self, *m, wire::barrier{}, std::min(deadline, cap),
                 [self, owner, deadline, then = std::move(then)](result<wire::message> reply) mutable {
                   after_flushed(self, owner, reply, deadline, std::move(then));
                 });
}

void with_all_settled(self_ptr self, node_id requester, clock_time deadline, continuation then) {
  auto& st = self->state;
  std::vector<node_id> homes;
  for (auto h : st.slots.holders()) {
    if (h != requester) homes.push_back(h);
  }
  if (homes.empty()) return then(result<void>{});
  struct join {
    std::size_t left;
    std::optional<error> failed;
    continuation then;
  };
  auto j = std::make_shared<join>(join{homes.size(), std::nullopt, std::move(then)});
  auto one = [j](result<void> ok) {
    if (!ok && !j->failed) j->failed = ok.error();
    if (--j->left > 0) return;
    if (j->failed) return j->then(*j->failed);
    j->then(result<void>{});
  };
  for (auto h : homes) {
    auto* m = st.members.find(h);
    if (m == nullptr || m->state != wire::member_state::up) {
      one(unreachable(m, "is down"));
      continue;
    }
    auto cap = st.ep->now() + std::chrono::duration_cast<clock_duration>(invalidate_timeout);
    ask_member(self, *m, wire::barrier{}, std::min(deadline, cap),
                   [self, h, deadline, one](result<wire::message> reply) { after_flushed(self, h, reply, deadline, one); });
  }
}

void home_gives_up(self_ptr self, const std::string& key, node_id requester) {
  auto slot = slot_of(key);
  if (self->state.slots.home_of(slot) == requester) set_home(self, slot, std::nullopt);
}

void on_claim(self_ptr self, const request_context& ctx, const wire::claim& c) {
  auto& st = self->state;
  if (!st.members.is_up(ctx.source)) {
    return answer_error(self, ctx, error{errc::unavailable, "only an up owner may be handed key slots"});
  }
  wire::claim_reply out;
  auto now = st.ep->now();
  for (auto slot : c.slots) {
    if (slot >= key_slots) {
      return answer_error(self, ctx, error{errc::invalid_argument, "there is no key slot " + std::to_string(slot)});
    }
    if (st.recalling.contains(slot) || !st.slots.may_grant(slot, ctx.source, now) ||
        !st.dir.slot_only(slot, ctx.source)) {
      continue;
    }
    if (st.slots.home_of(slot) != ctx.source) set_home(self, slot, ctx.source);
    out.granted.push_back(slot);
  }
  if (!out.granted.empty() || c.versions) {
    // A fresh block above every version handed out so far: the keys of
    // the granted slots only ever get versions from it from now on, so
    // their versions keep growing.
    out.block_first = st.dir.next_version();
    out.block_count = master::owner_version_block;
    st.dir.skip_versions_below(out.block_first + out.block_count);
    st.journal->versions_used(st.dir.next_version());
    changed(self);
  }
  out.generation = st.slots.next_generation();
  answer(self, ctx, std::move(out));
}

void on_owner_commits(self_ptr self, const request_context& ctx, const wire::owner_commits& c) {
  auto& st = self->state;
  auto applied = st.commits.applied(ctx.source);
  if (c.first_seq == 0 || c.first_seq > applied + 1) {
    return answer_error(self, ctx, error{errc::aborted, "commits from " + std::to_string(applied + 1) +
                                                            " on are missing; send them again"});
  }
  wire::owner_commits_reply out;
  auto seq = c.first_seq;
  bool any = false;
  for (auto& e : c.entries) {
    if (seq++ <= applied) continue;  // applied already (sent again)
    any = true;
    if (st.slots.home_of(slot_of(e.key)) != ctx.source || !check_key(e.key) || e.size > master::object_size_max) {
      st.ep->log()->warn("refused a commit of owner {}: outside the slots it holds, a bad key or an oversize value", ctx.source.to_string());
      out.refused.push_back(wire::key_version{e.key, e.version});
      continue;
    }
    auto outcome = st.dir.commit_owned(e.key, e.version, e.size, ctx.source);
    if (outcome.stale && outcome.stale->version == e.version) {
      tell_drop(self, *outcome.stale);
      continue;
    }
    st.journal->object_committed(e.key, *st.dir.find_any(e.key));
    // The home dropped the version its commit replaced when it made the
    // commit (one drop request per overwrite otherwise); any other stale
    // version it is asked to drop.
    bool dropped_there = outcome.stale && outcome.stale->holder == ctx.source && outcome.stale->version == e.replaced;
    if (outcome.stale && !dropped_there) tell_drop(self, *outcome.stale);
    for (auto& s : outcome.stale_replicas) tell_drop(self, s);
  }
  if (any) {
    auto through = c.first_seq + c.entries.size() - 1;
    st.commits.set_applied(ctx.source, through);
    st.journal->owner_commits_applied(ctx.source, through);
    st.journal->versions_used(st.dir.next_version());
    changed(self);
  }
  answer(self, ctx, std::move(out));
  run_ready(self, ctx.source);
}

void forget_owner_commits(self_ptr self, node_id owner) {
  auto& st = self->state;
  for (auto slot : st.slots.release_all(owner)) st.journal->home_changed(slot, std::nullopt);
  if (st.commits.applied(owner) != 0) st.journal->owner_commits_applied(owner, 0);
  for (auto& then : st.commits.forget(owner)) {
    then(error{errc::unavailable, "the owner restarted and lost what it held"});
  }
  changed(self);
}

void expire_commit_waits(self_ptr self) {
  for (auto& then : self->state.commits.expired(self->state.ep->now())) {
    then(error{errc::timeout, "the owner's commits did not arrive before the deadline"});
  }
}

}  // namespace sluice::master_detail
