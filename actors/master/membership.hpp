// membership: the owners the master knows, their state and their last
// heartbeat. Pure bookkeeping, deterministic (ordered by node id).
//
// An owner is up from its registration until its own link to the master
// is lost and nothing arrives from it by any path for a short grace, or it
// stays silent longer than the heartbeat timeout; then it is down and its
// objects are no longer handed out. Registering again (same id) brings it
// back up.
//
// An owner that cannot reach the master directly reaches it through
// another owner (a relay): its route is then the relay's link and the
// relay's id. Every request an owner sends moves its route to the link it
// came on, so the master answers and tells it things the way it last
// came. Losing a relay's link only forgets the route of the owners that
// came through it: they are down once their heartbeats stop arriving by
// any path, not before.
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
  /// The link its requests last came on (0: none now) ...
  transport::link_id link = 0;
  /// ... and the owner that relayed them (0: its own link to the master).
  node_id via;
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
  /// Its own link to the master was lost: down at this time unless a
  /// request of it arrives before, by any path.
  std::optional<clock_time> lost_link_by;
  /// How the owner reaches other owners, as last reported (not persisted).
  std::vector<wire::link_state> links;
};

/// Bound on members: registrations beyond it are refused (`overloaded`).
inline constexpr std::size_t max_members = 4096;

class membership {
 public:
  /// Registers (or re-registers) an owner and marks it up. False when the
  /// member table is full and `id` is new.
  /// `via`: the owner that relayed the registration (0: none).
  bool join(node_id id, std::string name, std::string address, transport::link_id link,
            std::uint64_t capacity_bytes, std::uint64_t incarnation, clock_time now, bool evicts = false,
            node_id via = {});

  /// A request of `id` came on `link`, relayed by `via` (0: none): the
  /// member is alive and reached that way from now on. Nothing for an
  /// unknown id.
  void route(node_id id, transport::link_id link, node_id via);

  /// Puts back a member read from durable storage: down, as if its last
  /// heartbeat arrived at `now`, until it registers again.
  void restore(member m, clock_time now);

  /// Forgets a member entirely (it was replaced).
  void forget(node_id id) {
    members_.erase(id);
    changed();
  }

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

  /// `link` is gone. An up member whose own link it was has no route now,
  /// and is down at `now + grace` unless a request of it arrives by then
  /// (detect_failures); it is returned. Members relayed over it have no
  /// route until their next request.
  std::vector<node_id> link_lost(transport::link_id link, clock_time now, clock_duration grace);

  /// Marks down every up member silent for longer than `timeout`, or whose
  /// own link was lost and that was not heard from within its grace.
  std::vector<node_id> detect_failures(clock_time now, clock_duration timeout);

  const member* find(node_id id) const;
  bool is_up(node_id id) const;
  std::vector<node_id> up_owners() const;
  /// Up to `limit` up owners other than `asker`, with their names and
  /// addresses: those after it in id order, wrapping round — the relays
  /// `asker` may use to reach the master (each owner gets its own share).
  std::vector<wire::owner_address> relays_for(node_id asker, std::size_t limit) const;
  /// Changes whenever that list does (an owner comes up, goes down, or
  /// moves): owners ask for the list only when it changed.
  std::uint64_t generation() const noexcept { return generation_; }
  /// Starts the count at `base`: a master started afresh counts from a
  /// random value, so an owner's generation from an older master is never
  /// taken for this one's.
  void set_generation(std::uint64_t base) { generation_ = base == 0 ? 1 : base; }
  const std::map<node_id, member>& all() const noexcept { return members_; }

 private:
  void changed() { generation_ = generation_ + 1 == 0 ? 1 : generation_ + 1; }

  std::map<node_id, member> members_;
  std::uint64_t generation_ = 1;
};

}  // namespace sluice::master
