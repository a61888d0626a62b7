// What `status()` reports about a cluster.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

struct member_info {
  std::string id;       ///< node id, 16 hex digits
  std::string role;     ///< "owner"
  std::string name;
  std::string address;  ///< where other nodes reach it
  bool up = false;
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
  std::chrono::microseconds since_heartbeat{0};
};

struct cluster_status {
  std::string master_id;
  std::uint64_t object_count = 0;
  std::vector<member_info> members;
};

}  // namespace sluice
