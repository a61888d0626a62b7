// Running Sluice nodes inside your own process.
//
//   sluice::node::start_master({.listen = "0.0.0.0:7071"})
//   sluice::node::start_owner({.master = "10.0.0.1:7071"})
//   sluice::local_cluster::start()      // master + owner, what `sluice up` runs
//
// Each node is its own actor system with its own threads; nodes in one
// process still talk only through transports (in-process ones where they
// can), exactly as they would across machines.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/result.hpp"

namespace sluice {

struct node_options {
  /// A TOML configuration file (docs/configuration.md); empty: defaults.
  std::string config_file;
  /// TOML text, used when config_file is empty.
  std::string config_text;
  /// Overrides [node] listen when not empty ("host:port", port 0 = any).
  std::string listen;
  /// Owners only: overrides [owner] master when not empty.
  std::string master;
  /// Overrides [node] advertise when not empty: the "host:port" other
  /// nodes use to reach this one.
  std::string advertise;
  /// Masters only: overrides [master] data_dir when not empty — where the
  /// master keeps the directory and membership across restarts.
  std::string data_dir;
  /// Masters only: where the master keeps its state when neither
  /// data_dir nor [master] data_dir names a directory. Empty (the
  /// embedding default): it keeps its state in memory only. The `sluice
  /// master` launcher fills this in (docs/configuration.md, "Where the
  /// master keeps its state").
  std::string default_data_dir{};
  /// Masters only: keep nothing on disk, whatever the fields above and
  /// [master] data_dir say.
  bool in_memory = false;
};

/// One GPU pool an owner contributes ([owner.gpu], docs/gpu.md).
struct gpu_pool_info {
  std::uint32_t device = 0;  ///< CUDA device ordinal
  std::string name{};        ///< the device's name, e.g. "NVIDIA H200"
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;
  bool ipc = false;  ///< the device can share the pool with other processes
};

class node {
 public:
  static result<std::unique_ptr<node>> start_master(const node_options& options = {});
  static result<std::unique_ptr<node>> start_owner(const node_options& options = {});

  /// Stops the node: its links close and its threads end.
  ~node();
  node(const node&) = delete;
  node& operator=(const node&) = delete;

  /// Where the node accepts links ("host:port", the port resolved).
  const std::string& address() const noexcept;
  /// Where other nodes reach it: address() unless that is a wildcard
  /// (0.0.0.0) or [node] advertise says otherwise.
  const std::string& advertised_address() const noexcept;
  /// The node's id, 16 hex digits.
  std::string id() const;
  /// Masters: the directory the master keeps its state in, across
  /// restarts. Empty: it keeps its state in memory only (and owners).
  const std::string& data_dir() const noexcept;
  /// Owners: the GPU pools this owner contributes, one per [owner.gpu]
  /// device. Errors: unavailable when it runs without GPU pools, with the
  /// reason it logged at start ("no GPU pools on this owner: no CUDA
  /// driver", "... no CUDA device", "... no CUDA in this build", "... no
  /// [owner.gpu] section in this owner's configuration", an allocation
  /// that failed); invalid_argument on a master.
  result<std::vector<gpu_pool_info>> gpu_pools() const;

  struct impl;
  explicit node(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

struct local_cluster_options {
  std::string config_file;
  std::string config_text;
  /// Where the owner accepts clients and other owners. Empty: [node]
  /// listen from the config, else `default_listen`.
  std::string listen;
  /// Where the master accepts owners of other hosts. Empty:
  /// `default_master_listen`.
  std::string master_listen;
  /// Overrides [master] data_dir when not empty: where the master keeps
  /// its state across restarts. With neither, the cluster keeps its state
  /// in memory only (so that many may run at once without sharing one).
  std::string data_dir{};
  /// Addresses used when nothing above says; port 0 picks a free port.
  std::string default_listen = "127.0.0.1:0";
  std::string default_master_listen = "127.0.0.1:0";
};

/// A master and an owner in this process, each its own node, the owner
/// reaching the master without sockets.
class local_cluster {
 public:
  static result<std::unique_ptr<local_cluster>> start(const local_cluster_options& options = {});

  ~local_cluster();
  local_cluster(const local_cluster&) = delete;
  local_cluster& operator=(const local_cluster&) = delete;

  /// Where clients connect over TCP (the owner's address).
  const std::string& client_address() const noexcept;
  /// Where owners of other hosts reach the master.
  const std::string& master_address() const noexcept;
  /// The directory the master keeps its state in; empty: in memory only.
  const std::string& data_dir() const noexcept;

  /// A client in this process, talking to the owner without sockets.
  result<std::unique_ptr<client>> connect(client_options options = {}) const;

  struct impl;
  explicit local_cluster(std::unique_ptr<impl> state);

 private:
  result<void> wait_ready() const;
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
