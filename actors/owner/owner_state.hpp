// The owner actor's state and the helpers its source files share. Internal
// to actors/owner: the role's interface is owner.hpp.
#pragma once

#include <caf/stateful_actor.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/owner/eviction.hpp"
#include "actors/owner/owner.hpp"
#include "actors/owner/owner_rdma.hpp"
#include "transports/link_manager.hpp"
#include "actors/owner/rpc_routes.hpp"
#include "runtime/gpu/device_pool.hpp"

namespace sluice::owner_detail {

/// Deadline of control requests the owner makes on its own behalf.
constexpr std::chrono::seconds control_timeout{5};
/// The key of the master's paths in owner_state::master_paths.
constexpr std::uint64_t master_peer = 1;

/// A get whose version was superseded before it could be read (an
/// overwrite raced it) looks the key up again, at most this many times;
/// then it fails with `aborted` (retry), never `not_found`: the key exists.
constexpr int max_get_attempts = 16;
/// Reservations one client may hold at once; more answer `overloaded`.
constexpr std::size_t reservations_per_link_max = 1024;
/// Commits reported in one message, at most.
constexpr std::size_t commits_per_message = 4096;
/// How long the master has to acknowledge a report before it is sent again.
constexpr std::chrono::milliseconds commits_timeout{500};
/// Reports that failed go again this much later, not at once: a send that
/// fails at once would otherwise fail again at once, forever.
constexpr std::chrono::milliseconds commits_retry{20};
/// Below this many versions left in its block, the owner asks for a new one.
constexpr std::uint64_t versions_low = 1024;
/// Puts that wait for a claim's answer, at most; more go through the master.
constexpr std::size_t claim_waiters_max = 4096;
/// Slots asked for in one claim, at most.
constexpr std::size_t claim_slots_max = 256;
/// A slot the master would not hand over is not asked for again sooner.
constexpr std::chrono::seconds claim_retry{1};

/// Another owner, as this one knows it: from locate replies, placements
/// and the master's member list.
struct owner_entry {
  std::string name;
  std::string address;
};

/// A frame a relay holds while it asks the master where its target is.
struct parked_frame {
  transport::link_id from;
  wire::message msg;
};

/// An RPC call the owner actor passed on: where a cancel of it goes.
struct forwarded_rpc {
  transport::link_id link = 0;
  std::uint64_t request = 0;
};

/// Pool memory a local client writes a new value into, until it commits.
struct reservation {
  /// The link it was made on: it goes back when that link goes down.
  transport::link_id link;
  /// The client that made it: any of its links may commit or abort it
  /// (each thread of a client has a link of its own).
  node_id client{};
  std::string key;
  shared_bytes bytes;
  wire::put_condition condition;
  std::uint64_t ttl_ms = 0;
  std::uint32_t replicas = 1;
  std::string prefer_owner;
  std::uint32_t min_replicas{};  ///< 0: all `replicas` (wire::kv_put)
};

/// Payloads prefetched for MQ consumers at once, at most (besides
/// [owner] mq_prefetch, their bytes); the master asks for more only as
/// consumers take them.
constexpr std::size_t prefetched_max = 1024;
/// Reads of one payload waiting for its prefetch to land, at most; more
/// read it themselves.
constexpr std::size_t prefetch_readers_max = 64;
/// A prefetched payload no read took within this long is let go.
constexpr std::chrono::seconds prefetch_keep{30};

/// A message payload fetched here ahead of a consumer's read
/// (owner_prefetch.cpp).
struct prefetched_payload {
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  /// The bytes arrived (`bytes`); until then reads wait in `readers`.
  bool here = false;
  shared_bytes bytes;
  clock_time until{};  ///< let go unread then (once here)
  std::vector<std::function<void(result<shared_bytes>)>> readers;
};

/// The owner's GPU pools ([owner.gpu]; owner_gpu.cpp).
struct owner_gpu {
  /// Null: this owner was given no GPU runtime.
  gpu::device* device = nullptr;
  /// One per [owner.gpu] device, opened at start; empty when unavailable.
  gpu::device_pools pools{};
  /// Why there are no pools ("" when there are).
  std::string unavailable{};
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
  /// This owner's own link to the master ([owner] master), while it has one.
  std::optional<transport::link_id> master_link;
  /// How the master is reached: over master_link (tcp) or through another
  /// owner (relay), each path's health under the key master_peer.
  transport::link_manager master_paths;
  /// Counts registrations begun: answers to an older one are stale.
  std::uint64_t master_session = 0;
  bool registered = false;
  /// The tick is scheduled (it stops while this owner is not registered).
  bool heartbeat_started = false;
  bool reconnect_armed = false;
  /// A warning about the master being unreachable was logged since the
  /// last registration.
  bool master_warned = false;
  clock_duration heartbeat_interval = std::chrono::milliseconds{500};
  /// The latest link this owner opened to each other owner, until it goes down.
  std::map<node_id, transport::link_id> dialing;
  /// Links this owner closed whose going down is not reported yet.
  std::set<transport::link_id> closing;

  // --- paths to other owners (owner_links.cpp, owner_relay.cpp) ---
  links_section links_cfg;
  transport::link_manager links;
  /// The other owners this one knows of, by id: the up owners as the
  /// master last listed them (heartbeat replies), and any it learnt since.
  std::map<node_id, owner_entry> owners;
  /// The generation of the master's owner list `owners` was filled from
  /// (0: none yet); a heartbeat names it, and the reply carries the list
  /// when it changed.
  std::uint64_t owners_generation = 0;
  /// The owners the master listed as this owner's relays to it, by id
  /// (at most 16: the master's relays_listed_max) ...
  std::vector<node_id> master_relays;
  /// ... and when each last could not pass a frame on to the master.
  std::map<node_id, clock_time> master_relay_refused;
  /// When the master's member list was last asked for, and who waits for
  /// the answer.
  clock_time owners_asked{};
  bool owners_asking = false;
  std::vector<std::function<void()>> owners_waiters;
  /// Per peer: which of the candidate relays to try next.
  std::map<node_id, std::size_t> relay_turn;
  /// Frames waiting for a member list that says where their target is.
  std::vector<parked_frame> parked;
  /// Reservations of local clients, by id; dropped with their link.
  std::map<std::uint64_t, reservation> reservations;
  std::uint64_t next_reservation = 1;

  // --- rdma (owner_rdma.cpp) ---
  rdma_state rdma;

  // --- MQ payloads fetched ahead of their reads (owner_prefetch.cpp) ---
  /// By payload key; prefetched_max entries and [owner] mq_prefetch
  /// bytes (prefetched_bytes, counting those on their way) at most.
  std::map<std::string, prefetched_payload, std::less<>> prefetched;
  std::uint64_t prefetched_bytes = 0;

  // --- GPU pools (owner_gpu.cpp) ---
  owner_gpu gpu;

  // --- commits of the fast path (owner_commits.cpp) ---
  /// A report_atom is on its way: the reports go out then.
  bool report_armed = false;
  /// The eviction policy was told of the fast path's commits through this.
  std::uint64_t announced_through = 0;
  /// Slots to ask the master for; a claim is on its way.
  std::set<key_slot> claim_wanted;
  bool claim_in_flight = false;
  /// Slots of the claim on its way this owner gave up meanwhile (it sent
  /// a put of one of their keys for the master to place, which may have
  /// taken the slot back after granting it): a grant of them is ignored.
  std::set<key_slot> claim_asked;
  std::set<key_slot> claim_voided;
  /// Puts waiting for the claim on its way (of their keys' slots).
  std::vector<std::function<void()>> claim_waiters;
  /// Slots the master would not hand over, and when to ask again.
  std::map<key_slot, clock_time> claim_refused;

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
  /// Versions whose eviction the master is asked for and has not
  /// answered: this owner registers no copy of them until it has (the
  /// master could list a copy the answer then frees). At most one round's
  /// batch.
  std::set<std::pair<std::string, std::uint64_t>> evicts_asked;
  /// Values this owner evicted since it started.
  std::uint64_t evictions = 0;
  /// Puts placed through this owner that left their version with fewer
  /// copies than they asked for (acknowledged under min_replicas, or
  /// failed after the first copy committed), since it started.
  std::uint64_t under_replicated_puts = 0;

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


// --- the master (owner_master.cpp) ---

/// Asks the master; fails at once with `unavailable` while this owner is
/// not registered.
void ask_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply);
/// Sends the master a request over the best path there is now — this
/// owner's own link, or another owner relaying — registered or not. A
/// path that fails (no answer by the deadline, its link lost, a relay
/// refusing) is demoted, so what is sent next takes the next path; the
/// request itself is not sent again (the caller's retries are).
void send_to_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply);
/// The same for a notification (lost when no path is known).
void tell_master(self_ptr self, wire::body body);
/// This owner's own link to the master went down: a relay may still reach
/// it (a heartbeat through one tells); otherwise the master is lost.
void master_link_lost(self_ptr self, const error& reason);
/// Sets up the paths to the master from [links] (its retry backoff).
void init_master_paths(self_ptr self);
/// Registers with the master ([owner] master) over its own link, dialed
/// when needed, or through a relay; when the master cannot be reached,
/// tries again later (schedule_reconnect). Nothing while registered.
void connect_master(self_ptr self);
/// Sends this owner a reconnect_atom after [owner] reconnect_interval
/// (once, however often asked).
void schedule_reconnect(self_ptr self);
/// The tick, every heartbeat interval while registered: retries due
/// paths, the rdma and rpc periodic work, then a heartbeat to the master,
/// whose answer renews the lease or asks this owner to register again.
void on_tick(self_ptr self);

// --- paths to other owners (owner_links.cpp) ---

/// Sets the link manager up from [links] (no shm between owners, rdma
/// only where the node has a path) and passes frames for other owners to
/// relay_frame.
void init_links(self_ptr self, const links_section& cfg);
/// The link to another owner, opening one when needed.
result<transport::link_id> owner_link(self_ptr self, const wire::replica& r);
/// Closes a link to another owner; owner_link no longer hands it out.
void close_link(self_ptr self, transport::link_id link);
/// Sends `body` (and `payload`) to the owner `to` and hands its reply to
/// `on_reply`, over the best path the link manager knows: the paths of
/// its plan in turn, each but the last given [links] timeout to answer,
/// a path that fails (no answer, link lost, relay refused) demoted on the
/// way. `into`: where the reply's payload goes (request_options::into).
void peer_request(self_ptr self, const wire::replica& to, wire::body body, shared_bytes payload,
                  clock_time deadline, std::optional<transport::receive_slot> into, reply_handler on_reply);
/// Remembers where another owner is (and its name, when given).
void learn_owner(self_ptr self, node_id id, const std::string& address, const std::string& name = {});
/// Asks the master for its member list, unless it was asked lately, then
/// runs `then` (at once when it was).
void refresh_owners(self_ptr self, std::function<void()> then);
/// Tries again the paths whose retry is due (a ping over each).
void retry_paths(self_ptr self);
/// The owner that may relay to `target` next: an up owner this one
/// reaches directly, other than the target, taken in turn.
std::optional<std::pair<node_id, owner_entry>> pick_relay(self_ptr self, node_id target);
/// How this owner reaches the owners it talked to, for its heartbeat.
std::vector<wire::link_state> link_report(self_ptr self);

// --- relaying for others (owner_relay.cpp) ---

/// Passes on a frame that arrived for another owner, over this owner's
/// direct link to it, or answers the sender that it cannot.
void relay_frame(self_ptr self, transport::link_id from, wire::message msg);
/// The member list arrived: frames parked for it go on (or are refused).
void release_parked(self_ptr self);

// --- kv, served to clients (owner_kv.cpp) ---

/// A client's put: committed here when the key's slot is this owner's,
/// else placed by the master, stored where it says and copied to the
/// extra replicas. `waited`: the put already waited for a claim.
/// A put with replicas > 1 answers success only with at least
/// min_replicas copies committed (0: all replicas); otherwise it answers
/// unavailable, and the version stays visible with the copies it has.
void serve_put(self_ptr self, const request_context& ctx, std::string key, shared_bytes value,
               wire::put_condition condition, std::uint64_t ttl_ms, std::uint32_t replicas,
               std::string prefer_owner, std::uint32_t min_replicas = 0, bool waited = false);
void serve_remove(self_ptr self, const request_context& ctx, std::string key, std::uint64_t if_version);
void serve_exists(self_ptr self, const request_context& ctx, std::string key);
/// Sets pool memory aside for a local client to write a value into, at
/// most reservations_per_link_max per link; evicts once when full.
void serve_reserve(self_ptr self, const request_context& ctx, const wire::kv_reserve& r, bool made_room = false);
/// Whether a request on `link` may commit or abort `r`: it comes from the
/// client that made it, on any of that client's links.
bool made_by(const owner_state& st, const reservation& r, transport::link_id link);
/// The client wrote reservation `id`: its bytes become a put.
void serve_commit_reservation(self_ptr self, const request_context& ctx, std::uint64_t id);
/// Another owner sends a value to hold: a placed put's version, stored
/// and committed here, or an extra copy (`s.replica`).
void serve_store(self_ptr self, const request_context& ctx, const wire::store& s, shared_bytes value);

// --- reads, and transfers between owners (owner_transfer.cpp) ---

/// A value read from another owner into this one's memory.
struct fetched_value {
  shared_bytes bytes;
  /// The bytes lie in room the store reserved: they may stay as a copy.
  bool reserved = false;
};

/// Serves a client's get: locates the key, answers from the local copy or
/// reads the value from a holder (leaving a cached copy when configured).
void serve_get(self_ptr self, const request_context& ctx, std::string key, int attempt);
/// Reads `size` bytes of `version` of `key` from the owner `from` into this
/// owner's memory — a region the store reserves when it has room (local
/// clients read it in place; it may stay as a copy), else the heap — in
/// pieces of [owner] transfer_chunk, transfer_window of them in flight,
/// each received straight into its place. `done` gets the bytes or the
/// first error.
void fetch_value(self_ptr self, const wire::replica& from, const std::string& key, std::uint64_t version,
                 std::uint64_t size, clock_time deadline, std::function<void(result<fetched_value>)> done);
/// The same from the first of `holders` that answers: a holder that fails
/// (link error, timeout, overloaded) gives way to the next, within
/// `deadline`. `unavailable` when there are none.
void fetch_from_holders(self_ptr self, std::vector<wire::replica> holders, const std::string& key,
                        std::uint64_t version, std::uint64_t size, clock_time deadline,
                        std::function<void(result<fetched_value>)> done);
/// Answers another owner's fetch / fetch_range from the bytes held here;
/// the reply's payload is those bytes where they lie.
void serve_fetch(self_ptr self, const request_context& ctx, const wire::fetch& f);
void serve_fetch_range(self_ptr self, const request_context& ctx, const wire::fetch_range& f);

// --- rdma (owner_rdma.cpp) ---

/// Whether a read of a value from `from` into `into` (a region of this
/// owner's pool) should go over rdma now: a path exists, the link manager
/// puts rdma first for that owner, and `into` lies in a registered segment.
bool rdma_wanted(self_ptr self, const wire::replica& from, const shared_bytes& into);
/// Reads `version` of `key`, `into.size()` bytes, from `from` into `into`
/// with one-sided reads: sets a queue pair up over the tcp link when there
/// is none, asks the holder for a lease on the bytes, posts the reads
/// (pieces of [owner] transfer_chunk, transfer_window in flight) and
/// releases the lease. Failures of the path demote it (a holder that
/// declines to lease the value — not_found, invalid_argument, overloaded —
/// does not);
/// `done` says whether reads may still land in `into` (then the caller
/// must not reuse it).
void rdma_fetch(self_ptr self, const wire::replica& from, const std::string& key, std::uint64_t version,
                shared_bytes into, clock_time deadline, std::function<void(result<void>, bool into_busy)> done);
/// The holder's side: a reader sets a queue pair up / asks for a lease /
/// releases one.
void serve_rdma_connect(self_ptr self, const request_context& ctx, const wire::rdma_connect& c);
void serve_rdma_lease(self_ptr self, const request_context& ctx, const wire::fetch_range& f);
void serve_rdma_release(self_ptr self, const request_context& ctx, const wire::rdma_release& r);
/// A posted read completed (rdma_atom, work, ok, error).
void rdma_completed(self_ptr self, std::uint64_t work, bool ok, const std::string& why);
/// A job's reads are overdue (rdma_atom, job).
void rdma_overdue(self_ptr self, std::uint64_t job);
/// Frees leases whose time ran out.
void rdma_tick(self_ptr self);
/// Tries the rdma path to `to` again: a fresh queue pair.
void rdma_retry(self_ptr self, const wire::replica& to);

// --- GPU pools (owner_gpu.cpp) ---

/// Opens the [owner.gpu] pools on `device` (all or none) and says once in
/// the log what this owner contributes, or why it runs without GPU pools.
void init_gpu(self_ptr self, gpu::device* device);
/// The pool on `device`, for a request that needs one: unavailable with
/// the reason the owner has none, or invalid_argument for a device it has
/// no pool on.
result<gpu::device_pool*> gpu_pool(self_ptr self, std::uint32_t device);
/// What (gpu_atom) answers.
gpu_report report_gpu(self_ptr self);

// --- MQ payloads fetched ahead (owner_prefetch.cpp) ---

/// The master's mq_prefetch: fetches the payload from its holders into
/// this owner's pool and keeps it for the read that is to come; answered
/// ok once it is here, `overloaded` past the bounds, `unavailable` when
/// [owner] mq_prefetch is 0.
void serve_mq_prefetch(self_ptr self, const request_context& ctx, const wire::mq_prefetch& p);
/// For a read of `version` of `key`: when it was prefetched (or is on
/// its way), hands it over — `done` gets the bytes once here, or the
/// error that ended the prefetch — and returns true; false when not.
bool take_prefetched(self_ptr self, const std::string& key, std::uint64_t version,
                     std::function<void(result<shared_bytes>)> done);
/// Lets go of prefetched payloads no read took in time (on the tick).
void expire_prefetched(self_ptr self);

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
/// Registers the copy of `version` of `key` stored here with the master;
/// frees it when refused (the key moved on).
void register_replica(self_ptr self, const std::string& key, std::uint64_t version, std::uint64_t size,
                      clock_time deadline, std::function<void(result<void>)> done);
/// The master's repair_copy: reads the version from its holders, stores
/// it here and registers it; answered ok once registered.
void serve_repair_copy(self_ptr self, const request_context& ctx, const wire::repair_copy& r);

// --- commits of the fast path and slots (owner_commits.cpp) ---

/// Sends the master the fast path's commits not sent yet.
void send_commits(self_ptr self);
/// The fast path committed a put whose report is the first unsent one:
/// sends the reports shortly.
void commits_waiting(self_ptr self);
/// A plain put of `key` committed here through the master: this owner
/// asks for the key's slot, so the next ones need no master.
void want_slot(self_ptr self, const std::string& key);
/// Commits a plain put of `key` here, as the fast path does, when the
/// key's slot is handed to this owner, and answers it; false when not.
bool commit_here(self_ptr self, const request_context& ctx, const std::string& key, const shared_bytes& value);
/// Whether a claim of the key's slot is on its way.
bool claiming(self_ptr self, const std::string& key);
/// Runs `then` once the claim on its way is answered.
void after_claim(self_ptr self, std::function<void()> then);
/// Gives the key's slot up before a put the master places (it hands out
/// the version: the slot's keys would no longer all take theirs from
/// this owner's block).
void leave_slot(self_ptr self, const std::string& key);
/// The master asks (invalidate, barrier): sends what is unsent and
/// answers with how far that goes.
void answer_flushed(self_ptr self, const request_context& ctx);

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
