// The master actor's state and the helpers its source files share.
// Internal to actors/master: the role's interface is master.hpp.
#pragma once

#include <caf/stateful_actor.hpp>

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/master/directory.hpp"
#include "actors/master/homes.hpp"
#include "actors/master/master.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/mq_groups.hpp"
#include "actors/master/mq_log.hpp"
#include "actors/master/persistence.hpp"
#include "actors/master/pins.hpp"
#include "actors/master/registry.hpp"
#include "actors/master/repair.hpp"
#include "runtime/rng.hpp"

namespace sluice::master_detail {

/// Pending puts get this long beyond their own deadline to commit.
constexpr std::chrono::seconds pending_grace{2};
/// How long an owner has to answer an invalidation (or a barrier) before
/// it is declared down (and then its lease is waited out): as long as the
/// default heartbeat timeout, so that an owner whose path failed has found
/// another (through a relay, each failed try of one costing a heartbeat
/// deadline) before it is taken for lost.
constexpr std::chrono::seconds invalidate_timeout{3};
/// How long a drop is asked for again while the owner's route changes.
constexpr std::chrono::seconds drop_timeout{5};
/// A request to an owner whose route was lost is sent again this much
/// later, on the route its next request set (ask_member).
constexpr std::chrono::milliseconds member_route_retry{50};
/// Each try of a request to an owner waits this long at most, then goes
/// again on the owner's route of the time (ask_member).
constexpr std::chrono::milliseconds member_attempt_timeout{300};

/// What the master starts from: its durable state, read before the actor
/// runs.
struct boot_state {
  master::directory dir;
  std::vector<master::member> members;
  master::pin_table pins;
  master::homes slots;
  master::owner_commit_log commits;
  master::mq_log mq;
  master::mq_groups mq_groups;
};

/// A consumer's poll that found nothing, waiting for messages.
struct mq_parked_poll {
  request_context ctx;
  wire::mq_poll poll;
  clock_time until;                 ///< answered empty then
  std::optional<clock_time> retry;  ///< a nacked message falls due then
};

/// A produce waiting for room in a full topic (policy block).
struct mq_blocked_produce {
  request_context ctx;
  wire::mq_produce produce;
  std::vector<wire::mq_produced_one> results;  ///< of the messages appended so far
  clock_time until;
};

/// Produces waiting for room, all topics together; past it a produce to
/// a full topic is answered `overloaded` at once.
inline constexpr std::size_t mq_blocked_max = 4096;
/// Payload keys the orphan sweep looks at per tick, and remembers at most.
inline constexpr std::size_t mq_sweep_batch = 1024;
inline constexpr std::size_t mq_orphan_suspects_max = 65536;
/// Payload prefetches asked of owners and not answered yet, all owners
/// together; past it no more are asked until answers come.
inline constexpr std::size_t mq_prefetching_max = 4096;
/// Recalled payloads kept past their free (master_state::mq_recalled);
/// past it a recalled payload is not kept, and frees at once.
inline constexpr std::size_t mq_recalled_max = 65536;

/// A payload whose delivery was recalled from a member (master_mq.cpp).
struct mq_recall {
  std::int64_t until_ms = 0;  ///< wall ms: kept until then
  bool freed = false;         ///< its message went meanwhile: it goes then
};

/// Where a member reads its payloads, for prefetching them (master_mq.cpp).
struct mq_member_host {
  /// The owner its requests come through: its payload reads go there too.
  node_id owner;
  /// Per partition it holds, the first offset not yet prefetched for it.
  std::map<master::mq_partition_id, std::uint64_t> hinted;
};

struct master_state {
  std::optional<endpoint> ep;
  master_section cfg;
  master::membership members;
  master::directory dir;
  master::pin_table pins;
  /// RPC names and instances: soft state the owners send (registry.hpp).
  master::rpc_registry registry;
  /// Which owner commits the puts of which key slot.
  master::homes slots;
  /// Slots being taken back from their home now: not handed out meanwhile.
  std::set<key_slot> recalling;
  master::owner_commit_log commits;
  std::optional<master::persistence> journal;
  /// Sends that depend on changes not yet durable, in order; they go out
  /// after the next successful sync.
  std::vector<std::function<void()>> held;
  bool sync_queued = false;
  /// The store refused the last sync; said once per streak.
  bool sync_warned = false;
  std::optional<rng> random;
  /// Wall time in ms since the Unix epoch (TTLs are kept in it).
  std::function<std::int64_t()> wall_ms;
  std::function<void(const std::string&)> on_forgotten;
  std::function<void(const std::string&)> on_copy_evicted;
  std::function<void(bool)> on_repair;
  std::function<void(node_id, const std::string&)> on_member_down;
  /// Expired keys being taken out (waiting for their holders).
  std::set<std::string> expiring;
  /// Work waiting for an owner's lease to run out, by id.
  std::map<std::uint64_t, std::function<void()>> waiting;
  std::uint64_t next_waiting = 1;
  // MQ (master_mq.cpp): the logs and groups, and the requests waiting.
  master::mq_log mq;
  master::mq_groups mq_groups;
  /// The planted bug of master_deps, set on every mq_groups made.
  bool plant_mq_forget_acks_on_move = false;
  bool plant_mq_keep_consumed_payloads = false;
  bool plant_mq_free_recalled_at_once = false;
  bool plant_no_repair = false;
  /// One per member at most (a new poll answers the one before).
  std::map<master::mq_member_id, mq_parked_poll> mq_polls;
  /// By topic, oldest first; mq_blocked_max in all.
  std::map<std::string, std::deque<mq_blocked_produce>, std::less<>> mq_blocked;
  std::size_t mq_blocked_count = 0;
  /// The lease each member asked for when it joined, renewed by its polls.
  std::map<master::mq_member_id, std::int64_t> mq_lease_ms;
  /// Each member's owner and how far its payloads were prefetched; one
  /// entry per member in mq_lease_ms at most.
  std::map<master::mq_member_id, mq_member_host> mq_hosts;
  /// Prefetches asked and not answered: (owner, payload key);
  /// mq_prefetching_max at most.
  std::set<std::pair<node_id, std::string>> mq_prefetching;
  /// Payloads of deliveries recalled by a move, by key: the member they
  /// were recalled from may still be reading them, so they are freed no
  /// sooner than master::mq_recall_grace_ms after it; mq_recalled_max at
  /// most.
  std::map<std::string, mq_recall, std::less<>> mq_recalled;
  /// When the MQ timer fires next (none armed: nothing waits).
  std::optional<clock_time> mq_timer_at;
  /// The orphan sweep (master_mq.cpp): where it goes on in `~mq/`, and
  /// each unnamed payload it saw with when it first saw it
  /// (mq_orphan_suspects_max at most).
  std::string mq_sweep_after;
  std::int64_t mq_swept_ms = 0;
  std::map<std::string, std::int64_t, std::less<>> mq_orphan_suspects;
  // Repair (master_repair.cpp): the keys short of copies, the owners
  // whose copies no longer count as of the last full count, and the puts
  // with copies to look at once their own copies had time to be made.
  master::repair_queue repair;
  std::set<node_id> repair_lost;
  bool repair_count_due = true;
  std::deque<std::pair<clock_time, std::string>> repair_checks;
  /// The keys of repair_checks, with when their put's copies are due:
  /// until then, or until every copy registered, counts leave them alone
  /// (their copies are being made).
  std::map<std::string, clock_time, std::less<>> repair_settling;
  static inline const char* name = "sluice.master";
};

using self_ptr = master_actor::stateful_pointer<master_state>;
/// Work that goes on once something it waited for happened (or failed).
using continuation = std::function<void(result<void>)>;

std::string describe_owner(const master::member& m);

// --- durability (master.cpp) ---

/// Call after changing durable state.
void changed(self_ptr self);
/// Runs `send` now, or after the next sync when changes are waiting.
void when_durable(self_ptr self, std::function<void()> send);
void answer(self_ptr self, const request_context& ctx, wire::body body);
void answer_error(self_ptr self, const request_context& ctx, error err);
/// Tells a holder to free a version once the change that made it
/// obsolete is durable.
void tell_drop(self_ptr self, const master::stale_version& s);

// --- membership (master.cpp) ---

/// Sends owner `m` a request the way its own requests last came: on its
/// own link, or through the owner that relayed them. When that route is
/// lost (no route, its link lost, a relay that cannot pass it on, or no
/// answer within 300 ms), the request goes again 50 ms later, on
/// whatever route the owner's next request set, until `deadline`. So it may arrive twice: only idempotent
/// requests go this way (invalidations, barriers, drops, repair copies).
void ask_member(self_ptr self, const master::member& m, wire::body body, clock_time deadline,
                reply_handler on_reply);

/// Runs `then` once the lease `holder` may still hold has surely run out:
/// a lease starts before the heartbeat that renewed it reached us.
void after_lease(self_ptr self, node_id holder, std::function<void()> then);

// --- the object lifecycle (master_objects.cpp) ---

/// A key left the directory: its pins go with it.
void key_gone(self_ptr self, const std::string& key);
/// The master took `key` out on its own (not at a client's request).
void forgotten(self_ptr self, const std::string& key);
void on_place(self_ptr self, const request_context& ctx, const wire::place& p);
void on_commit(self_ptr self, const request_context& ctx, const wire::commit& c);
/// `settled`: the key's slot was settled for the requester already.
void on_locate(self_ptr self, const request_context& ctx, const wire::locate& l, bool settled = false);
void on_remove(self_ptr self, const request_context& ctx, const wire::remove_key& r);
void on_evict(self_ptr self, const request_context& ctx, const wire::evict& e);
/// Takes out `key` at `version`, whose TTL ran out.
void expire_key(self_ptr self, const std::string& key, std::uint64_t version);
/// The pins of `keys` changed: journals them.
void pins_changed(self_ptr self, const std::vector<std::string>& keys);
void on_pin(self_ptr self, const request_context& ctx, const wire::pin& p, bool settled = false);
void on_inventory(self_ptr self, const request_context& ctx, const wire::inventory& inv);
void on_add_replica(self_ptr self, const request_context& ctx, const wire::add_replica& r);

// --- repair (master_repair.cpp) ---

/// Puts whose copies are looked at after their deadline, at most; beyond
/// it the next tick counts every object instead.
inline constexpr std::size_t repair_checks_max = 65536;

/// Counts, queues and starts repair copies: run on every tick.
void repair_tick(self_ptr self);
/// `key`'s copies may have changed: counted again, queued or dropped.
void repair_check(self_ptr self, const std::string& key);
/// Every object is counted again on the next tick.
void repair_recount(self_ptr self);
/// A put of `key` with more than one copy committed; its own copies are
/// made by `deadline`, and then it is looked at.
void repair_after_put(self_ptr self, const std::string& key, clock_time deadline);

// --- MQ (master_mq.cpp) ---

void on_mq(self_ptr self, const request_context& ctx, const wire::mq& m);
/// Leases, ack deadlines and retention: run on every tick.
void mq_tick(self_ptr self);
/// The MQ state was reloaded from the store: what waited is answered
/// `unavailable`.
void mq_reloaded(self_ptr self);

// --- slots handed to owners (master_homes.cpp) ---

/// Runs `then` once no owner but `requester` holds commits of keys in
/// `key`'s slot that the master has not applied: at once when the slot is
/// no one's or `requester`'s; otherwise once its home flushed them — and,
/// with `recall`, gave the slot back. Fails with `unavailable` when the
/// home cannot be reached.
void with_slot_settled(self_ptr self, const std::string& key, node_id requester, bool recall,
                       clock_time deadline, continuation then);
/// The same for every slot: every home but `requester` flushes.
void with_all_settled(self_ptr self, node_id requester, clock_time deadline, continuation then);
/// Has `holder` stop serving `key` from its fast index and give its slot
/// up, and waits until the commits it flushed with its answer are
/// applied; takes the slot back (with a cooldown when `for_other`).
void invalidate_at(self_ptr self, const std::string& key, node_id holder, bool for_other, clock_time deadline,
                   continuation then);
/// The requester, the home of the key's slot, sends a put the master
/// places: the slot is the master's again (the owner gave it up first).
void home_gives_up(self_ptr self, const std::string& key, node_id requester);
void on_claim(self_ptr self, const request_context& ctx, const wire::claim& c);
void on_owner_commits(self_ptr self, const request_context& ctx, const wire::owner_commits& c);
/// `owner` lost what it held: its slots are the master's again and
/// nothing waits for its commits any more.
void forget_owner_commits(self_ptr self, node_id owner);
/// Fails waits for owners' commits whose deadline passed.
void expire_commit_waits(self_ptr self);

}  // namespace sluice::master_detail
