// What `status()` reports about a cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

/// One way an owner reaches another owner.
struct path_info {
  std::string kind;    ///< "rdma", "tcp" or "relay"
  std::string health;  ///< "untried", "up" or "down"
  std::uint32_t failures = 0;  ///< failures in a row
  std::chrono::microseconds retry_in{0};  ///< down: until it is tried again
  std::string last_error;
  std::uint64_t bytes = 0;  ///< payload bytes the path carried (values read, sent, stored)
};

/// How an owner reaches one other owner it talked to.
struct link_info {
  std::string peer_id;    ///< node id, 16 hex digits
  std::string peer_name;
  std::string active;     ///< the path traffic takes now; empty: none
  std::string via_id;     ///< the owner that relayed to the peer last; empty: none
  std::vector<path_info> paths;  ///< in the owner's order of preference
};

/// What an owner holds and has done, as the master knows it.
struct member_usage {
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;    ///< committed bytes it holds
  std::uint64_t object_count = 0;  ///< committed objects it holds
  std::uint64_t evictions = 0;     ///< values it evicted since it started (as last reported)
  /// What the owner itself last reported holding: committed versions and
  /// also versions in flight, and anything the master does not list.
  std::uint64_t stored_bytes = 0;
  std::uint64_t stored_objects = 0;
  /// Key slots whose plain puts the owner commits itself, without asking
  /// the master (docs/concepts.md, "Owner-committed puts").
  std::uint32_t home_slots = 0;
  /// Puts it committed itself that the master has applied, since it
  /// started.
  std::uint64_t own_commits = 0;
  /// Puts placed through this owner that left their version with fewer
  /// copies than they asked for — acknowledged under min_replicas, or
  /// failed after the first copy committed — since it started (as last
  /// reported). Their missing copies are under-replicated.
  std::uint64_t under_replicated_puts = 0;
};

struct member_info : member_usage {
  std::string id;       ///< node id, 16 hex digits
  std::string role;     ///< "owner"
  std::string name;
  std::string address;  ///< where other nodes reach it
  bool up = false;
  std::chrono::microseconds since_heartbeat{0};
  /// Owners: how it reaches the other owners it talked to, as it last
  /// reported.
  std::vector<link_info> links;
  /// The owner its requests to the master come through when it cannot
  /// reach the master directly (node id); empty: its own link.
  std::string master_via_id;
};

/// Objects with fewer copies than their puts asked for, and the copies
/// the master has made to restore them (docs/concepts.md, "Repair").
struct repair_status {
  /// Objects below their copy target that have a live copy to copy from,
  /// as the master last counted (waiting or being copied).
  std::uint64_t under_replicated = 0;
  /// Objects below their copy target whose every copy is on owners
  /// counted lost: nothing to copy from until one comes back.
  std::uint64_t without_live_copy = 0;
  std::uint64_t copies_in_flight = 0;
  /// Since the master started.
  std::uint64_t copies_made = 0;
  std::uint64_t bytes_copied = 0;
  std::uint64_t copies_failed = 0;
};

struct cluster_status {
  std::string master_id;
  std::uint64_t object_count = 0;
  std::vector<member_info> members;
  repair_status repair{};
};

}  // namespace sluice
