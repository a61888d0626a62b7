// The messages nodes exchange, as plain C++ values. On the wire each one is
// a member of the Envelope union in sluice.capnp; codec.hpp converts
// between the two at the decode boundary, so role code never handles Cap'n
// Proto readers (or their exceptions) directly.
//
// Adding a message: add it to sluice.capnp with fresh field numbers, add a
// struct here and to `body`, and teach its family's codec_<family>.cpp both
// directions (and read_body in codec.cpp which family reads it).
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "runtime/node_id.hpp"
#include "sluice/error.hpp"
#include "sluice/status.hpp"

namespace sluice::wire {

/// The protocol version this build speaks, carried in every frame header
/// and in the hello. Bumped on incompatible changes only.
inline constexpr std::uint16_t protocol_version = 1;

// --- links -------------------------------------------------------------

/// First message on every link, in both directions.
struct hello {
  role sender_role = role::unknown;
  std::uint16_t version = protocol_version;
  std::string name;            ///< human name of the sender
  std::string listen_address;  ///< where the sender accepts links ("" if none)
};

/// The reply to a request that failed.
struct error_reply {
  errc code = errc::internal;
  std::string message;
};

/// The reply to a request that succeeded with nothing to say.
struct ok_reply {};

/// Asks the peer to answer ok_reply: proves the link works end to end.
struct ping {};

// --- membership (owner <-> master) -------------------------------------

struct register_owner {
  std::string name;
  std::string address;  ///< where other owners reach this owner
  std::uint64_t capacity_bytes = 0;
  /// Drawn at random when the owner starts: another incarnation than the
  /// master recorded means the owner restarted and lost what it held.
  std::uint64_t incarnation = 0;
  /// The owner evicts values to make room when its pool is full.
  bool evicts = false;
  /// The first of the owner's own commits (owner_commits) no master
  /// acknowledged: those before it a master applied.
  std::uint64_t commits_from = 1;
};

struct register_owner_reply {
  std::uint64_t heartbeat_interval_us = 0;
  /// How long after sending a heartbeat the master answered the owner may
  /// answer gets from its own fast index (0: not at all). The master
  /// declares a silent owner down only after this has surely run out.
  std::uint64_t lease_us = 0;
};

/// One way an owner reaches a peer (its link manager's view).
struct path_state {
  std::string kind;    ///< "rdma", "tcp", "relay"
  std::string health;  ///< "untried", "up", "down"
  std::uint32_t failures = 0;  ///< in a row
  std::uint64_t retry_in_us = 0;  ///< down: until the next retry
  std::string last_error;
  std::uint64_t bytes = 0;  ///< payload bytes the path carried
};

/// How an owner reaches one other owner.
struct link_state {
  node_id peer;
  std::string peer_name;
  std::string active;  ///< the path traffic takes now ("": none)
  node_id via;         ///< the owner that relayed to the peer last
  std::vector<path_state> paths;  ///< in the owner's order of preference
};

struct heartbeat {
  std::uint64_t used_bytes = 0;
  std::uint64_t object_count = 0;
  std::uint64_t evictions = 0;  ///< since the owner started
  /// Node ids of the clients connected to the owner now: their sessions
  /// live; pins of other sessions through this owner lapse.
  std::vector<std::uint64_t> sessions;
  /// How the owner reaches the other owners it talked to.
  std::vector<link_state> links;
  /// Puts placed through the owner that left their version with fewer
  /// copies than asked, since the owner started.
  std::uint64_t under_replicated_puts{};
  /// The generation of the master's list of up owners the owner holds
  /// (heartbeat_reply); 0: none.
  std::uint64_t owners_seen{};
};

/// An up owner, as the master lists the owners to each other: the relays
/// each may use.
struct owner_address {
  node_id id;
  std::string name;
  std::string address;
  friend bool operator==(const owner_address&, const owner_address&) = default;
};

/// Owner → master: this owner is stopping; mark it down now rather than
/// when its heartbeats stop.
struct leave {};

struct heartbeat_reply {
  /// False when the master does not know the sender (it restarted, or it
  /// declared the sender down): the owner registers again.
  bool known = false;
  /// The generation of the master's list of up owners; `owners` holds the
  /// owner's share of it (the relays it may use to reach the master) when
  /// the heartbeat named another generation, else nothing.
  std::uint64_t owners_generation = 0;
  std::vector<owner_address> owners;
};

// --- object directory (owner <-> master) -------------------------------

struct key_version {
  std::string key;
  std::uint64_t version = 0;
  friend bool operator==(const key_version&, const key_version&) = default;
  friend auto operator<=>(const key_version&, const key_version&) = default;
};

struct replica {
  node_id owner;
  std::string address;
};

/// Asks the master where a new version of `key` goes.
/// What a put requires of the key's committed version when it is placed
/// and again when it commits; otherwise it fails with `conflict`.
struct put_condition {
  bool if_absent = false;         ///< the key has no committed version
  std::uint64_t if_version = 0;   ///< non-zero: the committed version is this one
  bool any() const noexcept { return if_absent || if_version != 0; }
  friend bool operator==(const put_condition&, const put_condition&) = default;
};

struct place {
  std::string key;
  std::uint64_t size = 0;
  node_id preferred;  ///< the owner the put came through
  put_condition condition;
  std::uint64_t ttl_ms = 0;  ///< the version expires this long after its commit; 0: never
  std::uint32_t replicas = 1;  ///< copies on distinct owners
  std::string prefer_owner;    ///< an owner's name: place there when it can take it
  /// Fewer owners than `replicas` can take it: place on as many as can
  /// when that is at least this many. 0: all `replicas` or none.
  std::uint32_t min_replicas{};
};

struct place_reply {
  std::uint64_t version = 0;
  replica target;
  std::vector<replica> extra;  ///< owners for the further copies
};

/// The holder stored `version` of `key`: make it visible.
struct commit {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
};

/// The pending `version` of `key` will never be committed.
struct abort_put {
  std::string key;
  std::uint64_t version = 0;
};

struct locate {
  std::string key;
};

struct locate_reply {
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  std::vector<replica> replicas;  ///< up holders only
};

struct remove_key {
  std::string key;
  std::uint64_t if_version = 0;  ///< non-zero: only while this version is committed
};

struct remove_key_reply {
  bool existed = false;
};

/// Master → holder (a request): stop answering gets of `key` from your
/// fast index — another owner is about to hold its newest version — and
/// give up the key's slot if you were handed it. Answered with flushed.
struct invalidate {
  std::string key;
  /// The master's grant number when it sent this: grants numbered up to
  /// it that arrive later are stale.
  std::uint64_t generation = 0;
};

/// Master → owner (a request): send the commits you made yourself so far;
/// answered with flushed.
struct barrier {};

/// The answer to invalidate and barrier: the owner's commits through
/// sequence number `seq` are on their way to the master.
struct flushed {
  std::uint64_t seq = 0;
};

/// Owner → master: hand this owner the writes of `slots` (see keys.hpp),
/// and a fresh block of versions when `versions` is set (or slots are
/// granted).
struct claim {
  std::vector<std::uint16_t> slots;
  bool versions = false;
};

struct claim_reply {
  std::vector<std::uint16_t> granted;
  std::uint64_t block_first = 0;  ///< versions [block_first, block_first + block_count)
  std::uint64_t block_count = 0;
  std::uint64_t generation = 0;   ///< see invalidate::generation
};

/// One put an owner committed itself.
struct owner_commit {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  /// The version this one replaced in the owner's store, dropped there
  /// already (the master need not ask for it); 0: none.
  std::uint64_t replaced = 0;
  friend bool operator==(const owner_commit&, const owner_commit&) = default;
};

/// Owner → master: the puts it committed itself, numbered first_seq,
/// first_seq + 1, ... in order.
struct owner_commits {
  std::uint64_t first_seq = 0;
  std::vector<owner_commit> entries;
};

struct owner_commits_reply {
  std::vector<key_version> refused;  ///< not accepted: free them
};

/// The answer to a commit: whether the version became the key's current
/// one (false: a newer version, or a removal, came first).
struct commit_reply {
  bool current = false;
};

/// Master → holder: free this version; nothing refers to it any more.
struct drop {
  std::string key;
  std::uint64_t version = 0;
};

// --- data (owner <-> owner) --------------------------------------------

/// Asks a holder for the bytes of `version` of `key`; the reply carries
/// them as the frame payload.
struct fetch {
  std::string key;
  std::uint64_t version = 0;
};

struct fetch_reply {
  std::uint64_t version = 0;
};

/// Asks a holder for bytes [offset, offset + length) of `version` of
/// `key`; answered with fetch_reply, the bytes as the frame payload. A
/// large value moves as several of these in flight at once, each received
/// straight into its place in the reader's pool region.
struct fetch_range {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  /// Answer with rdma_lease (where the bytes lie, for one-sided reads)
  /// instead of the bytes.
  bool rdma = false;
};

/// A region of an owner's pool: segment index, offset, length.
struct pool_region {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

/// One end of an RDMA queue pair.
struct rdma_endpoint {
  std::uint32_t qp_number = 0;
  std::uint32_t packet_sequence = 0;
  std::uint16_t lid = 0;
  std::string gid;  ///< 16 bytes
};

/// A pool segment registered with the sender's RDMA device.
struct rdma_segment {
  std::uint32_t segment = 0;
  std::uint64_t address = 0;
  std::uint64_t length = 0;
  std::uint32_t rkey = 0;
};

/// Owner → owner, over their TCP link: set up a queue pair through which
/// the sender reads the receiver's pool. Answered with rdma_connect_reply.
struct rdma_connect {
  std::string provider;  ///< "verbs" or "soft": both ends must use the same
  rdma_endpoint endpoint;
};

struct rdma_connect_reply {
  std::string provider;
  rdma_endpoint endpoint;
  std::vector<rdma_segment> segments;  ///< where the reader may read
};

/// The answer to a fetch_range with rdma set: where the bytes lie in the
/// holder's pool. The holder keeps them there until rdma_release names
/// the lease, or lease_us passed.
struct rdma_lease {
  std::uint64_t lease = 0;
  std::uint64_t version = 0;
  pool_region where;
  std::uint64_t address = 0;
  std::uint32_t rkey = 0;
  std::uint64_t lease_us = 0;
};

/// Reader → holder: done with the lease (a notification).
struct rdma_release {
  std::uint64_t lease = 0;
};

/// Stores the frame payload as `version` of `key` on the receiving owner,
/// which commits it with the master before replying.
struct store {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t ttl_ms = 0;
  /// An extra copy: registered with add_replica, not committed.
  bool replica = false;
};

// --- kv (client <-> owner) ---------------------------------------------

/// Put the frame payload under `key`.
struct kv_put {
  std::string key;
  put_condition condition;
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
  /// The put succeeds once this many copies are committed (1 to
  /// replicas); 0: every one of `replicas`.
  std::uint32_t min_replicas{};
};

/// On the wire a kvPutReply (one copy) or, with copies > 1, a
/// kvPutCopies; a kvPutReply decodes with copies = 1.
struct kv_put_reply {
  std::uint64_t version = 0;
  std::uint32_t copies = 1;  ///< copies committed on distinct owners
};

struct kv_get {
  std::string key;
};

/// The value rides as the frame payload.
struct kv_get_reply {
  std::uint64_t version = 0;
};

struct kv_remove {
  std::string key;
  std::uint64_t if_version = 0;  ///< non-zero: only while this version is committed
};

struct kv_remove_reply {
  bool existed = false;
};

struct kv_exists {
  std::string key;
};

struct kv_exists_reply {
  bool exists = false;
};

/// Client → its local owner: set aside `size` bytes of the pool for a new
/// value of `key`, which the client writes in place.
struct kv_reserve {
  std::string key;
  std::uint64_t size = 0;
  put_condition condition;  ///< checked when the reservation commits
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
  std::uint32_t min_replicas{};  ///< as in kv_put
};

struct kv_reserve_reply {
  std::uint64_t reservation = 0;
  pool_region where;
};

/// The client wrote the reservation: make it the key's new version.
/// Answered with kv_put_reply.
struct kv_commit {
  std::uint64_t reservation = 0;
};

/// The client gives a reservation up (one-way).
struct kv_abort {
  std::uint64_t reservation = 0;
};

// --- listing (client -> owner -> master) ---------------------------------

/// Committed keys starting with `prefix`, in bytewise order, after
/// `start_after`, at most `limit` of them.
struct list_keys {
  std::string prefix;
  std::string start_after;
  std::uint32_t limit = 0;
};

struct key_info {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  friend bool operator==(const key_info&, const key_info&) = default;
};

struct list_keys_reply {
  std::vector<key_info> keys;
  bool more = false;  ///< keys after the last one listed match too
};

/// How many committed keys start with `prefix`.
struct count_keys {
  std::string prefix;
};

struct count_keys_reply {
  std::uint64_t count = 0;
};

// --- eviction (holder -> master) -----------------------------------------

/// The holder wants to evict `version` of `key`, its current version: the
/// master removes the key unless it moved on or is pinned.
struct evict {
  std::string key;
  std::uint64_t version = 0;
};

struct evict_reply {
  bool evicted = false;  ///< false: keep it (pinned, or no longer current)
};

// --- pins (client -> owner -> master) --------------------------------------

/// Keep `key` from eviction for `ttl_ms` (0: until unpinned).
struct pin {
  std::string key;
  std::uint64_t ttl_ms = 0;
  /// Client → owner: non-zero binds the pin to the client's session.
  /// Owner → master: the client's node id, or 0 (detached).
  std::uint64_t session = 0;
};

struct pin_reply {
  std::uint64_t version = 0;  ///< the key's committed version when pinned
};

struct unpin {
  std::string key;
  std::uint64_t session = 0;  ///< as in pin
};

struct unpin_reply {
  bool was_pinned = false;
};

/// Holder of an extra copy → master: register me as one more holder of
/// `version` of `key`.
struct add_replica {
  std::string key;
  std::uint64_t version = 0;
};

struct add_replica_reply {
  bool added = false;  ///< false: the key moved on; free the copy
};

/// Master → an owner (repair): make a copy of `version` of `key` here,
/// read from `holders` in turn, and register it with add_replica;
/// answered ok_reply once it is registered.
struct repair_copy {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  std::vector<replica> holders;
};

// --- reconciliation (owner -> master, after each registration) -------------

/// One page of what an owner holds, in key order: the versions of the keys
/// after `after` ("" : from the first) up to and including the last key
/// listed, or to the end when `final`.
struct inventory {
  std::string after;
  std::vector<key_version> entries;
  bool final = false;
};

/// The versions of the page the master does not list for the owner: free them.
struct inventory_reply {
  std::vector<key_version> unknown;
};

// --- rpc (docs/rpc.md): one Envelope member, `rpc`, carries them all ------

/// One client serving one name.
struct rpc_instance {
  std::string name;
  node_id client;
  std::string client_name;
  node_id owner;              ///< the owner the client is attached to
  std::string owner_address;  ///< where owners reach it (filled in by the master)
  std::uint32_t max_concurrent = 0;
  bool stream = false;        ///< served as a stream of results
  friend bool operator==(const rpc_instance&, const rpc_instance&) = default;
};

/// Client → owner, on the link that is to receive the calls.
struct rpc_serve {
  std::string name;
  std::uint32_t max_concurrent = 0;
  bool stream = false;  ///< the handler answers with a stream of results
};

struct rpc_unserve {
  std::string name;
};

/// Owner → master: every instance this owner serves now (replaces what
/// the master held for it).
struct rpc_sync {
  std::vector<rpc_instance> instances;
};

/// Instances of `name`, or of every name starting with it.
struct rpc_lookup {
  std::string name;
  bool prefix = false;
};

struct rpc_instances {
  std::vector<rpc_instance> instances;
};

/// How a call to any instance picks one. Pinned (on the wire).
enum class rpc_routing : std::uint8_t { round_robin = 0, least_outstanding = 1 };

/// A call. The payload is the arguments (an encoded dict) unless
/// args_buffer names a buffer of the caller's owner holding them.
struct rpc_call {
  std::string method;
  node_id target;  ///< 0: any live instance
  rpc_routing routing = rpc_routing::round_robin;
  std::uint64_t args_buffer = 0;
  /// The calling client, as owners pass the call on (0 from the caller
  /// itself: the envelope's source is the caller).
  node_id caller;
};

/// The answer to a call: the result (an encoded dict) is the payload, or
/// the buffer `result_buffer` of the handler's owner.
struct rpc_reply {
  std::uint64_t result_buffer = 0;
};

/// One-way: the caller gave up the call it sent as request `call`.
struct rpc_cancel {
  std::uint64_t call = 0;
};

/// Client → its owner: pool memory for a call's arguments or a result.
struct rpc_buffer {
  std::uint64_t size = 0;
};

struct rpc_buffer_reply {
  std::uint64_t buffer = 0;
  pool_region where;
};

/// One-way: the client gives back a buffer it did not send.
struct rpc_release {
  std::uint64_t buffer = 0;
};

using rpc_body = std::variant<rpc_serve, rpc_unserve, rpc_sync, rpc_lookup, rpc_instances, rpc_call, rpc_reply,
                              rpc_cancel, rpc_buffer, rpc_buffer_reply, rpc_release>;

struct rpc {
  rpc_body body;
};

// --- mq (docs/mq.md): one Envelope member, `mq`, carries them all ----------
//
// Client → its owner → the master. The owner stamps `session` with the
// client's node id (it vouches for who the client is), as it does for
// pins. Payloads are data-plane objects the producer put first; messages
// name them by key and the master never sees their bytes.

/// What an append to a full partition does. Pinned (on the wire).
enum class mq_full : std::uint8_t { block = 0, reject = 1, drop_oldest = 2 };
/// Where a new group starts reading. Pinned (on the wire).
enum class mq_start_at : std::uint8_t { earliest = 0, latest = 1 };

struct mq_topic_config {
  std::uint32_t partitions = 1;
  std::int64_t max_age_ms = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t max_messages = 0;
  mq_full full = mq_full::block;
  std::uint32_t payload_replicas = 1;
  std::uint64_t max_message_bytes = 0;
  std::int64_t dedupe_window_ms = 0;
  std::uint64_t dedupe_entries_max = 0;
  std::string dead_letter{};  ///< empty: none
  friend bool operator==(const mq_topic_config&, const mq_topic_config&) = default;
};

struct mq_create_topic {
  std::string topic;
  mq_topic_config config;
};
/// The reply to mq_create_topic: false when it existed with this config.
struct mq_topic_created {
  bool created = false;
};
struct mq_delete_topic {
  std::string topic;
};
struct mq_list_topics {};

struct mq_partition_info {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  std::uint64_t bytes = 0;
  friend bool operator==(const mq_partition_info&, const mq_partition_info&) = default;
};
struct mq_topic_info {
  std::string topic;
  mq_topic_config config;
  std::vector<mq_partition_info> partitions;
  friend bool operator==(const mq_topic_info&, const mq_topic_info&) = default;
};
/// The reply to mq_list_topics, in name order.
struct mq_topics {
  std::vector<mq_topic_info> topics;
};

/// One message a producer hands in.
struct mq_message {
  std::string payload;      ///< the payload's object key (committed before)
  std::uint64_t size_bytes = 0;
  std::string message_id;   ///< empty: none (no dedupe)
  std::string key;          ///< partition key; empty: none
  bool has_partition = false;
  std::uint32_t partition = 0;  ///< with has_partition: wins over `key`
  friend bool operator==(const mq_message&, const mq_message&) = default;
};
struct mq_produce {
  std::string topic;
  std::uint64_t session = 0;  ///< the producer (stamped by the owner)
  std::vector<mq_message> messages;
};
/// One message's outcome, in the order they were sent.
struct mq_produced_one {
  errc code = errc::ok;     ///< ok: appended (or a duplicate)
  std::string message;      ///< why not, when code is not ok
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  bool duplicate = false;   ///< the dedupe window had it: nothing appended
  friend bool operator==(const mq_produced_one&, const mq_produced_one&) = default;
};
struct mq_produced {
  std::vector<mq_produced_one> results;
};

struct mq_group_config {
  std::vector<std::string> topics;
  std::int64_t ack_timeout_ms = 0;
  std::uint32_t max_deliveries = 0;
  std::uint32_t prefetch = 0;
  mq_start_at start = mq_start_at::earliest;
  friend bool operator==(const mq_group_config&, const mq_group_config&) = default;
};
/// Joins (or renews the lease in) a group; creates the group when new.
struct mq_join {
  std::string group;
  std::uint64_t session = 0;
  mq_group_config config;
  std::uint64_t lease_ms = 0;
};
struct mq_partition_ref {
  std::string topic;
  std::uint32_t partition = 0;
  friend bool operator==(const mq_partition_ref&, const mq_partition_ref&) = default;
};
/// The reply to mq_join: the partitions the member holds now.
struct mq_joined {
  std::vector<mq_partition_ref> assigned;
};
struct mq_leave {
  std::string group;
  std::uint64_t session = 0;
};
/// Pinned (on the wire).
enum class mq_settle_kind : std::uint8_t { ack = 0, ack_upto = 1, nack = 2 };
struct mq_settle {
  std::string group;
  std::uint64_t session = 0;
  mq_settle_kind kind = mq_settle_kind::ack;
  mq_partition_ref partition;
  std::uint64_t offset = 0;
  std::uint64_t generation = 0;  ///< ack, nack: the delivery's
  std::int64_t delay_ms = 0;     ///< nack: when to deliver it again
  /// ack_upto: settles only what polls up to this one (mq_poll::poll_seq)
  /// delivered, never what a poll whose answer was lost did. 0: any.
  std::uint64_t answered_seq = 0;
  friend bool operator==(const mq_settle&, const mq_settle&) = default;
};
/// Settles a poll carries before it, at most (mq_poll::settles).
inline constexpr std::size_t mq_poll_settles_max = 1024;
/// Deliveries for the member; renews its lease. Waits up to `wait_ms`
/// (and the request's deadline) for messages when there are none.
struct mq_poll {
  std::string group;
  std::uint64_t session = 0;
  std::uint32_t max_messages = 0;
  std::uint64_t max_bytes = 0;
  std::uint64_t wait_ms = 0;
  /// The member counts its polls (1, 2, ...) and names the last one whose
  /// answer reached it: what the polls in between delivered never arrived
  /// and goes out again at once. 0: not counted.
  std::uint64_t poll_seq = 0;
  std::uint64_t answered_seq = 0;
  /// Acks and nacks applied before the poll, in order, as one mq_settle
  /// each would be (their group and session are the poll's). The first
  /// that fails fails the poll, which then polls nothing; those before it
  /// stand. At most mq_poll_settles_max.
  std::vector<mq_settle> settles{};
};
struct mq_delivery {
  mq_partition_ref partition;
  std::uint64_t offset = 0;
  std::string payload;      ///< the payload's object key
  std::uint64_t size_bytes = 0;
  std::uint32_t delivery_count = 0;
  std::uint64_t generation = 0;
  std::int64_t ack_deadline_ms = 0;
  std::string message_id{};   ///< empty: none
  friend bool operator==(const mq_delivery&, const mq_delivery&) = default;
};
struct mq_polled {
  std::vector<mq_delivery> deliveries;
};
/// The reply to mq_settle: how many deliveries it settled.
struct mq_settled {
  std::uint64_t count = 0;
};
struct mq_seek {
  std::string group;
  mq_partition_ref partition;
  bool by_time = false;
  std::uint64_t offset = 0;  ///< without by_time
  std::int64_t time_ms = 0;  ///< with by_time
};
struct mq_group_status {
  std::string group;  ///< empty: every group
};
struct mq_partition_lag {
  std::string group;
  mq_partition_ref partition;
  std::uint64_t member = 0;  ///< 0: no member holds it
  std::uint64_t generation = 0;
  std::uint64_t committed = 0;
  std::uint64_t next = 0;
  std::uint64_t in_flight = 0;
  std::uint64_t lag_messages = 0;
  std::uint64_t lag_bytes = 0;
  friend bool operator==(const mq_partition_lag&, const mq_partition_lag&) = default;
};
struct mq_group_status_reply {
  std::vector<mq_partition_lag> partitions;
};
struct mq_delete_group {
  std::string group;
};
/// Master -> the owner of a consumer's host: fetch this payload from its
/// holders into the pool and keep it for the member's read, which is
/// likely soon. Answered ok once it is held here.
struct mq_prefetch {
  std::string payload;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  std::vector<replica> holders;
};

using mq_body = std::variant<mq_create_topic, mq_topic_created, mq_delete_topic, mq_list_topics, mq_topics,
                             mq_produce, mq_produced, mq_join, mq_joined, mq_leave, mq_poll, mq_polled,
                             mq_settle, mq_settled, mq_seek, mq_group_status, mq_group_status_reply,
                             mq_delete_group, mq_prefetch>;

struct mq {
  mq_body body;
};

// --- status --------------------------------------------------------------

enum class member_state : std::uint8_t { up = 0, down = 1 };

/// A member as the master reports it. Its counters are the public
/// member_usage itself, so that a client hands them on in one piece.
struct member_status : member_usage {
  node_id id;
  role member_role = role::unknown;
  std::string name;
  std::string address;
  member_state state = member_state::up;
  std::uint64_t last_heartbeat_age_us = 0;
  std::vector<link_state> links;     ///< as the owner last reported
  node_id master_via;                ///< the owner relaying its requests to the master; 0: none
};

struct cluster_status {};

struct cluster_status_reply {
  node_id master;
  std::uint64_t object_count = 0;
  std::vector<member_status> members;
  sluice::repair_status repair{};
};

// --- the envelope ----------------------------------------------------------

using body = std::variant<hello, error_reply, ok_reply,
                          register_owner, register_owner_reply, heartbeat, heartbeat_reply,
                          place, place_reply, commit, abort_put, locate, locate_reply,
                          remove_key, remove_key_reply, drop,
                          fetch, fetch_reply, store,
                          kv_put, kv_put_reply, kv_get, kv_get_reply, kv_remove,
                          kv_remove_reply, kv_exists, kv_exists_reply,
                          cluster_status, cluster_status_reply, ping, leave,
                          kv_reserve, kv_reserve_reply, kv_commit, kv_abort,
                          invalidate, commit_reply, list_keys, list_keys_reply,
                          count_keys, count_keys_reply, evict, evict_reply, pin, pin_reply,
                          unpin, unpin_reply, add_replica, add_replica_reply, inventory,
                          inventory_reply, claim, claim_reply, owner_commits, owner_commits_reply,
                          barrier, flushed, fetch_range, rpc, rdma_connect,
                          rdma_connect_reply, rdma_lease, rdma_release, mq, repair_copy>;

struct envelope {
  /// Chosen by the sender; non-zero when the sender expects one reply.
  std::uint64_t request_id = 0;
  /// Non-zero on a reply: the request_id it answers.
  std::uint64_t reply_to = 0;
  node_id source;
  node_id target;  ///< 0: whoever is at the other end of the link
  /// Time left until the request's deadline when the frame was sent, in
  /// microseconds (0: none). Relative, so clocks of nodes need not agree.
  std::uint64_t deadline_us = 0;
  /// Forwarding hops taken so far (relay); bounded by max_hops.
  std::uint8_t hops = 0;
  /// Owner → master: follows the owner's own commits through this
  /// sequence number (owner_commits); 0: none.
  std::uint64_t after = 0;
  wire::body body;
};

/// A decoded frame: the envelope and the payload bytes that came with it.
struct message {
  envelope env;
  shared_bytes payload;
};

/// The message kind's name as it appears in logs ("kv_get", "rpc_call", ...).
std::string_view body_name(const body& b) noexcept;
std::string_view rpc_body_name(const rpc_body& b) noexcept;
std::string_view mq_body_name(const mq_body& b) noexcept;

}  // namespace sluice::wire
