// registry: the master's table of RPC names and the instances serving
// them (docs/rpc.md, "The registry"). Soft state: every owner sends the
// whole list of instances it serves (rpc_sync) after it registers and
// whenever the list changes, so a restarted master learns it again and
// nothing here is persisted. An instance lives while its client's session
// does (the owner's heartbeats list it) and its owner is up.
//
// Pure bookkeeping, deterministic (ordered by name, then client id).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/node_id.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice::master {

/// Instances the registry holds in all; a sync that would pass it is
/// refused with `overloaded`. A bound on master memory (an instance is
/// ~100 bytes), far above any sensible deployment.
inline constexpr std::size_t rpc_instances_max = 1 << 16;
/// Instances one lookup answers with at most, so a reply stays far below
/// the envelope limit (1 MiB by default).
inline constexpr std::size_t rpc_lookup_max = 4096;

class rpc_registry {
 public:
  /// Where an owner is reached while it is up; null when it is not.
  using owner_address = std::function<const std::string*(node_id owner)>;

  /// Replaces every instance of `owner` with `instances` (their owner set
  /// to `owner`). invalid_argument for a bad name or a name listed twice
  /// for one client; overloaded past rpc_instances_max. On failure the
  /// owner's previous instances stay.
  result<void> sync(node_id owner, std::vector<wire::rpc_instance> instances);

  /// Drops the instances of `owner` whose client is not in `live`
  /// (sorted): their sessions ended. Returns how many went.
  std::size_t keep_sessions(node_id owner, const std::vector<std::uint64_t>& live);

  /// Drops every instance of `owner` (it is down). Returns how many went.
  std::size_t drop_owner(node_id owner);

  /// Instances of `name` (or of every name starting with it), whose owner
  /// is up, with the owner's address; at most rpc_lookup_max, in (name,
  /// client) order.
  std::vector<wire::rpc_instance> lookup(std::string_view name, bool prefix, const owner_address& up) const;

  std::size_t size() const noexcept { return total_; }

 private:
  using instance_key = std::pair<std::string, node_id>;  // name, client
  std::size_t erase_where(node_id owner, const std::function<bool(const instance_key&)>& pred);

  std::map<instance_key, wire::rpc_instance> instances_;
  std::map<node_id, std::set<instance_key>> by_owner_;
  std::size_t total_ = 0;
};

/// Answers an RPC message sent to the master by `source` (whose role is
/// `source_role`): rpc_sync from owners, rpc_lookup from anyone.
result<wire::body> serve_registry(rpc_registry& registry, node_id source, role source_role, const wire::rpc& msg,
                                  const rpc_registry::owner_address& up);

}  // namespace sluice::master
