// The owner actor's state and the helpers its source files share. Internal
// to actors/owner: the role's interface is owner.hpp.
#pragma once

#include <caf/stateful_actor.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/owner/eviction.hpp"
#include "actors/owner/owner.hpp"
#include "actors/owner/rpc_routes.hpp"

namespace sluice::owner_detail {

/// Deadline of control requests the owner makes on its own behalf.
constexpr std::chrono::seconds control_timeout{5};
/// A get whose version was superseded before it could be read (an
/// overwrite raced it) looks the key up again, at most this many times;
/// then it fails with `aborted` (retry), never `not_found`: the key exists.
constexpr int max_get_attempts = 16;
/// Reservations one client may hold at once; more answer `overloaded`.
constexpr std::size_t reservations_per_link_max = 1024;

/// An RPC call the owner actor passed on: where a cancel of it goes.
struct forwarded_rpc {
  transport::link_id link = 0;
  std::uint64_t request = 0;
};

/// Pool memory a local client writes a new value into, until it commits.
struct reservation {
  transport::link_id link;
  std::string key;
  shared_bytes bytes;
  wire::put_condition condition;
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
};

struct owner_state {
  std::optional<endpoint> ep;
  owner_section cfg;
  std::shared_ptr<object_store> store;
  std::shared_ptr<fast_index> index;  // never null (an unused one without a fast path)
  /// The fast index may answer until then (the master's lease).
  clock_time lease_until{};
  clock_duration lease{};
  /// The master this owner last registered with.
  node_id master_id;
  std::uint64_t incarnation = 0;
  /// The latest local change (commit or remove) of each key in flight: a
  /// commit's answer may publish into the fast index only if no later
  /// change of that key started since (its answer may never come).
  std::unordered_map<std::string, std::uint64_t> latest_change;
  std::uint64_t next_change = 1;
  std::optional<transport::link_id> master_link;
  bool registered = false;
  bool reconnect_armed = false;
  /// A warning about the master being unreachable was logged since the
  /// last registration.
  bool master_warned = false;
  clock_duration heartbeat_interval = std::chrono::milliseconds{500};
  /// Links this owner opened to other owners, until they are greeted.
  std::map<node_id, transport::link_id> dialing;
  /// Reservations of local clients, by id; dropped with their link.
  std::map<std::uint64_t, reservation> reservations;
  std::uint64_t next_reservation = 1;

  // --- eviction (owner_evict.cpp) ---
  /// Null when the owner never evicts.
  std::unique_ptr<eviction_policy> policy;
  /// An eviction run is going on, freeing room down to evict_target bytes.
  bool evicting = false;
  std::uint64_t evict_target = 0;
  /// Candidates looked at during this run: bounds a run that finds nothing
  /// it may evict.
  std::uint64_t evict_examined = 0;
  /// Run when the current eviction run ends.
  std::vector<std::function<void()>> evict_waiters;
  /// Values this owner evicted since it started.
  std::uint64_t evictions = 0;

  // --- rpc (owner_rpc.cpp) ---
  /// Never null; shared with the shm poller's relay.
  std::shared_ptr<rpc_routes> routes;
  /// Calls this actor passed on, by the caller's link and request id.
  std::map<std::pair<transport::link_id, std::uint64_t>, forwarded_rpc> rpc_forwarded;
  /// Lookups at the master in flight, by name, with what waits for them.
  std::map<std::string, std::vector<std::function<void(bool)>>> rpc_lookups;
  /// The master must hear this owner's instances again (rpc_sync).
  bool rpc_sync_due = false;
  bool rpc_sync_in_flight = false;
  static inline const char* name = "sluice.owner";
};

using self_ptr = owner_actor::stateful_pointer<owner_state>;


/// Asks the master; fails at once with `unavailable` while this owner is
/// not registered.
void ask_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply);

/// The link to another owner, opening one when needed.
result<transport::link_id> owner_link(self_ptr self, const wire::replica& r);

// --- replicas (owner_replicas.cpp) ---

/// Stores `value` as an extra copy of `version` of `key` (which its holder
/// committed) on each of `owners`, each registering its copy with the
/// master; `done` gets how many copies were made.
void copy_to_replicas(self_ptr self, const std::string& key, std::uint64_t version, shared_bytes value,
                      std::uint64_t ttl_ms, const std::vector<wire::replica>& owners, clock_time deadline,
                      std::function<void(std::size_t)> done);
/// Stores an extra copy here and registers it with the master; frees it
/// again when the master answers that the key moved on.
void store_replica(self_ptr self, const std::string& key, std::uint64_t version, shared_bytes value,
                   clock_time deadline, std::function<void(result<void>)> done, bool made_room = false);

// --- eviction (owner_evict.cpp) ---

/// `version` of `key`, `size` bytes, became the key's committed version
/// here: it may be evicted from now on. Starts evicting when the pool is
/// above its high mark.
void evictable(self_ptr self, const std::string& key, std::uint64_t version, std::uint64_t size);
/// `key` was read here.
void used(self_ptr self, const std::string& key);
/// `version` of `key` is gone from here.
void gone(self_ptr self, const std::string& key, std::uint64_t version);
/// Evicts until `size` more bytes would fit under the low mark (or
/// nothing more may go), then runs `then`; at once when the owner never
/// evicts.
void make_room(self_ptr self, std::uint64_t size, std::function<void()> then);

}  // namespace sluice::owner_detail
