// Eviction on an owner. The owner knows what the master cannot: how full
// its pool really is, which values were read lately (its fast index
// serves reads the master never sees), and which versions readers still
// hold. So the owner chooses what to evict, and the master — which knows
// pins and which version is current — grants each eviction or refuses it.
//
// A run starts when a stored value lifts the pool above its high mark, or
// when a put finds no room; it takes candidates from the policy, least
// valuable first, and evicts until the pool is at its low mark (or the
// room a waiting put needs is free), or nothing more may go. A candidate
// is passed over while a reader holds its bytes (evicting would free
// nothing) and given a second chance when the fast index served it since
// it was last looked at.
//
// Invariants (asserted):
//   1. runs happen only on an owner with a policy, one at a time: a round
//      runs only while `evicting`, and a run ends once;
//   2. whoever waits for a run waits for one going on: evict_waiters is
//      empty unless `evicting`;
//   3. a run's target is at most the store's capacity;
//   4. each eviction a round asks the master for is answered once: the
//      round's count of answers to come never goes below 0, and the next
//      round starts when it reaches 0;
//   5. a round that may look at candidates gets some from the policy, so
//      the bound on candidates looked at ends every run.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {
namespace {

/// Candidates asked of the master at once.
constexpr std::size_t evict_batch = 32;
/// How long the master has to answer one eviction.
constexpr std::chrono::seconds evict_timeout{2};

std::uint64_t mark(const owner_state& st, std::uint32_t percent) {
  return st.store->capacity_bytes() / 100 * percent;
}

void finish_run(self_ptr self) {
  auto& st = self->state;
  SLUICE_ASSERT(st.evicting);
  st.evicting = false;
  auto waiters = std::exchange(st.evict_waiters, {});
  for (auto& then : waiters) then();
}

void evict_round(self_ptr self);

void start_run(self_ptr self, std::uint64_t target) {
  auto& st = self->state;
  SLUICE_ASSERT(st.policy != nullptr);
  SLUICE_ASSERT(target <= st.store->capacity_bytes());
  if (st.evicting) {
    st.evict_target = std::min(st.evict_target, target);
    return;
  }
  st.evicting = true;
  st.evict_target = target;
  st.evict_examined = 0;
  evict_round(self);
}

/// Whether `c` may be evicted now; otherwise the policy is told it is in
/// use, so the next candidates come up.
bool may_go(self_ptr self, const eviction_candidate& c) {
  auto& st = self->state;
  if (st.index->take_touched(c.key)) {
    st.policy->touch(c.key);
    return false;
  }
  auto refs = st.store->references(c.key, c.version);
  if (refs == 0) {
    st.policy->forget(c.key, c.version);  // no longer held: nothing to evict
    return false;
  }
  long expected = 1 + (st.index->holds(c.key, c.version) ? 1 : 0);
  if (refs > expected) {
    st.policy->touch(c.key);  // a reader holds it
    return false;
  }
  return true;
}

void evict_round(self_ptr self) {
  auto& st = self->state;
  SLUICE_ASSERT(st.evicting);
  SLUICE_ASSERT(st.policy != nullptr);
  std::vector<eviction_candidate> chosen;
  // Rounds where everything looked at was in use go on with what comes
  // next, until the bound on candidates looked at ends the run.
  while (chosen.empty()) {
    auto used_now = st.store->used_bytes();
    if (used_now <= st.evict_target || st.policy->size() == 0 ||
        st.evict_examined > 2 * st.policy->size() + evict_batch) {
      return finish_run(self);
    }
    auto need = used_now - st.evict_target;
    std::uint64_t freed = 0;
    auto batch = st.policy->candidates(evict_batch);
    SLUICE_ASSERT(!batch.empty());
    for (auto& c : batch) {
      ++st.evict_examined;
      if (!may_go(self, c)) continue;
      chosen.push_back(c);
      freed += c.size;
      if (freed >= need) break;
    }
  }
  auto outstanding = std::make_shared<std::size_t>(chosen.size());
  auto deadline = st.ep->now() + evict_timeout;
  for (auto& c : chosen) {
    // From now on gets of the key go through the master, which decides.
    st.index->erase_version(c.key, c.version);
    st.evicts_asked.emplace(c.key, c.version);
    ask_master(self, wire::evict{c.key, c.version}, deadline,
               [self, c, outstanding](result<wire::message> reply) {
                 auto& st = self->state;
                 st.evicts_asked.erase({c.key, c.version});
                 auto granted = reply_body<wire::evict_reply>(reply);
                 if (granted && granted->evicted) {
                   st.store->drop(c.key, c.version);
                   st.policy->forget(c.key, c.version);
                   ++st.evictions;
                 } else if (st.policy) {
                   st.policy->touch(c.key);  // pinned, or moved on: keep it for now
                 }
                 SLUICE_ASSERT(*outstanding > 0);
                 if (--*outstanding == 0) evict_round(self);
               });
  }
}

}  // namespace

void evictable(self_ptr self, const std::string& key, std::uint64_t version, std::uint64_t size) {
  auto& st = self->state;
  if (!st.policy) return;
  st.policy->admit(key, version, size);
  if (st.store->used_bytes() > mark(st, st.cfg.evict_high_percent)) {
    start_run(self, mark(st, st.cfg.evict_low_percent));
  }
}

void used(self_ptr self, const std::string& key) {
  if (auto& policy = self->state.policy) policy->touch(key);
}

void gone(self_ptr self, const std::string& key, std::uint64_t version) {
  if (auto& policy = self->state.policy) policy->forget(key, version);
}

void make_room(self_ptr self, std::uint64_t size, std::function<void()> then) {
  auto& st = self->state;
  if (!st.policy || st.policy->size() == 0) return then();
  auto low = mark(st, st.cfg.evict_low_percent);
  auto capacity = st.store->capacity_bytes();
  auto target = size >= capacity ? 0 : std::min(low, capacity - size);
  st.evict_waiters.push_back(std::move(then));
  start_run(self, target);
  SLUICE_ASSERT(st.evicting || st.evict_waiters.empty());
}

}  // namespace sluice::owner_detail
