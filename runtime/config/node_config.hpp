// The configuration of one node, as read from its TOML file (docs/
// configuration.md is the reference; keep the two in step). Every key has
// a default, so a node runs with no file at all. One file format serves all
// roles: a role ignores the sections of other roles, because `sluice up`
// runs several roles from one file.
//
// TOML names are the field names, except that sizes drop the _bytes suffix
// because the unit is written in the value (`capacity = "1GiB"` sets
// owner.capacity_bytes). Durations are strings with a unit ("500ms").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace sluice {

using std::chrono::microseconds;

/// lru: least recently used first; none: never evict (a full pool
/// answers no_capacity).
enum class eviction_policy_kind : std::uint8_t { lru, none };

enum class placement_policy : std::uint8_t {
  local_first = 0,  ///< the owner the request came through, if it is up
  random = 1,       ///< any up owner, drawn from the master's rng
  most_free = 2,    ///< the up owner with the most free bytes
};

struct node_section {
  /// A human name for status output; empty → derived from the address.
  std::string name;
  /// Where the node accepts links ("host:port"); port 0 picks a free
  /// port. Empty: the role's usual address, 127.0.0.1:7071 for a master
  /// and 127.0.0.1:7070 for an owner.
  std::string listen;
  /// The address other nodes use to reach this one ("host:port"). Empty:
  /// the bound listen address; when that is a wildcard (0.0.0.0, [::]),
  /// the first non-loopback IPv4 address of this host with the bound port.
  std::string advertise;
  /// Seed of the node's rng; 0 → drawn from the OS at start. At most
  /// 2^63 - 1, the largest TOML integer.
  std::uint64_t seed = 0;
  /// Actor scheduler threads for this node, 0 to 64; 0: the CPUs the
  /// process may run on, at most 2 (scheduler_threads in node_host).
  std::uint32_t threads = 0;
};

struct wire_section {
  /// Largest Cap'n Proto envelope accepted in one frame; at least 64.
  std::uint64_t max_envelope_bytes = 1ULL << 20;
  /// Largest payload accepted in one frame.
  std::uint64_t max_payload_bytes = 1ULL << 30;
};

struct master_section {
  /// How often owners report to the master (the master tells them).
  microseconds heartbeat_interval{500'000};
  /// An owner silent this long is marked down; above heartbeat_interval.
  microseconds heartbeat_timeout{3'000'000};
  placement_policy placement = placement_policy::local_first;
  /// Where the master keeps its directory and membership (a SQLite
  /// database, master.db, in this directory); empty: in memory only, so a
  /// restarted master forgets the cluster.
  std::string data_dir;
  /// Each change is on disk (fsync) before it is acknowledged: it survives
  /// a crash of the machine. false: it survives a crash of the process.
  bool fsync = true;
  /// An MQ payload committed under `~mq/` that no message names (its
  /// producer died between writing it and appending the message) is
  /// freed once seen unnamed for this long.
  microseconds mq_orphan_grace{900'000'000};
  /// Repair (docs/concepts.md): a copy on an owner that has been down
  /// this long no longer counts, and the objects below their copy target
  /// get new copies. An owner that left, or came back without what it
  /// held, counts at once.
  microseconds repair_after{30'000'000};
  /// Bytes per second repair copies, all together (bursts of up to one
  /// second's worth).
  std::uint64_t repair_rate_bytes = 256ULL << 20;
  /// Repair copies in flight at once, at most.
  std::uint32_t repair_concurrency = 4;
};

/// The most repair copies [master] repair_concurrency allows in flight.
inline constexpr std::uint32_t repair_concurrency_max = 256;

/// How an owner's pool pages get their memory.
enum class prefault_policy : std::uint8_t {
  none = 0,        ///< on first touch
  background = 1,  ///< a thread touches every page while the pool is in use
};

/// GPU memory an owner contributes ([owner.gpu]; docs/gpu.md).
struct gpu_section {
  /// The section was written: the owner probes for CUDA devices at start
  /// and contributes a pool on each of `devices`, or says once why not.
  bool enabled = false;
  /// CUDA device ordinals, each at most once, 0 to gpu_ordinal_max.
  std::vector<std::uint32_t> devices{0};
  /// Device memory of each pool, allocated once at start.
  std::uint64_t capacity_bytes = 1ULL << 30;
};

/// The highest device ordinal [owner.gpu] devices accepts.
inline constexpr std::uint32_t gpu_ordinal_max = 63;
/// The smallest [owner.gpu] capacity. Why: below it a pool holds almost
/// nothing and its allocator's slabs would be tiny.
inline constexpr std::uint64_t gpu_capacity_bytes_min = 1ULL << 20;

struct owner_section {
  /// The master's address (host:port or inproc://name).
  std::string master;
  /// Memory the owner contributes for values.
  std::uint64_t capacity_bytes = 1ULL << 30;
  /// Largest single value accepted; at most wire.max_payload_bytes.
  std::uint64_t max_value_bytes = 256ULL << 20;
  /// Pause between attempts to reach the master after losing it.
  microseconds reconnect_interval{1'000'000};
  /// Where local clients reach this owner through shared memory: a Unix
  /// socket path, "@name" (an abstract socket), "auto" ("@sluice-" and
  /// the owner's TCP address), or "off".
  std::string shm = "auto";
  /// Size of each shared-memory segment of the pool (the pool is
  /// capacity_bytes in all).
  std::uint64_t segment_bytes = 1ULL << 30;
  /// Back the pool with huge pages (needs vm.nr_hugepages reserved).
  bool huge_pages = false;
  prefault_policy prefault = prefault_policy::none;
  /// Which committed values go first when the pool fills.
  eviction_policy_kind eviction = eviction_policy_kind::lru;
  /// Pool usage, in percent of capacity, above which the owner evicts
  /// (evict_high) and down to which it evicts (evict_low).
  std::uint32_t evict_high_percent = 95;
  std::uint32_t evict_low_percent = 85;
  /// A client silent this long has lost its session (its pins lapse), even
  /// if its connection looks open.
  microseconds client_timeout{10'000'000};
  /// Commit plain puts of local clients without asking the master, in key
  /// slots the master hands this owner (docs/concepts.md).
  bool fast_puts = true;
  /// How long the owner waits before it reports the puts it committed
  /// itself, once the thread that committed them (shared-memory or TCP)
  /// went idle or 256 of them wait (anything it asks the master sends
  /// them at once). What is committed meanwhile goes in the same report:
  /// a client that waits for each answer would otherwise cost the owner's
  /// actor and the master a turn per put.
  microseconds commit_report_delay{1000};
  /// A value read from another owner moves in pieces of this size, each
  /// received straight into its place in this owner's pool.
  std::uint64_t transfer_chunk_bytes = 4ULL << 20;
  /// Pieces of one transfer in flight at once (pipelining hides the round
  /// trip between pieces).
  std::uint32_t transfer_window = 4;
  /// A piece of such a transfer not answered within this long fails its
  /// holder: the read goes on from the value's next copy, within the
  /// read's own deadline.
  microseconds transfer_piece_timeout{2'000'000};
  /// A value read from another owner stays here as a copy registered with
  /// the master, so the next read of it on this host is local.
  bool cache_remote = true;
  /// Payloads of MQ messages that consumers reading through this owner
  /// will be handed next, fetched from other owners ahead of their reads
  /// (docs/mq.md), this many bytes at most at once; 0: none are.
  std::uint64_t mq_prefetch_bytes = 256ULL << 20;
  /// [owner.gpu]: GPU pools.
  gpu_section gpu{};
};

/// How an owner reaches other owners: its link manager's settings.
struct links_section {
  /// The paths to use, best first: "rdma", "tcp", "relay" (and "shm",
  /// which never applies between owners). Must name "tcp": relays and
  /// RDMA set-up start from direct TCP links.
  std::vector<std::string> order{"rdma", "tcp", "relay"};
  /// A request on a path other than the last one left waits this long for
  /// its answer; then the path is demoted and the next one is tried.
  microseconds timeout{1'000'000};
  /// A demoted path is tried again this long after it failed; each
  /// further failure doubles the wait, up to retry_max.
  microseconds retry{1'000'000};
  microseconds retry_max{30'000'000};
};

/// RDMA between owners (docs/rdma.md).
struct rdma_section {
  /// "auto": the first RDMA device with an active port, when there is
  /// one; "off": never; "soft": the software provider — a testing aid
  /// that emulates one-sided reads between owners on one host, never
  /// chosen unless named here.
  std::string device{"auto"};
  /// Testing aid, "soft" only: the n-th read this owner posts (counted
  /// from 1) completes with an error and puts its queue pair in the error
  /// state, as a failing RDMA link would; 0: none fails.
  std::uint64_t soft_fail_read = 0;
  /// Testing aid, "soft" only: each read completes this much later.
  microseconds soft_read_delay{0};
};

struct client_section {
  /// Deadline used when a call does not give one.
  microseconds request_timeout{5'000'000};
  /// How often a client tells its owner it is alive (its session lives on).
  microseconds keepalive{2'000'000};
};

struct log_section {
  /// trace, debug, info, warn, error, off
  std::string level = "info";
};

/// [s3]: the S3 gateway, for `sluice s3 --config` and `sluice up` (which
/// runs one beside its owner when `listen` is set). Flags given on the
/// command line win over these. See docs/s3.md.
struct s3_section {
  /// HOST:PORT to serve HTTP on. Empty: `sluice s3` listens on
  /// 127.0.0.1:9000, `sluice up` runs no gateway.
  std::string listen{};
  /// "NAME=DIR" each: DIR exported as bucket NAME.
  std::vector<std::string> buckets{};
  /// Subdirectories of this are buckets; CreateBucket makes new ones here.
  std::string root{};
  /// Accept unsigned requests from anyone (instead of access_key).
  bool anonymous{false};
  /// Requests must be signed (SigV4) with this key and secret (the secret
  /// may come from SLUICE_S3_SECRET_KEY instead).
  std::string access_key{};
  std::string secret_key{};
  /// Requests must be signed by a user of this sqlite file (`sluice s3
  /// user add`), within the user's grants.
  std::string users{};
  /// Also accept virtual-host addressing: BUCKET.DOMAIN.
  std::string domain{};
  std::string region{"us-east-1"};
  /// Keep objects' chunks in an owner's pool, so hot reads come from
  /// memory: the owner at `owner` (`sluice s3`), or the node's own
  /// (`sluice up`). false, or `sluice s3` with no owner: every read reads
  /// the file.
  bool cache{true};
  std::string owner{};
  std::uint64_t chunk_bytes{4 << 20};  ///< 64 KiB to 64 MiB
  std::int64_t threads{0};             ///< I/O threads, 1 to 64; 0: the CPUs it may run on, at most 4
  std::uint64_t connections_max{256};  ///< served at once, 1 to 65536
  microseconds request_timeout{900'000'000};
  microseconds idle_timeout{30'000'000};
  /// Buckets written back ("*": every bucket): a PUT is answered once its
  /// chunks are kept in the pool, and the file is written afterwards from
  /// `journal`. Needs the chunk cache's owner. See docs/s3.md.
  std::vector<std::string> write_back{};
  std::string journal{};
  std::uint64_t write_back_copies{1};  ///< copies of each chunk, 1 to 255
  microseconds flush_delay{0};         ///< a dirty object waits this long before its file is written
  std::uint64_t dirty_bytes_max{1ull << 30};
  std::uint64_t dirty_objects_max{100'000};
};

struct node_config {
  node_section node;
  wire_section wire;
  master_section master;
  owner_section owner;
  links_section links;
  rdma_section rdma;
  client_section client;
  log_section log;
  s3_section s3;
};

}  // namespace sluice
