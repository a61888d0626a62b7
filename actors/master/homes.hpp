// homes: which owner the master handed the writes of each key slot, and
// how far it applied the puts those owners committed on their own.
//
// An owner that is the only holder of every key of a slot may be handed
// the slot's writes (its "home"): it then commits puts of those keys
// itself, with versions from a block the master gave it, answers the
// client at once and reports the commits to the master afterwards
// (owner_commits, numbered per owner). Before anyone else reads or writes
// a key of such a slot, the master has the home flush its reports (a
// barrier) or give the slot back (an invalidation), and waits until it
// applied the reports up to the sequence number the home answered with.
// docs/concepts.md, "Owner-committed puts", tells the whole protocol.
//
// Pure bookkeeping, deterministic: no I/O, no clock of its own.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "actors/common/endpoint.hpp"
#include "runtime/keys.hpp"
#include "runtime/node_id.hpp"
#include "sluice/result.hpp"

namespace sluice::master {

/// After the master took a slot back for another owner's sake, it hands
/// it out again only this much later, so a slot used from two owners
/// stops moving back and forth.
inline constexpr std::chrono::seconds home_cooldown{1};
/// Versions handed to an owner at once.
inline constexpr std::uint64_t owner_version_block = 1 << 12;
/// Bound on work waiting for an owner's reports, per owner.
inline constexpr std::size_t waits_per_owner_max = 1 << 16;

class homes {
 public:
  /// The owner handed the writes of `slot`, if any.
  std::optional<node_id> home_of(key_slot slot) const;
  /// Whether `slot` may be handed to `owner` now, as far as earlier hand
  /// outs go (the directory decides whether the slot's keys allow it).
  bool may_grant(key_slot slot, node_id owner, clock_time now) const;
  /// Hands `slot` to `owner`.
  void grant(key_slot slot, node_id owner);
  /// Takes `slot` back; with `cooldown`, it is not handed out again until
  /// home_cooldown from `now`.
  void release(key_slot slot, clock_time now, bool cooldown);
  /// Takes back every slot `owner` holds; returns them.
  std::vector<key_slot> release_all(node_id owner);
  /// The owners that hold at least one slot, sorted.
  std::vector<node_id> holders() const;
  std::size_t count_of(node_id owner) const;
  /// Numbers grants and invalidations: an owner ignores a grant numbered
  /// below an invalidation it saw (the two may cross on the way).
  std::uint64_t next_generation() noexcept { return ++generation_; }
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  std::vector<node_id> home_ = std::vector<node_id>(key_slots);  // node_id{}: none
  std::vector<clock_time> cooldown_until_ = std::vector<clock_time>(key_slots);
  std::uint64_t generation_ = 0;
};

/// Per owner: the sequence number through which its own commits were
/// applied, and work waiting for more of them.
class owner_commit_log {
 public:
  using waiter = std::function<void(result<void>)>;

  std::uint64_t applied(node_id owner) const;
  void set_applied(node_id owner, std::uint64_t seq);
  /// Runs `then` once the owner's commits through `seq` are applied (at
  /// once when they are), or with `timeout` at `deadline`; `overloaded`
  /// when too much waits already.
  void wait(node_id owner, std::uint64_t seq, clock_time deadline, waiter then);
  /// The waiters the owner's applied commits now satisfy, taken out.
  std::vector<waiter> ready(node_id owner);
  /// Waiters whose deadline passed by `now`, taken out.
  std::vector<waiter> expired(clock_time now);
  /// Forgets the owner (it lost what it held): its waiters are returned.
  std::vector<waiter> forget(node_id owner);
  /// The owners with a recorded sequence number.
  const std::map<node_id, std::uint64_t>& all() const noexcept { return applied_; }

 private:
  struct pending_wait {
    std::uint64_t seq;
    clock_time deadline;
    waiter then;
  };
  std::map<node_id, std::uint64_t> applied_;
  std::map<node_id, std::multimap<std::uint64_t, pending_wait>> waits_;
};

}  // namespace sluice::master
