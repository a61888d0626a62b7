// persistence: what the master keeps across restarts, in its durable
// store — the committed version of every key, the owners it knows, and a
// floor under the versions it may hand out next. Pending puts are not
// kept: a put in flight when the master restarts fails and is retried.
//
// Records (little-endian integers):
//   o/<key>   version u64, size u64, holder u64[, expires_ms u64 (wall ms, 0: never)[, replica u64...]]
//             [, copies u32: the copy target, written when above 1]
//   m/<id>    incarnation u64, capacity u64, name length u32, name, address
//   v         version floor u64: no version below it is handed out again
//   p/<key>   the key's pins: (owner u64, session u64, until_ms u64) each
//   h/<slot>  the owner handed the key slot's writes: owner u64 (slot as 4 decimal digits)
//   a/<id>    the owner's own commits applied through: seq u64
//
// Writes are grouped: changes accumulate until sync(), and the master
// answers nothing that depends on a change before the sync that made it
// durable (see master.cpp). Without a store (no data directory) nothing
// is kept and every call is free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/master/directory.hpp"
#include "actors/master/homes.hpp"
#include "actors/master/membership.hpp"
#include "actors/master/mq_store.hpp"
#include "actors/master/pins.hpp"
#include "runtime/storage/durable_store.hpp"

namespace sluice::master {

/// How many versions one write of the version floor covers.
inline constexpr std::uint64_t version_block = 1 << 16;

struct recovery_stats {
  std::uint64_t objects = 0;
  std::uint64_t members = 0;
  std::uint64_t next_version = 1;
};

class persistence {
 public:
  /// `store` may be null: nothing persists. REQUIRES: outlives this.
  explicit persistence(durable_store* store) : store_(store) {}

  bool enabled() const noexcept { return store_ != nullptr; }
  /// Changes were made since the last successful sync.
  bool dirty() const noexcept { return dirty_; }

  /// Fills an empty directory from the store and returns the members it
  /// knew (to be restored down, see membership::restore).
  result<recovery_stats> load(directory& dir, std::vector<member>& members, pin_table* pins = nullptr,
                              homes* slots = nullptr, owner_commit_log* commits = nullptr);

  void object_committed(const std::string& key, const object_entry& entry);
  void object_removed(const std::string& key);
  /// The pins on `key` are now `holds` (none: the record goes).
  void pins_changed(const std::string& key, const std::vector<pin_hold>& holds);
  void member_joined(const member& m);
  void member_forgotten(node_id id);
  /// `slot`'s writes are now `owner`'s (none: the master's again).
  void home_changed(key_slot slot, std::optional<node_id> owner);
  /// `owner`'s own commits are applied through `seq` (0: forget it).
  void owner_commits_applied(node_id owner, std::uint64_t seq);
  /// MQ topics, shells, groups and offsets changed (mq_store.hpp).
  void mq_changed(const std::vector<mq_log_change>& log, const std::vector<mq_group_change>& groups);
  /// Fills fresh MQ cores from the store.
  result<mq_load_stats> load_mq(mq_log& log, mq_groups& groups);
  /// Call after every version handed out: moves the durable floor ahead
  /// of `next_version` when it came close.
  void versions_used(std::uint64_t next_version);

  /// Makes every change durable. On failure the caller discards and
  /// reloads (see durable_store::sync).
  result<void> sync();
  /// Drops the changes since the last sync.
  void discard();

 private:
  void write(std::string_view key, std::string_view value);
  void erase(std::string_view key);

  durable_store* store_;
  bool dirty_ = false;
  /// A write failed since the last sync: the next sync must fail too.
  std::optional<error> write_error_;
  std::uint64_t version_floor_ = 1;
  std::string scratch_;
};

}  // namespace sluice::master
