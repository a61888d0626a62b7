// rpc_routes: what an owner knows about RPC instances and calls, shared by
// the owner actor and its shm poller (docs/rpc.md, "How a call travels").
//
//  - local instances: the clients of this owner serving a name, each on
//    the link it asked to receive calls on (the owner actor writes them);
//  - what the master said about a name's other instances, for a while
//    (rpc_lookup_ttl);
//  - routing: which instance a call goes to, by one rule for both paths
//    (the actor's and the poller's), with round-robin positions and the
//    calls outstanding per instance;
//  - relays: calls the poller passed from one local client to another
//    without the actor, until their answer passes back;
//  - buffers: pool memory given to clients for large arguments or results.
//
// Thread-safe (one mutex; every operation is short). Plain code with no
// I/O and no clock of its own: time is passed in (the actor clock in the
// actor, the steady clock on the poller, which are one clock in a real
// node; virtual time in the simulator).
//
// Invariants (asserted):
//   1. local_count_ is the number of local instances of all names, at
//      most rpc_local_instances_max;
//   2. each relay in flight has one entry in relay_of_caller_, which names
//      it, and nothing else is there (the two maps have one size); at
//      most rpc_relays_max relays; relay ids carry rpc_relay_bit, and the
//      counter behind them never reaches it;
//   3. outstanding_ holds counts above 0 only: a count that reaches 0 goes;
//   4. buffers_per_link_ counts each link's buffers, at most
//      rpc_buffers_per_link_max, and its counts add up to the buffers
//      held; buffer ids are never 0 (0 on the wire means none);
//   5. a route names one instance, local or remote, picked among at
//      least one candidate.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/common/endpoint.hpp"
#include "runtime/memory/buffer.hpp"
#include "runtime/node_id.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"
#include "transports/transport.hpp"

namespace sluice {

/// How long an owner trusts what the master said about a name's
/// instances. Why 1 s: a crashed remote instance is skipped at once anyway
/// (its owner answers not_found and the call moves on); a new remote
/// instance is picked up within a second; names in use are refreshed
/// before they expire, so calls seldom wait for the master.
inline constexpr std::chrono::milliseconds rpc_lookup_ttl{1000};
/// Instances served through one owner; more serve calls answer
/// `overloaded` (registry memory and sync size stay bounded).
inline constexpr std::size_t rpc_local_instances_max = 4096;
/// Calls the poller relays at once; beyond it calls take the owner
/// actor's path, which has its own bound.
inline constexpr std::size_t rpc_relays_max = 1 << 16;
/// Pool buffers one link holds at once (written, not yet sent).
inline constexpr std::size_t rpc_buffers_per_link_max = 64;
/// Relay ids carry this bit, so the answer to a relayed call is never
/// taken for the answer to one of the owner actor's own requests (whose
/// ids count up from 1 and never get near it).
inline constexpr std::uint64_t rpc_relay_bit = std::uint64_t{1} << 63;

/// Where a call goes.
struct rpc_route {
  enum class kind : std::uint8_t {
    local,   ///< a client of this owner: `link`
    remote,  ///< a client of another owner: `owner` at `owner_address`
    lookup,  ///< ask the master first: what this owner knows is stale
    none,    ///< no live instance
  };
  kind what = kind::none;
  node_id client;
  transport::link_id link = 0;
  node_id owner;
  std::string owner_address;
};

/// A call the poller relayed from one local client to another.
struct rpc_relay {
  std::uint64_t id = 0;  ///< the request id the handler saw (has rpc_relay_bit)
  transport::link_id caller_link = 0;
  std::uint64_t caller_request = 0;
  node_id caller;
  transport::link_id handler_link = 0;
  node_id client;  ///< the instance's client
  std::string method;
  std::chrono::steady_clock::time_point deadline;
};

class rpc_routes {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  struct local_instance {
    node_id client;
    std::string client_name;
    transport::link_id link = 0;
    std::uint32_t max_concurrent = 0;
    bool stream = false;  ///< served as a stream of results
    /// The client's session lives (see set_live); stale instances take no
    /// calls to "any".
    bool live = true;
  };

  /// `shares_pool(link)`: the peer on `link` maps this owner's pool (a
  /// shared-memory client), so large payloads go to it through the pool.
  explicit rpc_routes(std::function<bool(transport::link_id)> shares_pool = {});

  // --- local instances (the owner actor) ---------------------------------

  /// Adds or replaces `instance.client`'s instance of `name`.
  result<void> serve(const std::string& name, local_instance instance);
  /// False when `client` did not serve `name` here.
  bool unserve(const std::string& name, node_id client);
  /// The live local instances, owner and address left empty, in (name,
  /// client) order: what this owner tells the master.
  std::vector<wire::rpc_instance> live_instances() const;
  /// Marks each local instance live when its client is in `live_clients`
  /// (sorted). True when any changed.
  bool set_live(const std::vector<std::uint64_t>& live_clients);

  // --- what the master said (the owner actor) ----------------------------

  /// Remembers `instances` of `name` (those of other owners) until
  /// `expires`. `self`: this owner, whose own instances are known better.
  void learn(const std::string& name, const std::vector<wire::rpc_instance>& instances, node_id self,
             time_point expires);
  /// `client` no longer serves `name` at its owner: skip it until the
  /// next lookup.
  void forget_remote(const std::string& name, node_id client);
  /// Names routed to since the last call whose knowledge expires before
  /// `before`: worth a lookup now, so calls need not wait for one.
  std::vector<std::string> to_refresh(time_point before);

  // --- routing (both) ------------------------------------------------------

  enum class mode : std::uint8_t {
    any,         ///< local and remote instances; `lookup` when stale
    local_only,  ///< only this owner's clients (calls from other owners)
    relay,       ///< only its clients on links that share the pool (the poller)
    stale_ok,    ///< the master cannot be asked: use what is known, however old
  };
  /// Picks the instance for a call to `name` (`target` 0: any live one,
  /// by `routing`) and counts the call outstanding on it until
  /// finished(). Nothing is counted or advanced unless the route is local
  /// or remote — and, in local_only and relay modes, unless it is local.
  rpc_route route(std::string_view name, node_id target, wire::rpc_routing routing, time_point now, mode m);
  /// A call routed to `client` finished.
  void finished(node_id client);

  // --- relays (the poller) -------------------------------------------------

  /// True the first time request `id` arrives on `link`: a call delivered
  /// twice is relayed once (as the endpoint serves a request once).
  bool first_time(transport::link_id link, std::uint64_t id);

  /// Records a relay (its id assigned here); nothing when rpc_relays_max
  /// are in flight.
  std::optional<std::uint64_t> add_relay(rpc_relay r);
  /// Takes the relay `id` whose answer arrived on `from`.
  std::optional<rpc_relay> take_relay(std::uint64_t id, transport::link_id from);
  /// Takes the relay of the caller's request `request` on `caller_link`.
  std::optional<rpc_relay> take_relay_of_caller(transport::link_id caller_link, std::uint64_t request);
  std::size_t relay_count() const;
  /// Names this owner keeps anything about (bounded by the instances
  /// served here and those the master listed).
  std::size_t name_count() const;

  // --- buffers -------------------------------------------------------------

  /// Keeps `bytes` (pool memory) for `client`, given on `link`; returns
  /// its id. overloaded past rpc_buffers_per_link_max.
  result<std::uint64_t> add_buffer(node_id client, transport::link_id link, shared_bytes bytes);
  /// Takes buffer `id`, which `client` must hold.
  std::optional<shared_bytes> take_buffer(std::uint64_t id, node_id client);

  // --- links and time (the owner actor) -------------------------------------

  struct link_gone {
    std::vector<std::string> names;     ///< local instances that went with the link
    std::vector<rpc_relay> unanswered;  ///< relays to a handler on the link
    std::vector<rpc_relay> abandoned;   ///< relays from a caller on the link
  };
  /// Forgets what lived on `link`.
  link_gone link_down(transport::link_id link);
  /// Takes the relays whose deadline passed before `now`.
  std::vector<rpc_relay> expired(time_point now);

  bool shares_pool(transport::link_id link) const { return shares_pool_ && shares_pool_(link); }

 private:
  struct remote_instance {
    node_id client;
    node_id owner;
    std::string owner_address;
  };
  struct name_state {
    std::map<node_id, local_instance> local;
    std::vector<remote_instance> remote;  ///< by client id
    time_point known_until{};             ///< remote is known until then
    std::uint64_t next = 0;               ///< round-robin position
    bool used = false;                    ///< routed to since to_refresh() last looked
  };
  struct candidate {
    node_id client;
    const local_instance* local = nullptr;
    const remote_instance* remote = nullptr;
  };

  std::vector<candidate> candidates(const name_state& n, mode m) const;
  std::size_t pick(const std::vector<candidate>& c, wire::rpc_routing routing, std::uint64_t start) const;
  /// Every live local instance of `n` is on a link that shares the pool:
  /// the poller may route calls to any instance of it.
  bool all_share_pool(const name_state& n) const;
  rpc_route to_route(const candidate& c);
  /// Checks invariants 1 to 4 against the maps, all of them: for rare
  /// paths only (a link going down). REQUIRES: mutex_ held.
  void check_counts() const;

  std::function<bool(transport::link_id)> shares_pool_;
  mutable std::mutex mutex_;
  std::map<std::string, name_state, std::less<>> names_;
  std::size_t local_count_ = 0;
  std::map<node_id, std::uint32_t> outstanding_;  // by client
  std::map<std::uint64_t, rpc_relay> relays_;
  std::map<transport::link_id, replay_window> seen_;  // calls relayed, by caller link
  std::map<std::pair<transport::link_id, std::uint64_t>, std::uint64_t> relay_of_caller_;
  std::uint64_t next_relay_ = 1;
  struct buffer {
    node_id client;
    transport::link_id link = 0;
    shared_bytes bytes;
  };
  std::map<std::uint64_t, buffer> buffers_;
  std::map<transport::link_id, std::size_t> buffers_per_link_;
  std::uint64_t next_buffer_ = 1;
};

}  // namespace sluice
