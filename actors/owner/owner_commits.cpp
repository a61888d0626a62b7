// The owner's side of owner-committed puts: sending the master the puts
// the fast path committed, asking for the key slots that let it, and
// answering the master's barriers and invalidations with how far the
// reports go (see fast_path.hpp and actors/master/homes.hpp).
//
// Invariants (asserted):
//   1. one claim at a time: claim_asked and claim_voided are empty unless
//      claim_in_flight, claim_voided lies within claim_asked, and an
//      answer comes only for the claim in flight;
//   2. a claim asks for at most claim_slots_max slots, each once;
//   3. puts wait only for a claim in flight, at most claim_waiters_max
//      of them;
//   4. a message of reports carries at most commits_per_message of them,
//      numbered one after the other (the master refuses a gap);
//   5. announced_through only grows, and never passes what the fast
//      index has sent: the policy hears only of reports that exist.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {
namespace {

/// Sends the unsent commits after `delay` (once, however often asked).
void send_commits_later(self_ptr self, clock_duration delay) {
  auto& st = self->state;
  if (st.report_armed) return;
  st.report_armed = true;
  delay = timer_delay(st.ep->faults(), delay);
  if (delay == clock_duration::zero()) return self->send(self, report_atom::value);
  self->delayed_send(self, delay, report_atom::value);
}

void send_claim(self_ptr self);

/// The master answered (or not) the reports through `last` sent in
/// registration `session`.
void on_commits_reply(self_ptr self, std::uint64_t session, std::uint64_t last, result<wire::message>& reply) {
  auto& st = self->state;
  auto done = reply_body<wire::owner_commits_reply>(reply);
  if (!done) {
    // Lost, refused for a gap, or the link went: everything not
    // acknowledged goes again (the master skips what it has).
    if (st.master_session == session && st.registered) {
      st.index->resend();
      send_commits_later(self, commits_retry);
    }
    return;
  }
  st.index->acknowledged(last);
  for (auto& r : done->refused) {
    st.index->erase_version(r.key, r.version);
    if (st.store->drop(r.key, r.version)) gone(self, r.key, r.version);
  }
}

void claim_answered(self_ptr self, const std::vector<key_slot>& asked, result<wire::message>& reply) {
  auto& st = self->state;
  SLUICE_ASSERT(st.claim_in_flight);
  SLUICE_ASSERT(st.claim_asked.size() == asked.size());
  SLUICE_ASSERT(st.claim_voided.size() <= st.claim_asked.size());
  st.claim_in_flight = false;
  st.claim_asked.clear();
  auto voided = std::exchange(st.claim_voided, {});
  auto granted = reply_body<wire::claim_reply>(reply);
  auto retry_at = st.ep->now() + claim_retry;
  if (granted) {
    std::erase_if(granted->granted, [&voided](key_slot slot) { return voided.contains(slot); });
    st.index->grant(granted->granted, granted->generation, granted->block_first, granted->block_count);
    for (auto slot : asked) {
      if (std::find(granted->granted.begin(), granted->granted.end(), slot) == granted->granted.end()) {
        st.claim_refused[slot] = retry_at;
      }
    }
  } else {
    for (auto slot : asked) st.claim_refused[slot] = retry_at;
  }
  auto waiters = std::exchange(st.claim_waiters, {});
  for (auto& then : waiters) then();
  send_claim(self);
}

void send_claim(self_ptr self) {
  auto& st = self->state;
  if (st.claim_in_flight || !st.registered) return;
  bool low = st.index->homed_count() > 0 && st.index->versions_left() < versions_low;
  if (st.claim_wanted.empty() && !low) return;
  SLUICE_ASSERT(st.claim_asked.empty());
  SLUICE_ASSERT(st.claim_voided.empty());
  wire::claim c;
  while (!st.claim_wanted.empty() && c.slots.size() < claim_slots_max) {
    c.slots.push_back(*st.claim_wanted.begin());
    st.claim_wanted.erase(st.claim_wanted.begin());
  }
  c.versions = low;
  SLUICE_ASSERT(c.slots.size() <= claim_slots_max);
  st.claim_in_flight = true;
  st.claim_asked.insert(c.slots.begin(), c.slots.end());
  SLUICE_ASSERT(st.claim_asked.size() == c.slots.size());
  auto asked = c.slots;
  ask_master(self, std::move(c), st.ep->now() + control_timeout,
             [self, asked](result<wire::message> reply) { claim_answered(self, asked, reply); });
}

}  // namespace

void send_commits(self_ptr self) {
  auto& st = self->state;
  if (!st.registered) return;  // registering sends them again
  auto session = st.master_session;
  // Taken first, sent after: a send that fails at once marks everything
  // for sending again, which must wait for the next round.
  std::vector<std::vector<fast_index::report>> batches;
  for (auto batch = st.index->take_unsent(commits_per_message); !batch.empty();
       batch = st.index->take_unsent(commits_per_message)) {
    batches.push_back(std::move(batch));
  }
  for (auto& batch : batches) {
    SLUICE_ASSERT(!batch.empty());
    SLUICE_ASSERT(batch.size() <= commits_per_message);
    SLUICE_ASSERT(batch.back().seq - batch.front().seq + 1 == batch.size());
    wire::owner_commits msg;
    msg.first_seq = batch.front().seq;
    for (auto& r : batch) {
      // The eviction policy hears of each value once, however often its
      // report is sent.
      if (r.seq > st.announced_through) evictable(self, r.commit.key, r.commit.version, r.commit.size);
      msg.entries.push_back(std::move(r.commit));
    }
    auto last = batch.back().seq;
    st.announced_through = std::max(st.announced_through, last);
    SLUICE_ASSERT(st.announced_through <= st.index->sent_through());
    send_to_master(self, std::move(msg), st.ep->now() + commits_timeout,
                   [self, session, last](result<wire::message> reply) { on_commits_reply(self, session, last, reply); });
  }
  if (st.index->versions_left() < versions_low) send_claim(self);
}

void commits_waiting(self_ptr self) {
  auto& st = self->state;
  auto delay = std::chrono::duration_cast<clock_duration>(st.cfg.commit_report_delay);
  if (delay == clock_duration::zero() && !SLUICE_BUGGIFY(st.ep->faults())) return send_commits(self);
  // What comes meanwhile goes into the same message.
  send_commits_later(self, delay);
}

void want_slot(self_ptr self, const std::string& key) {
  auto& st = self->state;
  if (!st.cfg.fast_puts) return;
  auto slot = slot_of(key);
  if (st.index->homed(slot)) return;
  if (auto it = st.claim_refused.find(slot); it != st.claim_refused.end()) {
    if (it->second > st.ep->now()) return;
    st.claim_refused.erase(it);
  }
  st.claim_wanted.insert(slot);
  send_claim(self);
}

bool commit_here(self_ptr self, const request_context& ctx, const std::string& key, const shared_bytes& value) {
  auto& st = self->state;
  auto done = st.index->try_put(key, value, *st.store, st.ep->now());
  if (!done) return false;
  if (st.index->notify_due()) commits_waiting(self);
  st.ep->reply(ctx, wire::kv_put_reply{done->version});
  return true;
}

bool claiming(self_ptr self, const std::string& key) {
  auto& st = self->state;
  return st.claim_in_flight && st.claim_asked.contains(slot_of(key)) &&
         st.claim_waiters.size() < claim_waiters_max;
}

void after_claim(self_ptr self, std::function<void()> then) {
  auto& st = self->state;
  // Callers ask claiming() first.
  SLUICE_ASSERT(st.claim_in_flight);
  SLUICE_ASSERT(st.claim_waiters.size() < claim_waiters_max);
  st.claim_waiters.push_back(std::move(then));
}

void leave_slot(self_ptr self, const std::string& key) {
  auto& st = self->state;
  auto slot = slot_of(key);
  if (st.index->homed(slot)) st.index->give_up(slot, 0);
  if (st.claim_asked.contains(slot)) st.claim_voided.insert(slot);
  st.claim_wanted.erase(slot);
  SLUICE_ASSERT(st.claim_voided.size() <= st.claim_asked.size());
}

void answer_flushed(self_ptr self, const request_context& ctx) {
  auto& st = self->state;
  send_commits(self);
  st.ep->reply(ctx, wire::flushed{st.index->sent_through()});
}

}  // namespace sluice::owner_detail
