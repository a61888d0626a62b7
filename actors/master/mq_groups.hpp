// mq_groups: the master's MQ consumer groups — members and their leases,
// which member holds which partition, and per (group, partition) what was
// delivered, acked, nacked and committed. Pure bookkeeping like the
// directory: no I/O, no clock (callers pass `now_ms`, wall milliseconds),
// no timers (poll says when to wake a member; the caller keeps the
// timers), ordered containers only. The log itself is mq_log's; calls that
// need it take it as an argument and only read it.
//
// A member is a client session (its node id) holding a lease until
// `until_ms`. The partitions of a group's topics are spread over its
// members in order: the i-th partition (by topic, then partition) goes to
// the (i mod n)-th member (by session id). It is recomputed on every join,
// leave and lapse, and whenever a partition changes hands its generation
// grows; an ack must carry the generation of its delivery.
//
// Invariants, per (group, partition):
//  1. at most one member holds it, and it is a member of the group;
//  2. every offset in [committed, next) is exactly one of acked, in
//     flight (to the holder, under the current generation) or waiting to
//     be redelivered; every offset below committed is acked; offsets at
//     and after next were never delivered since the last seek;
//  3. next - committed <= mq_window_offsets_max;
//  4. a member has at most its group's prefetch deliveries in flight;
//  5. an acked offset is never delivered again, unless a seek moved the
//     cursor back over it.
//
// Delivery is at-least-once: a message goes out again after a nack, when
// its ack deadline passes, or when its partition moves (its holder left
// or lapsed). A delivery that ends unacked — by its deadline or a nack —
// after max_deliveries deliveries is dead-lettered instead: it counts as
// acked and is handed to the caller (to append to a dead-letter topic).
//
// Persisted (see drain_changes): groups and, per (group, partition), the
// committed offset and generation. Members, in-flight deliveries and acks
// above the committed offset are not: after a restart members join again
// and every unacked message is delivered again.
//
// Thread safety: none; one actor owns it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "actors/master/mq_log.hpp"
#include "sluice/result.hpp"

namespace sluice::master {

// Limits; past one a call fails with `overloaded` (a table is full) or
// `invalid_argument` (the request is out of range).

/// Consumer groups the master keeps: a group costs its partitions'
/// state, up to mq_group_topics_max * mq_partitions_max of them.
inline constexpr std::size_t mq_groups_max = 1024;
/// Members of one group: as many as a topic may have partitions, since a
/// member beyond the partition count would sit idle.
inline constexpr std::size_t mq_group_members_max = mq_partitions_max;
/// Topics one group subscribes to.
inline constexpr std::size_t mq_group_topics_max = 64;
/// The largest prefetch a group may set: deliveries one member holds in
/// flight at once.
inline constexpr std::uint32_t mq_prefetch_max = 1024;
/// How far past its committed offset a (group, partition) delivers: a
/// message stuck unacked stops the partition this far ahead, which bounds
/// the acks and redeliveries kept above the committed offset.
inline constexpr std::uint64_t mq_window_offsets_max = 65536;
/// Messages one poll may ask for.
inline constexpr std::size_t mq_poll_messages_max = 1024;
/// The largest max_deliveries a group may set.
inline constexpr std::uint32_t mq_deliveries_max = 1000;
/// The longest ack timeout and nack delay: a day.
inline constexpr std::int64_t mq_delay_ms_max = 24 * 3600 * 1000;
/// Change records held between drains; as for mq_changes_max, the
/// master drains after every operation, so hitting it is a bug.
inline constexpr std::size_t mq_group_changes_max = std::size_t{1} << 22;

/// Where a new group starts reading a partition. Persisted: never renumber.
enum class mq_start : std::uint8_t {
  earliest = 0,  ///< the log start: what was produced before the group existed is delivered too
  latest = 1,    ///< the log end at the group's first look at the partition
};

struct mq_group_config {
  std::vector<std::string> topics;     ///< sorted, distinct, 1..mq_group_topics_max
  std::int64_t ack_timeout_ms = 30'000;  ///< 1..mq_delay_ms_max
  std::uint32_t max_deliveries = 5;    ///< 1..mq_deliveries_max
  std::uint32_t prefetch = 16;         ///< 1..mq_prefetch_max
  mq_start start = mq_start::earliest;
  friend bool operator==(const mq_group_config&, const mq_group_config&) = default;
};

/// Whether `config` is in range; `invalid_argument` says which field not.
result<void> check_group_config(const mq_group_config& config);

/// One message handed to a member.
struct mq_delivery {
  mq_partition_id partition;
  std::uint64_t offset = 0;
  std::string payload;  ///< the payload's object key
  std::uint64_t size_bytes = 0;
  std::uint32_t delivery_count = 0;  ///< 1 the first time
  std::uint64_t generation = 0;      ///< to carry in its ack
  std::int64_t ack_deadline_ms = 0;
  std::string message_id{};  ///< the producer's, or a dead-lettered message's origin; empty: none
};

/// A message a member is likely to be handed soon (mq_groups::upcoming).
struct mq_upcoming {
  mq_partition_id partition;
  std::uint64_t offset = 0;
  std::string payload;  ///< the payload's object key
  std::uint64_t size_bytes = 0;
};

/// What a member that got nothing should wait for.
enum class mq_wait : std::uint8_t {
  none,           ///< deliveries were returned
  log_grows,      ///< parked: wake(topic, partition) names it when one of its partitions grows
  prefetch_full,  ///< its prefetch is in flight: poll again after acking
};

struct mq_polled {
  std::vector<mq_delivery> deliveries;
  mq_wait wait = mq_wait::none;
  /// When nothing came: the earliest time a nacked message of the
  /// member's partitions becomes due (a timer for the caller).
  std::optional<std::int64_t> retry_at_ms;
};

/// How long the payload of a recalled delivery (mq_move::recalled) stays
/// readable after the move, even if its message is consumed meanwhile:
/// the member it was recalled from may still be reading it, under a
/// deadline of its own (the library's default is 5 s).
inline constexpr std::int64_t mq_recall_grace_ms = 10'000;

/// A partition that changed hands; its generation is the new one.
struct mq_move {
  std::string group;
  mq_partition_id partition;
  std::optional<std::uint64_t> from;
  std::optional<std::uint64_t> to;  ///< to wake: it has a partition to poll
  std::uint64_t generation = 0;
  /// Offsets that were in flight to `from`, ascending: they go out again,
  /// while `from` may still be reading their payloads.
  std::vector<std::uint64_t> recalled{};
};

/// (group, session): a member.
using mq_member_id = std::pair<std::string, std::uint64_t>;

struct mq_lapsed {
  std::vector<mq_member_id> members;  ///< whose leases ran out, removed
  std::vector<mq_move> moves;
};

/// A message that ran out of deliveries. It counts as acked.
struct mq_dead_letter {
  std::string group;
  mq_partition_id partition;
  mq_shell shell;
  std::uint32_t delivery_count = 0;
};

struct mq_expired_deliveries {
  std::vector<mq_dead_letter> dead;
  /// Parked members that have a redelivery due now, unparked: wake them.
  std::vector<mq_member_id> wake;
};

struct mq_lag {
  std::uint64_t messages = 0;  ///< held in the log and not acked by the group
  std::uint64_t bytes = 0;
};

/// A (group, partition) as tests and operators see it.
struct mq_partition_view {
  std::optional<std::uint64_t> member;
  std::uint64_t generation = 0;
  std::uint64_t committed = 0;
  std::uint64_t next = 0;
  std::size_t acked = 0;      ///< above committed
  std::size_t in_flight = 0;
  std::size_t redeliver = 0;  ///< waiting to go out again
  friend bool operator==(const mq_partition_view&, const mq_partition_view&) = default;
};

// Change records, in order (an offset record is updated in place when it
// changes again before the drain).
struct mq_group_created {
  std::string group;
  mq_group_config config;
};
/// The group goes, with every offset of it.
struct mq_group_deleted {
  std::string group;
};
struct mq_offset_changed {
  std::string group;
  mq_partition_id partition;
  std::uint64_t committed = 0;
  std::uint64_t generation = 0;
};
struct mq_offset_removed {
  std::string group;
  mq_partition_id partition;
};
using mq_group_change = std::variant<mq_group_created, mq_group_deleted, mq_offset_changed, mq_offset_removed>;

class mq_groups {
 public:
  /// `session` joins `group` (created with `config` if new) with a lease
  /// until `until_ms`; joining again extends the lease. Fails with
  /// `conflict` when the group exists with another config, `not_found`
  /// when a topic of a new group does not exist, `invalid_argument` for a
  /// bad name or config or a lease already over, `overloaded` past
  /// mq_groups_max or mq_group_members_max.
  result<std::vector<mq_move>> join(const std::string& group, std::uint64_t session, const mq_group_config& config,
                                    std::int64_t until_ms, std::int64_t now_ms, const mq_log& log);
  /// Extends the lease (never shortens it); `not_found` when not a member.
  result<void> heartbeat(const std::string& group, std::uint64_t session, std::int64_t until_ms);
  /// `session` leaves; its partitions move and its unacked deliveries go
  /// out again. `not_found` when not a member.
  result<std::vector<mq_move>> leave(const std::string& group, std::uint64_t session, const mq_log& log);
  /// Members whose lease ended by `now_ms` leave.
  mq_lapsed expire(std::int64_t now_ms, const mq_log& log);
  /// Deletes the group and its offsets; `not_found` when absent.
  result<void> remove(const std::string& group);
  /// Call after a topic was created or deleted: partitions that appeared
  /// are added to the groups that name their topic, those that went are
  /// dropped, and assignments recomputed. REQUIRES: called after a delete
  /// before the topic is created again.
  std::vector<mq_move> topics_changed(const mq_log& log);

  /// Deliveries for `session` from its partitions: due redeliveries
  /// first, then new messages, each partition in offset order, at most
  /// `max_messages` (1..mq_poll_messages_max), `max_bytes` (0: any; one
  /// message larger than it still goes out alone) and the group's prefetch
  /// less what the member holds. `not_found` when not a live member.
  ///
  /// A member that counts its polls (`poll_seq` 1, 2, ...; 0: it does not)
  /// names the last one whose answer reached it (`answered_seq`): what the
  /// polls in between delivered never arrived, and goes out again at once,
  /// as if it had not gone out (its delivery count is not raised).
  result<mq_polled> poll(const std::string& group, std::uint64_t session, std::size_t max_messages,
                         std::uint64_t max_bytes, std::int64_t now_ms, const mq_log& log,
                         std::uint64_t poll_seq = 0, std::uint64_t answered_seq = 0);
  /// The new messages `session` would be handed next, for fetching their
  /// payloads ahead of its polls: the redeliveries due on its partitions
  /// and then the offsets from each partition's cursor on, in the order a
  /// poll takes them, fill one prefetch window past the deliveries it
  /// holds; those of the new ones at or past `from[partition]` (0 when
  /// absent) are returned. Changes nothing; empty when not a member.
  std::vector<mq_upcoming> upcoming(const std::string& group, std::uint64_t session, const mq_log& log,
                                    const std::map<mq_partition_id, std::uint64_t>& from) const;
  /// The members that hold `topic`'s `partition`: one per group reading
  /// it that has a member holding it.
  std::vector<mq_member_id> holders(const std::string& topic, std::uint32_t partition) const;
  /// `topic`'s `partition` grew (or was sought): the parked members
  /// holding it, unparked, to poll again.
  std::vector<mq_member_id> wake(const std::string& topic, std::uint32_t partition);

  /// Acks one delivery. `conflict` when the partition is not `session`'s
  /// or `generation` is stale; `not_found` when the offset is not in flight
  /// to it. A refused ack changes nothing.
  result<void> ack(const std::string& group, std::uint64_t session, const mq_partition_id& partition,
                   std::uint64_t offset, std::uint64_t generation);
  /// Acks every delivery in flight to `session` on the partition at or
  /// below `offset`; returns how many. `conflict` when the partition is
  /// not `session`'s, `not_found` when none was in flight.
  /// With `answered_seq` (not 0), only what polls up to that one
  /// delivered: never a delivery whose answer the member did not get.
  result<std::uint64_t> ack_upto(const std::string& group, std::uint64_t session, const mq_partition_id& partition,
                                 std::uint64_t offset, std::uint64_t answered_seq = 0);
  /// Gives a delivery back, to go out again at `now_ms + delay_ms`
  /// (delay 0..mq_delay_ms_max), or dead-letters it when it ran out of
  /// deliveries. Refused as ack() is.
  result<std::optional<mq_dead_letter>> nack(const std::string& group, std::uint64_t session,
                                             const mq_partition_id& partition, std::uint64_t offset,
                                             std::uint64_t generation, std::int64_t delay_ms, std::int64_t now_ms,
                                             const mq_log& log);
  /// Deliveries whose ack deadline passed by `now_ms` go out again, or
  /// are dead-lettered when they ran out of deliveries.
  mq_expired_deliveries expire_deliveries(std::int64_t now_ms, const mq_log& log);

  /// Moves the group's cursor on the partition to `offset` (log start ..
  /// log end, else `invalid_argument`): it is delivered next, and what lies
  /// below counts as acked. Deliveries in flight are forgotten (their acks
  /// are refused with `not_found`). Wake the holder with wake().
  result<void> seek(const std::string& group, const mq_partition_id& partition, std::uint64_t offset,
                    const mq_log& log);
  /// seek() to the first offset appended at or after `time_ms`.
  result<void> seek_time(const std::string& group, const mq_partition_id& partition, std::int64_t time_ms,
                         const mq_log& log);

  /// What the log holds that the group has not acked.
  result<mq_lag> lag(const std::string& group, const mq_partition_id& partition, const mq_log& log) const;
  /// Per partition of a topic some group reads, the lowest committed
  /// offset of those groups: the consumed_upto of mq_log::prune.
  std::map<mq_partition_id, std::uint64_t> consumed_upto(const mq_log& log) const;

  std::vector<std::string> list() const;
  const mq_group_config* config_of(const std::string& group) const;
  /// The partitions `session` holds, in order (empty when not a member).
  std::vector<mq_partition_id> assigned(const std::string& group, std::uint64_t session) const;
  result<mq_partition_view> view(const std::string& group, const mq_partition_id& partition) const;
  /// Checks invariants 1-4 everywhere (stops the process when broken).
  void check_invariants() const;

  /// A planted bug, for the simulator's tests of its own checks only:
  /// when a partition moves, the acks above its committed offset are
  /// forgotten and those messages go out again (breaks invariant 5).
  void plant_forget_acks_on_move() noexcept { plant_forget_acks_ = true; }

  /// The changes since the last drain, oldest first; clears them.
  std::vector<mq_group_change> drain_changes();
  // Restore from durable records into a fresh table: groups first, then
  // their offsets. `invalid_argument` on records that break an invariant.
  // Restoring records no changes.
  result<void> restore_group(const std::string& group, const mq_group_config& config);
  result<void> restore_offset(const std::string& group, const mq_partition_id& partition, std::uint64_t committed,
                              std::uint64_t generation);

 private:
  struct flight {
    std::uint64_t member = 0;
    std::uint64_t generation = 0;
    std::int64_t deadline_ms = 0;
    std::uint32_t deliveries = 0;
    std::uint64_t poll_seq = 0;  ///< the member's poll that delivered it (0: not counted)
  };
  struct redelivery {
    std::int64_t available_ms = 0;
    std::uint32_t deliveries = 0;  ///< so far
  };
  struct partition_state {
    std::optional<std::uint64_t> member;
    std::uint64_t generation = 0;
    std::uint64_t committed = 0;
    std::uint64_t next = 0;
    std::set<std::uint64_t> acked;  ///< above committed
    std::map<std::uint64_t, flight> flying;
    std::map<std::uint64_t, redelivery> redeliver;
  };
  struct member_state {
    std::int64_t until_ms = 0;
    std::uint32_t in_flight = 0;
    bool parked = false;
    std::uint64_t polls = 0;  ///< rotates the partition a poll starts at
    std::set<mq_partition_id> partitions;
  };
  struct group_state {
    mq_group_config config;
    std::map<std::uint64_t, member_state> members;
    std::map<mq_partition_id, partition_state> partitions;
  };
  using group_map = std::map<std::string, group_state, std::less<>>;

  struct held {
    group_state* group;
    member_state* member;
    partition_state* state;
  };
  /// The partition `session` holds, checked for an ack.
  result<held> find_held(const std::string& group, std::uint64_t session, const mq_partition_id& partition);
  std::vector<mq_move> rebalance(const std::string& name, group_state& g, const mq_log& log);
  void sync_partitions(const std::string& name, group_state& g, const mq_log& log);
  void move(const std::string& name, group_state& g, const mq_partition_id& id, partition_state& ps,
            std::optional<std::uint64_t> to, std::vector<mq_move>& moves);
  /// Drops the in-flight entry at `it`, lowering its member's count.
  void land(group_state& g, partition_state& ps, std::map<std::uint64_t, flight>::iterator it);
  /// Marks `offset` acked and moves committed past the acked prefix.
  void settle(const std::string& name, const mq_partition_id& id, partition_state& ps, std::uint64_t offset);
  /// Moves committed past the acked prefix; records a change when it moved.
  void advance(const std::string& name, const mq_partition_id& id, partition_state& ps);
  /// What the log dropped below `start` counts as acked.
  void catch_up(const std::string& name, group_state& g, const mq_partition_id& id, partition_state& ps,
                std::uint64_t start);
  /// An in-flight delivery ended unacked: out again at `at_ms`, or dead.
  std::optional<mq_dead_letter> give_back(const std::string& name, group_state& g, const mq_partition_id& id,
                                          partition_state& ps, std::map<std::uint64_t, flight>::iterator it,
                                          std::int64_t at_ms, const mq_log& log);
  /// One poll's progress: what it gathered and what room is left.
  struct gather;
  void take_back_lost(group_state& g, member_state& m, std::uint64_t session, std::uint64_t poll_seq,
                      std::uint64_t answered_seq, std::int64_t now_ms);
  void deliver_due(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_log& log);
  void deliver_new(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_log& log);
  void deliver(gather& gt, const mq_partition_id& id, partition_state& ps, const mq_shell& shell,
               std::uint32_t deliveries);
  /// The earliest nacked redelivery of `m`'s partitions due after `now_ms`.
  std::optional<std::int64_t> next_due(const group_state& g, const member_state& m, std::int64_t now_ms) const;
  void record(mq_group_change change);
  void record_offset(const std::string& name, const mq_partition_id& id, const partition_state& ps);
  void forget_offset_records(const std::string& name);

  group_map groups_;
  /// topic → the groups that read it.
  std::map<std::string, std::set<std::string>, std::less<>> readers_;
  std::vector<mq_group_change> changes_;
  /// (group, partition) → its mq_offset_changed in changes_, to update in place.
  std::map<std::pair<std::string, mq_partition_id>, std::size_t> offset_records_;
  bool plant_forget_acks_ = false;
};

}  // namespace sluice::master
