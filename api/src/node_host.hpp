// node_host: builds and runs one node — its transports, its actor system
// and its role actor — and tears it down in the right order. This is where
// the real implementations are chosen (tcp, inproc, the memory store); the
// simulator builds nodes its own way from the same role actors.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include "actors/client/client_rpc.hpp"
#include "actors/common/actor_sink.hpp"
#include "actors/owner/fast_path.hpp"
#include "actors/owner/object_store.hpp"
#include "actors/owner/rpc_routes.hpp"
#include "runtime/config/node_config.hpp"
#include "runtime/node_id.hpp"
#include "runtime/storage/dir_lock.hpp"
#include "runtime/storage/durable_store.hpp"
#include "transports/inproc/inproc_transport.hpp"
#include "transports/network.hpp"
#include "transports/rdma/rdma_engine.hpp"

namespace sluice::gpu {
class device;
}  // namespace sluice::gpu

namespace sluice::transport {
class shm_client;
class tcp_transport;
}  // namespace sluice::transport

namespace sluice {

struct gpu_report;

/// The actor system of one or more nodes of a process, with its config.
/// Nodes that share one hand actor messages to each other without waking
/// another system's threads. The first node that starts on an empty one
/// makes its system; the last node to go takes it down.
struct node_runtime {
  node_runtime();
  ~node_runtime();
  node_runtime(const node_runtime&) = delete;
  node_runtime& operator=(const node_runtime&) = delete;
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
};

/// The scheduler threads of a node configured with `[node] threads =
/// configured`: that many, or for 0 the CPUs this thread may run on, at
/// most 2. A role is one actor, and the master and the owner of one
/// process are two: more workers than that, or than CPUs, only hand
/// messages from thread to thread, each hand-off a wake-up.
std::uint32_t scheduler_threads(std::uint32_t configured);

/// Where a master or owner listens when its config does not say.
inline constexpr const char* default_master_listen = "127.0.0.1:7071";
inline constexpr const char* default_owner_listen = "127.0.0.1:7070";

/// Where a node sits in its process: `hub` (optional) lets it reach and be
/// reached by nodes of the same process without sockets; `inproc_name` is
/// its name there. REQUIRES: `hub` outlives the node.
struct node_placement {
  transport::inproc_hub* hub = nullptr;
  std::string inproc_name;
  /// Optional: an actor system shared with the other nodes of the process
  /// that name the same one (see node_runtime).
  std::shared_ptr<node_runtime> runtime;
};

class node_host {
 public:
  using placement = node_placement;

  static result<std::unique_ptr<node_host>> start_master(const node_config& cfg, placement where = {});
  static result<std::unique_ptr<node_host>> start_owner(const node_config& cfg, placement where = {});
  /// A client node talking to the owner at the first of
  /// `owner_addresses` that accepts a link.
  static result<std::unique_ptr<node_host>> start_client(const node_config& cfg,
                                                         std::vector<std::string> owner_addresses,
                                                         placement where = {});

  /// Stops the role actor, the transports and the actor system.
  ~node_host();
  node_host(const node_host&) = delete;
  node_host& operator=(const node_host&) = delete;

  node_id id() const noexcept { return id_; }
  /// Where the node accepts TCP links (host:port); empty for clients.
  const std::string& address() const noexcept { return address_; }
  /// Masters: the directory their state is kept in; empty: in memory.
  const std::string& data_dir() const noexcept { return data_dir_; }
  /// Where other nodes reach it (differs from address() for wildcards).
  const std::string& advertised() const noexcept { return advertise_; }
  /// Where local clients reach an owner through shared memory; empty when
  /// it has none.
  const std::string& shm_address() const noexcept { return shm_address_; }
  const caf::actor& actor() const noexcept { return actor_; }
  /// A client node's shared-memory transport (null for other roles).
  transport::shm_client* shm() const noexcept { return shm_client_; }
  /// Where a client node's actor hands the RPC calls that arrive on its
  /// link (null for other roles).
  const std::shared_ptr<rpc_served_slot>& served() const noexcept { return served_; }
  /// An owner's GPU pools, or why it has none, as its actor answers.
  /// Errors: invalid_argument for other roles; unavailable when the actor
  /// does not answer.
  result<gpu_report> gpu_pools() const;

 private:
  node_host() = default;
  static result<std::unique_ptr<node_host>> prepare(const node_config& cfg, role r,
                                                    placement where);
  result<void> listen(const node_config& cfg, role r, const placement& where);
  void make_system(std::uint32_t threads, const placement& where);
  caf::actor_system& system() const;
  result<std::shared_ptr<object_store>> open_pool(const node_config& cfg);
  /// The owner's rdma path, when its configuration and the machine allow
  /// one (says which, once, in the log); null otherwise.
  transport::rdma_path* open_rdma(const node_config& cfg);

  node_id id_;
  role role_ = role::client;
  std::string address_;
  std::string advertise_;
  std::string shm_address_;
  transport::shm_client* shm_client_ = nullptr;  // owned by net_
  transport::tcp_transport* tcp_ = nullptr;       // owned by net_
  std::shared_ptr<fast_index> index_;             // owners: the fast path
  std::shared_ptr<rpc_routes> routes_;            // owners: rpc, shared with the poller's relay
  std::shared_ptr<rpc_served_slot> served_;       // clients: calls served on their link
  transport::transport_limits limits_;
  /// Masters keeping state: the lock on their data directory, held while
  /// the store is open (declared first, so released last).
  std::unique_ptr<dir_lock> dir_lock_;
  std::string data_dir_;
  /// The master's durable state (null: none); outlives the actor system.
  std::unique_ptr<durable_store> store_;
  std::unique_ptr<actor_sink> sink_;
  std::unique_ptr<transport::network> net_;
  std::shared_ptr<node_runtime> runtime_;
  caf::actor actor_;
  /// Owners: the pool's segments (mapped while the store lives), and the
  /// rdma path over them (null: none). The path outlives the actor system
  /// (the owner actor uses it) but its poller stops before the sink goes.
  std::vector<std::span<std::byte>> pool_segments_;
  std::unique_ptr<transport::rdma::rdma_engine> rdma_;
  /// Owners with [owner.gpu]: the GPU runtime their pools live on; goes
  /// after the actor system, whose owner actor frees the pools.
  std::unique_ptr<gpu::device> gpu_;
};

}  // namespace sluice
