// mq_store: the master's MQ state in its durable store — topics, their
// partitions' log starts and shells (mq_log), consumer groups and their
// committed offsets (mq_groups). The cores hand out change records;
// mq_journal turns them into store writes, and mq_load rebuilds fresh
// cores from what the store holds.
//
// Records, under "q/" (persistence.cpp's prefixes are "o/", "m/", "p/",
// "h/", "a/" and the key "v"; none starts with "q"). Names are
// [A-Za-z0-9._-] (check_mq_name), so '/' separates fields; <p> is a
// partition as 8 lowercase hex digits and <offset> an offset as 16, so key
// order is offset order. Integers are little-endian; every value starts
// with its format byte (mq_records::format, 1 today; a reader refuses a
// format it does not know, so a record can grow under a new format):
//   q/t/<topic>               1, partitions u32, max_age_ms i64, max_bytes u64, max_messages u64,
//                             full u8, payload_replicas u32, max_message_bytes u64,
//                             dedupe_window_ms i64, dedupe_entries_max u64,
//                             dead_letter (u32 length, bytes; absent in older records: none)
//   q/l/<topic>/<p>           1, start u64: no offset below it is held, or handed out again
//   q/s/<topic>/<p>/<offset>  1, size_bytes u64, producer u64, append_ms i64,
//                             payload (u32 length, bytes), message_id (u32 length, bytes)
//   q/g/<group>               1, ack_timeout_ms i64, max_deliveries u32, prefetch u32, start u8,
//                             topic count u32, topics (u32 length, bytes) each
//   q/o/<group>/<topic>/<p>   1, committed u64, generation u64
//
// Crashes. The store keeps, of the writes after its last sync, a prefix
// in write order (durable_store.hpp), so the writes of each change are
// ordered for every prefix of them to load:
//  - a topic (group) delete erases its config record first, then the
//    rest: a record whose topic (group) has no config is a leftover of a
//    delete a crash cut short;
//  - a log start move writes the new start first, then erases the shells
//    below it: a shell below its partition's start is a leftover of a
//    move a crash cut short. (The other order could erase every shell and
//    keep the old start, and the restored partition would hand out their
//    offsets again.)
// mq_load passes over leftovers and erases them; a create erases any
// leftovers of its name too before it writes the config.
//
// Thread safety: none, like the store.
#pragma once

#include <cstdint>
#include <vector>

#include "actors/master/mq_groups.hpp"
#include "actors/master/mq_log.hpp"
#include "runtime/storage/durable_store.hpp"
#include "sluice/result.hpp"

namespace sluice::master {

struct mq_load_stats {
  std::uint64_t topics = 0;
  std::uint64_t shells = 0;
  std::uint64_t groups = 0;
  std::uint64_t offsets = 0;
  /// Records of a topic or group with no config (a delete a crash cut
  /// short), skipped.
  std::uint64_t leftovers = 0;
};

/// Writes `changes` to `store` in order, without syncing it: the master
/// syncs once per batch. Stops at the first store error and returns it;
/// the store then holds a prefix of the writes, so the caller discards
/// them (durable_store::discard) and reloads, as after a failed sync.
result<void> mq_journal(durable_store& store, const std::vector<mq_log_change>& changes);
result<void> mq_journal(durable_store& store, const std::vector<mq_group_change>& changes);

/// Restores every topic, log start, shell, group and offset the store
/// holds (its unsynced writes included), and erases the leftovers it
/// passed over (unsynced: the caller's next sync keeps that). Fails with
/// `internal`, naming the record, when a record does not decode or breaks
/// an invariant of the cores (the store is corrupt), and with the store's
/// error when a scan or erase fails. After it, the caller tells the
/// groups the topics are back (mq_groups::topics_changed). REQUIRES:
/// `log` and `groups` are fresh (never used).
result<mq_load_stats> mq_load(durable_store& store, mq_log& log, mq_groups& groups);

}  // namespace sluice::master
