// pins: which keys are kept from eviction, by whom, until when. Pure
// bookkeeping, deterministic order; the master persists what changes.
//
// A pin is held either by a client's session — the client's node id, as
// vouched for by the owner it is connected through — or detached (session
// 0). A session pin lapses at its time, when the client's owner stops
// listing the client among its live sessions (the client went away), or
// when that owner goes down; a detached pin lapses at its time or when it
// is lifted. A pin belongs to the key, not to a version: it stays across
// overwrites and goes with a remove.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "runtime/node_id.hpp"

namespace sluice::master {

/// Pins that never lapse by time carry this `until_ms`.
inline constexpr std::int64_t pinned_forever = INT64_MAX;

struct pin_hold {
  node_id owner;               ///< the owner the pin came through
  std::uint64_t session = 0;   ///< the client's node id; 0: detached
  std::int64_t until_ms = 0;   ///< wall ms, or pinned_forever
  friend bool operator==(const pin_hold&, const pin_hold&) = default;
};

class pin_table {
 public:
  /// Adds the pin of (`owner`, `session`) on `key`, or extends it (a pin
  /// is never shortened by pinning again).
  void pin(const std::string& key, node_id owner, std::uint64_t session, std::int64_t until_ms);
  /// Lifts the pin `session` holds on `key` (detached pins for session 0);
  /// returns whether one was in force at `now_ms`.
  bool unpin(const std::string& key, std::uint64_t session, std::int64_t now_ms);
  /// Whether any pin on `key` is in force at `now_ms`.
  bool pinned(const std::string& key, std::int64_t now_ms) const;
  /// The key is gone: so are its pins. Returns whether it had any.
  bool forget_key(const std::string& key);
  /// `owner` says these are its live client sessions (sorted): pins of
  /// its other sessions lapse. Returns the keys whose pins changed.
  std::vector<std::string> keep_sessions(node_id owner, const std::vector<std::uint64_t>& live);
  /// `owner` is down: every session pin through it lapses.
  std::vector<std::string> drop_owner(node_id owner);
  /// Pins whose time ran out by `now_ms` are forgotten; returns the keys.
  std::vector<std::string> prune(std::int64_t now_ms);

  /// The pins on `key` (empty when none).
  std::vector<pin_hold> holds(const std::string& key) const;
  /// Puts back pins read from durable storage.
  void restore(const std::string& key, const std::vector<pin_hold>& holds);
  std::size_t keys() const noexcept { return by_key_.size(); }

 private:
  void erase_hold(const std::string& key, const pin_hold& h);
  std::map<std::string, std::vector<pin_hold>, std::less<>> by_key_;
  /// owner → session → keys it pins (session pins only).
  std::map<node_id, std::map<std::uint64_t, std::set<std::string>>> by_session_;
};

}  // namespace sluice::master
