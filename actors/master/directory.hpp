// directory: the master's map from key to committed version and holder,
// plus the pending versions of puts in flight. Pure bookkeeping: no I/O,
// no clock of its own (callers pass `now`), deterministic iteration.
//
// Invariants:
//  1. versions are unique across the cluster and grow monotonically, so
//     each key's versions grow too, across deletes;
//  2. a key's committed version is the highest version committed for it
//     since it was last removed ("last committed version wins");
//  3. a pending version is never visible to readers;
//  4. the versions a key shows readers only grow: a put placed before a
//     newer version was committed (or deleted) can never become visible
//     after it, however late its commit arrives.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <absl/container/btree_set.h>
#include <absl/container/flat_hash_set.h>
#include <absl/hash/hash.h>

#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/keys.hpp"
#include "runtime/node_id.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice::master {

/// Owners besides the holder keeping copies of one version. Most objects
/// have none, so the list costs one pointer until it holds one (a
/// std::vector here would cost 24 bytes of every object in the
/// directory); it gives its memory back when it is emptied.
class replica_list {
 public:
  replica_list() = default;
  replica_list(const replica_list& other) { *this = other; }
  replica_list& operator=(const replica_list& other) {
    if (this != &other) nodes_ = other.empty() ? nullptr : std::make_unique<std::vector<node_id>>(*other.nodes_);
    return *this;
  }
  replica_list(replica_list&&) noexcept = default;
  replica_list& operator=(replica_list&&) noexcept = default;

  const node_id* begin() const noexcept { return nodes_ ? nodes_->data() : nullptr; }
  const node_id* end() const noexcept { return nodes_ ? nodes_->data() + nodes_->size() : nullptr; }
  std::size_t size() const noexcept { return nodes_ ? nodes_->size() : 0; }
  bool empty() const noexcept { return size() == 0; }
  node_id front() const noexcept {
    SLUICE_ASSERT(!empty());
    return nodes_->front();
  }
  void push_back(node_id id) {
    if (!nodes_) nodes_ = std::make_unique<std::vector<node_id>>();
    nodes_->push_back(id);
  }
  /// Takes `id` out of the list (every time it is there).
  void remove(node_id id) {
    if (!nodes_) return;
    std::erase(*nodes_, id);
    if (nodes_->empty()) nodes_.reset();
  }
  void pop_front() {
    SLUICE_ASSERT(!empty());
    nodes_->erase(nodes_->begin());
    if (nodes_->empty()) nodes_.reset();
  }
  bool operator==(const std::vector<node_id>& other) const {
    return std::equal(begin(), end(), other.begin(), other.end());
  }

 private:
  std::unique_ptr<std::vector<node_id>> nodes_;  // null: none
};

/// The sizes an object may have: below 2^56 bytes (the size shares its
/// word with the copy target).
inline constexpr std::uint64_t object_size_max = (std::uint64_t{1} << 56) - 1;

/// One committed version: 40 bytes, kept beside its key in one
/// allocation (directory::record), so a million objects cost the
/// directory under 100 bytes each.
struct object_entry {
  std::uint64_t version = 0;
  std::uint64_t size : 56 = 0;  ///< at most object_size_max
  /// The copies its put asked for (1 to max_copies): repair restores
  /// them when copies are lost. A deliberate eviction lowers it.
  std::uint64_t copies : 8 = 1;
  node_id holder;
  /// When the version expires, in milliseconds of wall time since the
  /// Unix epoch (so it means the same after a restart); 0: never.
  std::int64_t expires_ms = 0;
  /// Other owners holding copies of this version (registered after the
  /// holder committed it); readers may use any that is up.
  replica_list replicas;
  std::size_t copy_count() const noexcept { return 1 + replicas.size(); }
  bool held_by(node_id id) const {
    return holder == id || std::find(replicas.begin(), replicas.end(), id) != replicas.end();
  }
};
static_assert(sizeof(object_entry) == 40, "an object's entry is 40 bytes (see directory::record)");

struct pending_entry {
  std::string key;
  std::uint64_t size = 0;
  node_id holder;
  clock_time expires;
  wire::put_condition condition;
  std::uint64_t ttl_ms = 0;  ///< the committed version lives this long; 0: forever
  std::uint32_t copies = 1;  ///< object_entry::copies
};

/// The most copies a put may ask for (wire::place::replicas is a u8).
inline constexpr std::uint32_t max_copies = 255;
static_assert(max_copies <= 255, "object_entry::copies is 8 bits");

/// A version some holder should free.
struct stale_version {
  node_id holder;
  std::string key;
  std::uint64_t version = 0;
};

struct commit_outcome {
  std::uint64_t version = 0;
  /// What the commit made obsolete: the previous committed version, or
  /// this one when a newer version was already committed.
  std::optional<stale_version> stale;
  /// The replicas of the previous committed version, to free too.
  std::vector<stale_version> stale_replicas;
};

/// What an eviction of one holder's copy did.
enum class evicted_copy { refused, replica, key };

class directory {
 public:
  /// Records a pending version of `key` on `holder`; returns the version.
  /// A conditional put is checked again when it commits.
  std::uint64_t begin_put(const std::string& key, std::uint64_t size, node_id holder,
                          clock_time expires, wire::put_condition condition = {}, std::uint64_t ttl_ms = 0,
                          std::uint32_t copies = 1);

  /// Wall time now, in ms since the Unix epoch: versions whose TTL ran out
  /// by then are expired — find(), check(), list() and count() no longer
  /// see them, though they stay until taken out (expired()).
  void advance(std::int64_t now_ms) noexcept { now_ms_ = now_ms; }
  /// Expired versions still listed, (key, version), at most `max`, the
  /// earliest first.
  std::vector<std::pair<std::string, std::uint64_t>> expired(std::size_t max) const;

  /// Whether the key's committed version meets `condition` now; fails
  /// with `conflict` saying why not.
  result<void> check(const std::string& key, const wire::put_condition& condition) const;

  /// Makes the pending `version` visible. Fails with `not_found` when no
  /// such pending version exists (it expired or was aborted), with
  /// `invalid_argument` when `key` or `holder` do not match it, and with
  /// `conflict` (forgetting it) when it is conditional and the key changed
  /// so that it no longer holds: a conditional put becomes current or
  /// fails, it is never committed only to be obsolete.
  result<commit_outcome> commit(const std::string& key, std::uint64_t version, node_id holder);

  /// Applies a put `holder` committed on its own (in a slot it was handed,
  /// see docs/concepts.md): `version` becomes the key's current version
  /// unless a newer one is. `stale` names what that made obsolete — the
  /// previous version, or this one when a newer one was there first.
  /// Applying the current version again changes nothing.
  commit_outcome commit_owned(const std::string& key, std::uint64_t version, std::uint64_t size, node_id holder);

  /// Whether every copy and every pending put of the keys in `slot` is
  /// `holder`'s (or there are none): only then may `holder` be handed the
  /// slot's writes.
  bool slot_only(key_slot slot, node_id holder) const;

  /// Registers `holder` as one more holder of `version` of `key`: true
  /// when that is the key's committed version (and `holder` did not hold
  /// it yet); false when the key moved on (the copy is to be freed).
  bool add_replica(const std::string& key, std::uint64_t version, node_id holder);

  /// `holder` gives up its copy of `version` of `key`: refused when that
  /// is not the committed version or `holder` does not hold it; a replica
  /// when other holders keep the key (a replica takes the holder's place
  /// when the holder goes); the key when it was the last copy.
  evicted_copy evict(const std::string& key, std::uint64_t version, node_id holder);

  /// The key's copy target comes down to the copies it has (an owner
  /// evicted one on purpose: repair must not put it back).
  void settle_copies(const std::string& key);

  /// Calls `f(key, entry)` (a std::string_view and the entry) for every
  /// committed version, expired or not,
  /// in key order.
  template <class F>
  void for_each(F&& f) const {
    for (auto& r : ordered_) f(r->key(), r->entry);
  }

  /// Whether `version` of `key` is a put pending on `holder`.
  bool pending_on(const std::string& key, std::uint64_t version, node_id holder) const;
  /// The committed versions `holder` holds a copy of, for the keys after
  /// `after` up to and including `through` (to the end when `to_end`), in
  /// key order.
  std::vector<wire::key_version> held_in_range(node_id holder, std::string_view after, std::string_view through,
                                               bool to_end) const;

  /// Forgets a pending version; false when there was none.
  bool abort(std::uint64_t version);

  /// Drops pending versions whose time ran out; returns them so their
  /// holders can be told.
  std::vector<stale_version> expire(clock_time now);

  /// The key's committed version unless it expired.
  const object_entry* find(const std::string& key) const;
  /// The key's committed version, expired or not: the holder may still
  /// serve it until told otherwise.
  const object_entry* find_any(const std::string& key) const;

  /// Puts back a committed version read from durable storage.
  void restore(std::string_view key, object_entry entry);

  /// Forgets every copy `holder` holds (it lost them); returns the keys
  /// that lost their last copy and were removed. Keys that kept another
  /// copy are added to `changed`, when given.
  std::vector<std::string> remove_holder(node_id holder, std::vector<std::string>* changed = nullptr);

  /// The version the next put gets.
  std::uint64_t next_version() const noexcept { return next_version_; }
  /// Versions below `floor` are never handed out again (they may have
  /// been, by an earlier life of the master).
  void skip_versions_below(std::uint64_t floor) { next_version_ = std::max(next_version_, floor); }

  /// Removes the key's committed version; returns it when there was one.
  std::optional<object_entry> remove(const std::string& key);

  std::uint64_t object_count() const noexcept { return ordered_.size(); }

  /// Committed keys starting with `prefix` after `start_after`, in bytewise
  /// order, at most `limit`; `more` when further keys match.
  struct listing {
    std::vector<wire::key_info> keys;
    bool more = false;
  };
  listing list(std::string_view prefix, std::string_view start_after, std::size_t limit) const;
  /// How many committed keys start with `prefix`.
  std::uint64_t count(std::string_view prefix) const;
  std::uint64_t pending_count() const noexcept { return pending_.size(); }

  struct holder_usage {
    std::uint64_t objects = 0;        ///< committed
    std::uint64_t bytes = 0;          ///< committed
    std::uint64_t pending_bytes = 0;  ///< placed, not yet committed
  };
  /// Usage per holder, as the directory sees it.
  holder_usage usage_of(node_id holder) const;

 private:
  // A committed key: its entry, then the key's length (2 bytes) and
  // bytes, in one allocation of 42 + length bytes. Owned by ordered_
  // (key order, so that keys list by prefix) and found through index_, a
  // hash set of the same records (a lookup costs a probe and the record,
  // not a walk down the tree). The two change together, in add_node and
  // erase_node only; neither is ever copied.
  struct record {
    object_entry entry;
    std::string_view key() const noexcept;
  };
  struct record_free {
    void operator()(record* r) const noexcept;
  };
  using record_ptr = std::unique_ptr<record, record_free>;
  static record_ptr make_record(std::string_view key, const object_entry& entry);
  static std::string_view key_of(std::string_view key) noexcept { return key; }
  static std::string_view key_of(const record* r) noexcept { return r->key(); }
  static std::string_view key_of(const record_ptr& r) noexcept { return r->key(); }
  struct key_less {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      return key_of(a) < key_of(b);
    }
  };
  struct key_hash {
    using is_transparent = void;
    template <class A>
    std::size_t operator()(const A& a) const noexcept {
      return absl::Hash<std::string_view>{}(key_of(a));
    }
  };
  struct key_eq {
    using is_transparent = void;
    template <class A, class B>
    bool operator()(const A& a, const B& b) const noexcept {
      return key_of(a) == key_of(b);
    }
  };
  absl::btree_set<record_ptr, key_less> ordered_;
  absl::flat_hash_set<record*, key_hash, key_eq> index_;
  record* find_node(std::string_view key) const;
  /// Like a map's try_emplace: the key's record, and whether it is new.
  std::pair<record*, bool> add_node(std::string_view key, const object_entry& entry);
  void erase_node(record* r);
  std::map<std::uint64_t, pending_entry> pending_;  // by version
  void forget_pending(std::map<std::uint64_t, pending_entry>::iterator it);

  // A removed key remembers the version it was removed at for as long as
  // puts placed before the removal may still commit (invariant 4); only
  // keys with pending puts need one, which bounds the map.
  std::unordered_map<std::string, std::uint32_t> pending_per_key_;
  std::unordered_map<std::string, std::uint64_t> removed_at_;

  std::map<node_id, holder_usage> usage_;
  /// Keys with a TTL, by expiry.
  std::set<std::pair<std::int64_t, std::string>> expiring_;
  std::int64_t now_ms_ = 0;
  bool live(const object_entry& e) const noexcept { return e.expires_ms == 0 || e.expires_ms > now_ms_; }
  void set_expiry(std::string_view key, std::int64_t old_ms, std::int64_t new_ms);
  void count_copy(std::string_view key, node_id holder, std::uint64_t size, bool added);
  /// Per slot, how many copies and pending puts of its keys each owner has.
  void count_in_slot(std::string_view key, node_id holder, bool added);
  std::vector<std::map<node_id, std::uint32_t>> slot_use_ = std::vector<std::map<node_id, std::uint32_t>>(key_slots);
  std::uint64_t next_version_ = 1;
};

}  // namespace sluice::master
