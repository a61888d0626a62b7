// mq_log: the master's MQ topics and their partition logs. Pure
// bookkeeping like the directory: no I/O, no clock of its own (callers pass
// `now_ms`, wall milliseconds since the Unix epoch), ordered containers
// only, so every listing and every drop happens in the same order for the
// same calls.
//
// A partition is an ordered log of message shells. A shell names its
// payload — a data-plane object the producer wrote — by its object key; the
// master never holds payload bytes. Whoever drops a shell (a prune, a
// drop_oldest append, a topic delete) gets its payload key back to free.
//
// Invariants:
//  1. a partition's offsets are contiguous from its log start to its end,
//     and an offset is never reused: the log start only grows, even when
//     every shell is dropped, and it is persisted (log_start_moved);
//  2. a partition holds at most its topic's max_messages shells and
//     max_bytes bytes (when set), never more than mq_partition_shells_max,
//     and the whole log never more than mq_shells_max;
//  3. append times never decrease within a topic (a clock that steps back
//     is clamped), so a partition's shells are sorted by time too;
//  4. a (producer, message id) appended inside the topic's dedupe window
//     is appended once: a retry returns the first (partition, offset);
//  5. a payload key is handed back to free exactly once, when the last
//     shell naming it is dropped (a dead-lettered message is named by its
//     own shell and by the dead-letter topic's).
//
// Retention limits (max_age_ms, max_bytes, max_messages) apply to each
// partition on its own, as in Kafka: a topic of 4 partitions with
// max_messages 100 keeps up to 400.
//
// Thread safety: none; one actor owns it.
#pragma once

#include <compare>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <variant>
#include <vector>

#include "sluice/result.hpp"

namespace sluice::master {

// Limits. Each bounds a table or a request; going past one is refused with
// `overloaded` (a table is full: retry later) or `invalid_argument` (the
// request itself is out of range).

/// Topics the master keeps. A topic costs a few hundred bytes plus its
/// partitions; 4096 is far beyond what one cluster's control plane needs
/// and keeps a full listing one small message.
inline constexpr std::size_t mq_topics_max = 4096;
/// Partitions of one topic. Parallelism comes from partitions; 256 is
/// more consumers per group than mq_group_members_max allows anyway.
inline constexpr std::uint32_t mq_partitions_max = 256;
/// Longest topic (and group) name, in bytes of [A-Za-z0-9._-].
inline constexpr std::size_t mq_name_bytes_max = 200;
/// Most payload copies a topic may ask for: more would not fit a rack.
inline constexpr std::uint32_t mq_payload_replicas_max = 8;
/// The largest max_message_bytes a topic may set (1 TiB): a payload lives
/// in one owner's pool, and no pool is larger.
inline constexpr std::uint64_t mq_message_bytes_max = std::uint64_t{1} << 40;
/// Shells one partition holds, whatever its retention says: a partition
/// with no limit is full at this many.
inline constexpr std::uint64_t mq_partition_shells_max = std::uint64_t{1} << 20;
/// Shells the whole log holds (about 200 bytes each: ~400 MiB of master
/// memory at the bound). Payloads are large, so this is petabytes of data.
inline constexpr std::uint64_t mq_shells_max = std::uint64_t{1} << 21;
/// The longest max_age_ms and dedupe_window_ms (2^40 ms, about 34
/// years): time arithmetic on them never overflows.
inline constexpr std::int64_t mq_window_ms_max = std::int64_t{1} << 40;
/// Entries one topic's dedupe window may remember.
inline constexpr std::uint64_t mq_dedupe_entries_max = std::uint64_t{1} << 16;
/// Entries all dedupe windows together may remember: a topic whose
/// window would take the sum past it is refused at create.
inline constexpr std::uint64_t mq_dedupe_entries_total_max = std::uint64_t{1} << 20;
/// Longest message id a producer may give, in bytes.
inline constexpr std::size_t mq_message_id_bytes_max = 256;
/// Longest partition key a producer may give, in bytes.
inline constexpr std::size_t mq_partition_key_bytes_max = 1024;
/// Longest payload reference (an object key).
inline constexpr std::size_t mq_payload_key_bytes_max = 4096;
/// Messages one append_batch call may carry.
inline constexpr std::size_t mq_append_batch_max = 1024;
/// Change records a log holds between drains. The master drains after
/// every operation it answers, so hitting this is a bug, not load.
inline constexpr std::size_t mq_changes_max = std::size_t{1} << 22;

/// What an append to a full partition does. Persisted: never renumber.
enum class mq_full_policy : std::uint8_t {
  block = 0,        ///< refused with `overloaded`; the caller parks the producer until space frees
  reject = 1,       ///< refused with `overloaded`; the caller answers the producer at once
  drop_oldest = 2,  ///< the oldest shells are dropped to make room; the append succeeds
};

struct mq_topic_config {
  std::uint32_t partitions = 1;        ///< 1..mq_partitions_max
  std::int64_t max_age_ms = 0;         ///< per shell, 0..mq_window_ms_max; 0: no limit
  std::uint64_t max_bytes = 0;         ///< per partition; 0: no limit
  std::uint64_t max_messages = 0;      ///< per partition; 0: no limit (mq_partition_shells_max)
  mq_full_policy full = mq_full_policy::block;
  std::uint32_t payload_replicas = 1;  ///< 1..mq_payload_replicas_max
  std::uint64_t max_message_bytes = std::uint64_t{64} << 20;  ///< 1..mq_message_bytes_max, and <= max_bytes
  std::int64_t dedupe_window_ms = 0;   ///< 0..mq_window_ms_max; 0: no dedupe
  std::uint64_t dedupe_entries_max = 0;  ///< 1..mq_dedupe_entries_max with a window, else 0
  /// The topic a message that ran out of deliveries goes to (not this
  /// topic itself); empty: such a message is dropped.
  std::string dead_letter{};
  friend bool operator==(const mq_topic_config&, const mq_topic_config&) = default;
};

/// Whether `name` may name a topic or a group: 1..mq_name_bytes_max bytes
/// of [A-Za-z0-9._-].
result<void> check_mq_name(std::string_view name, std::string_view what);
/// Whether `config` is in range; `invalid_argument` says which field not.
result<void> check_topic_config(const mq_topic_config& config);

/// One partition of one topic. Ordered by topic, then partition.
struct mq_partition_id {
  std::string topic;
  std::uint32_t partition = 0;
  friend auto operator<=>(const mq_partition_id&, const mq_partition_id&) = default;
};

/// A message as the master keeps it: everything but the payload bytes.
struct mq_shell {
  std::uint64_t offset = 0;
  std::string payload;          ///< the payload's object key
  std::uint64_t size_bytes = 0;
  std::uint64_t producer = 0;
  std::string message_id;       ///< empty: none (no dedupe)
  std::int64_t append_ms = 0;
  friend bool operator==(const mq_shell&, const mq_shell&) = default;
};

/// A message as a producer hands it in.
struct mq_message {
  std::string payload;          ///< the payload's object key; not empty
  std::uint64_t size_bytes = 0;
  std::uint64_t producer = 0;
  std::string message_id;       ///< empty: none
  std::string key;              ///< partition key; empty: none
  std::optional<std::uint32_t> partition;  ///< explicit partition; wins over `key`
  /// Another shell names this payload too (a dead-lettered copy): the
  /// payload is handed back to free only when the last shell naming it goes.
  bool shares_payload = false;
};

struct mq_appended {
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  /// The dedupe window held this (producer, message id): nothing was
  /// appended; (partition, offset) are the first append's. The caller
  /// frees the retry's payload when it is not the first one's.
  bool duplicate = false;
  /// Payload keys of shells dropped to make room (drop_oldest), to free.
  std::vector<std::string> dropped;
};

struct mq_partition_info {
  std::uint64_t start = 0;  ///< the log start: the lowest offset still held
  std::uint64_t end = 0;    ///< the next offset appended
  std::uint64_t bytes = 0;  ///< bytes of the shells held
};

struct mq_topic_info {
  mq_topic_config config;
  std::vector<mq_partition_info> partitions;
};

/// What a prune dropped.
struct mq_pruned {
  std::vector<std::string> payloads;  ///< payload keys to free, in (topic, partition, offset) order
  std::vector<std::string> topics;    ///< topics that gained room: wake their blocked producers
};

// Change records, in the order they happened: applying them in order to
// a store and restoring from it gives back the same topics and shells.
struct mq_topic_created {
  std::string topic;
  mq_topic_config config;
};
/// The topic goes, with every shell and log start of it.
struct mq_topic_deleted {
  std::string topic;
};
struct mq_shell_appended {
  std::string topic;
  std::uint32_t partition = 0;
  mq_shell shell;
};
/// Every shell below `start` is gone (and `start` is persisted, so that
/// offsets are never reused).
struct mq_log_start_moved {
  std::string topic;
  std::uint32_t partition = 0;
  std::uint64_t start = 0;
};
using mq_log_change = std::variant<mq_topic_created, mq_topic_deleted, mq_shell_appended, mq_log_start_moved>;

class mq_log {
 public:
  /// Creates `topic`: true when created, false when it exists with the
  /// same config (idempotent). Fails with `conflict` when it exists with
  /// another, `invalid_argument` for a bad name or config, `overloaded`
  /// past mq_topics_max topics or mq_dedupe_entries_total_max entries.
  result<bool> create(const std::string& topic, const mq_topic_config& config);
  /// Deletes `topic`; returns every payload key it held, to free.
  /// `not_found` when there is no such topic.
  result<std::vector<std::string>> remove(const std::string& topic);
  /// Topic names in bytewise order (at most mq_topics_max).
  std::vector<std::string> list() const;
  /// The topic's config and partitions; `not_found` when absent.
  result<mq_topic_info> describe(const std::string& topic) const;
  const mq_topic_config* config_of(const std::string& topic) const;

  /// The partition a key falls in: XXH64 of its bytes (seed 0) modulo
  /// `partitions`. Producers and the master must agree: never change it.
  static std::uint32_t partition_of_key(std::string_view key, std::uint32_t partitions) noexcept;

  /// Appends one message: to its explicit partition, else the partition
  /// of its key, else the topic's next partition round-robin. Fails with
  /// `not_found` (no topic), `invalid_argument` (bad message, partition out
  /// of range, larger than max_message_bytes), or `overloaded` when the
  /// partition is full and the policy is block or reject: `overloaded`
  /// from append always means full, nothing was appended, and a later
  /// prune naming the topic in mq_pruned::topics made room.
  result<mq_appended> append(const std::string& topic, const mq_message& message, std::int64_t now_ms);
  /// Appends each message in turn, as append() would; one result each.
  /// Fails as a whole only for a missing topic or more than
  /// mq_append_batch_max messages.
  result<std::vector<result<mq_appended>>> append_batch(const std::string& topic,
                                                        const std::vector<mq_message>& messages,
                                                        std::int64_t now_ms);

  /// Drops, in every partition, the shells below `consumed_upto` (the
  /// lowest offset some group has not acked; a partition absent from the
  /// map has no group, and keeps its shells), and the oldest shells past
  /// max_age_ms, max_bytes or max_messages whatever was consumed.
  mq_pruned prune(std::int64_t now_ms, const std::map<mq_partition_id, std::uint64_t>& consumed_upto);

  // Lag inputs. Each fails with `not_found` for a missing topic and
  // `invalid_argument` for a partition out of range.
  result<std::uint64_t> start_offset(const std::string& topic, std::uint32_t partition) const;
  result<std::uint64_t> end_offset(const std::string& topic, std::uint32_t partition) const;
  /// Bytes of the shells held in [from, to), both clamped to the log.
  result<std::uint64_t> bytes_between(const std::string& topic, std::uint32_t partition, std::uint64_t from,
                                      std::uint64_t to) const;
  /// The first offset appended at or after `time_ms` (the end when none).
  result<std::uint64_t> offset_at_time(const std::string& topic, std::uint32_t partition, std::int64_t time_ms) const;
  /// The shell at `offset`, or null when it is not held.
  const mq_shell* find(const std::string& topic, std::uint32_t partition, std::uint64_t offset) const;

  std::uint64_t shell_count() const noexcept { return shells_; }

  /// The changes since the last drain, oldest first; clears them.
  std::vector<mq_log_change> drain_changes();

  // Restore from durable records, into a log built for it: topics first,
  // then each partition's log start, then its shells in offset order. Each
  // fails with `invalid_argument` on records that break an invariant (a
  // store that is corrupt). Restoring records no changes. Dedupe windows
  // are rebuilt from the shells restored: the ids of shells dropped before
  // the restart are forgotten, so a retry of one is appended again.
  result<void> restore_topic(const std::string& topic, const mq_topic_config& config);
  result<void> restore_log_start(const std::string& topic, std::uint32_t partition, std::uint64_t start);
  result<void> restore_shell(const std::string& topic, std::uint32_t partition, mq_shell shell);
  /// Ends a restore: forgets what it needed to count the payloads named
  /// by more than one shell.
  void restore_done();

  /// Payloads named by more than one shell (at most shell_count()).
  std::size_t shared_payloads() const noexcept { return shared_.size(); }

 private:
  struct stored_shell {
    mq_shell shell;
    std::uint64_t bytes_before = 0;  ///< bytes appended to the partition before it
  };
  struct partition_log {
    std::uint64_t start = 0;
    std::deque<stored_shell> shells;  ///< shells[i].shell.offset == start + i
    std::uint64_t bytes = 0;          ///< of the shells held
    std::uint64_t bytes_appended = 0; ///< ever, so bytes_between is two lookups
    std::uint64_t end() const noexcept { return start + shells.size(); }
  };
  using dedupe_key = std::pair<std::uint64_t, std::string>;  // (producer, message id)
  struct dedupe_hit {
    std::uint32_t partition = 0;
    std::uint64_t offset = 0;
    std::int64_t append_ms = 0;
  };
  struct topic_state {
    mq_topic_config config;
    std::vector<partition_log> partitions;
    std::uint32_t next_partition = 0;  ///< round-robin cursor
    std::int64_t last_append_ms = INT64_MIN;
    std::map<dedupe_key, dedupe_hit> dedupe;
    /// The same entries by (append time, partition, offset): oldest first.
    std::map<std::tuple<std::int64_t, std::uint32_t, std::uint64_t>, dedupe_key> dedupe_order;
  };

  result<topic_state*> find_topic(const std::string& topic);
  result<const partition_log*> find_partition(const std::string& topic, std::uint32_t partition) const;
  result<std::uint32_t> choose_partition(const topic_state& t, const mq_message& m) const;
  result<void> check_message(const topic_state& t, const mq_message& m) const;
  /// Whether one more shell of `size` bytes fits `p` as the limits stand.
  bool fits(const topic_state& t, const partition_log& p, std::uint64_t size) const noexcept;
  void forget_dedupe_before(topic_state& t, std::int64_t now_ms);
  void remember_dedupe(topic_state& t, const dedupe_key& key, const dedupe_hit& hit);
  /// Drops the oldest shell of `p`; returns its payload key.
  std::string drop_front(partition_log& p);
  void record(mq_log_change change);
  /// One shell naming `payload` went: whether it was the last (free it).
  bool release(const std::string& payload);

  std::map<std::string, topic_state, std::less<>> topics_;
  std::uint64_t shells_ = 0;
  std::uint64_t dedupe_reserved_ = 0;  ///< sum of the topics' dedupe_entries_max
  std::vector<mq_log_change> changes_;
  /// Payload keys named by more than one shell, with how many more.
  std::unordered_map<std::string, std::uint32_t> shared_;
  /// Payload keys of the shells restored so far (until restore_done()).
  std::unordered_set<std::string> restored_payloads_;
};

}  // namespace sluice::master
