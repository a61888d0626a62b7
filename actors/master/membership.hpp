// membership: the owners the master knows, their state and their last
// heartbeat. Pure bookkeeping, deterministic (ordered by node id).
//
// An owner is up from its registration until its link to the master is
// lost or it stays silent longer than the heartbeat timeout; then it is
// down and its objects are no longer handed out. Registering again (same
// id) brings it back up.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/common/endpoint.hpp"
#include "runtime/node_id.hpp"
#include "runtime/wire/messages.hpp"

namespace sluice::master {

struct member {
  node_id id;
  std::string name;
  std::string address;
  transport::link_id link = 0;
  wire::member_state state = wire::member_state::up;
  std::uint64_t capacity_bytes = 0;
  /// Drawn by the owner process when it started (wire::register_owner).
  std::uint64_t incarnation = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t reported_objects = 0;
  /// The owner evicts values to make room (as it registered).
  bool evicts = false;
  /// Values the owner evicted since it started, as last reported.
  std::uint64_t evictions = 0;
  /// Puts that left their version with fewer copies than asked, as last
  /// reported.
  std::uint64_t under_replicated_puts = 0;
  clock_time last_heartbeat;
  std::string down_reason;
  /// Down because it said it was stopping (wire::leave), not because it
  /// went silent: its copies stop counting at once (repair).
  bool left = false;
  /// How the owner reaches other owners, as last reported (not persisted).
  std::vector<wire::link_state> links;
};

/// Bound on members: registrations beyond it are refused (`overloaded`).
inline constexpr std::size_t max_members = 4096;

class membership {
 public:
  /// Registers (or re-registers) an owner and marks it up. False when the
  /// member table is full and `id` is new.
  bool join(node_id id, std::string name, std::string address, transport::link_id link,
            std::uint64_t capacity_bytes, std::uint64_t incarnation, clock_time now, bool evicts = false);

  /// Puts back a member read from durable storage: down, as if its last
  /// heartbeat arrived at `now`, until it registers again.
  void restore(member m, clock_time now);

  /// Forgets a member entirely (it was replaced).
  void forget(node_id id) { members_.erase(id); }

  /// Records a heartbeat. False when `id` is unknown or down (the owner
  /// must register again).
  bool heartbeat(node_id id, std::uint64_t used_bytes, std::uint64_t objects, clock_time now,
                 std::uint64_t evictions = 0, std::vector<wire::link_state> links = {},
                 std::uint64_t under_replicated_puts = 0);

  /// Marks a member down because it said it is stopping; false when it
  /// was not up.
  bool leave(node_id id);

  /// Marks `id` down for `reason`; false when it was not up.
  bool mark_down(node_id id, std::string reason);

  /// Marks down the member reached over `link`; returns it if it was up.
  std::optional<node_id> link_lost(transport::link_id link);

  /// Marks down every up member silent for longer than `timeout`.
  std::vector<node_id> detect_failures(clock_time now, clock_duration timeout);

  const member* find(node_id id) const;
  bool is_up(node_id id) const;
  std::vector<node_id> up_owners() const;
  const std::map<node_id, member>& all() const noexcept { return members_; }

 private:
  std::map<node_id, member> members_;
};

}  // namespace sluice::master
