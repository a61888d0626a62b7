// sluice::client: what a business process embeds to use a Sluice cluster.
//
//   auto c = sluice::client::connect("127.0.0.1:7070");
//   if (!c) { /* c.error().to_string() says why */ }
//   (*c)->put("greeting", "hello");
//   auto v = (*c)->get("greeting");   // v->str() == "hello"
//
// Every call has a deadline (the client's default unless the call gives
// one) and reports failures as typed errors: not_found, timeout,
// unavailable, no_capacity, invalid_argument, ... (see sluice/error.hpp).
//
// Thread safety: a client may be used from many threads at once.
// Callbacks of the *_async forms run on a Sluice thread: keep them short
// and never block in them (in particular, never wait there for another
// call of the same client).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sluice/error.hpp"
#include "sluice/result.hpp"
#include "sluice/status.hpp"
#include "sluice/value.hpp"

namespace sluice {

/// How a client reaches its owner.
enum class client_transport {
  /// Shared memory when the owner runs on this host (its shm socket
  /// answers), else TCP.
  automatic,
  tcp,
  shared_memory,
};

struct client_options {
  /// Deadline of calls that do not give their own.
  std::chrono::milliseconds timeout{5000};
  /// How long connect() waits for the owner to answer.
  std::chrono::milliseconds connect_timeout{5000};
  /// A name for logs and status output.
  std::string name = "client";
  client_transport transport = client_transport::automatic;
  /// How often the client tells its owner it is alive, so that its
  /// session — and the pins it holds — live on; the owner ends a session
  /// silent for its [owner] client_timeout (10 s by default).
  std::chrono::milliseconds keepalive{2000};
};

/// Client options from the [client] section of a node configuration file
/// (docs/configuration.md); keys it does not set keep their defaults.
result<client_options> load_client_options(const std::string& config_file);

struct call_options {
  /// This call's deadline; 0 means the client's default.
  std::chrono::milliseconds timeout{0};
};

/// A put's options. A condition is checked when the put starts and again
/// when it commits; when it does not hold the put fails with `conflict`
/// and stores nothing.
struct put_options {
  /// This call's deadline; 0 means the client's default.
  std::chrono::milliseconds timeout{0};
  /// Store only if the key has no committed version.
  bool if_absent = false;
  /// Non-zero: store only if the key's committed version is this one.
  std::uint64_t if_version = 0;
  /// Non-zero: the value expires this long after it commits — the key
  /// then answers not_found (see docs/concepts.md, "Time to live").
  std::chrono::milliseconds ttl{0};
  /// Copies on distinct owners (1 to 255): reads keep working while any
  /// holder of a copy is up, and prefer a copy on the reader's own owner.
  /// The put succeeds only once every copy is committed (but see
  /// min_replicas). Fewer up owners than copies: `unavailable`, nothing
  /// stored. A copy that fails after the first one committed:
  /// `unavailable` ("1 of 2 copies committed ..."), and the version stays
  /// visible, readable from the copies it has (docs/concepts.md,
  /// "Copies").
  std::uint32_t replicas = 1;
  /// The name of the owner to put the value on ([node] name, or
  /// `owner@ADDRESS`), when it is up and can take it; otherwise the
  /// cluster's placement policy decides. Empty: the policy decides.
  std::string owner{};
  /// With replicas > 1: the put succeeds once this many copies (1 to
  /// replicas) are committed, placing fewer when fewer owners are up;
  /// put_with_copies() says how many it got. 0: all `replicas`.
  std::uint32_t min_replicas = 0;
};

/// What a put did: the version it committed and on how many owners.
struct put_result {
  std::uint64_t version = 0;
  /// Copies committed on distinct owners: from put_options::min_replicas
  /// to replicas. Fewer than replicas: the version is under-replicated.
  std::uint32_t copies = 0;
};

struct remove_options {
  std::chrono::milliseconds timeout{0};
  /// Non-zero: remove only if the key's committed version is this one
  /// (else `conflict`).
  std::uint64_t if_version = 0;
};

struct list_options {
  std::chrono::milliseconds timeout{0};
  /// List keys after this one (bytewise order): the last key of the
  /// previous page. Empty: from the first key.
  std::string start_after{};
  /// Keys per page; 0 means 1000. The cluster lists at most 10000 at once.
  std::uint32_t limit = 0;
};

struct pin_options {
  std::chrono::milliseconds timeout{0};
  /// The pin lapses this long from now; 0: no time limit.
  std::chrono::milliseconds ttl{0};
  /// false: the pin is this client's — it lapses when the client goes
  /// away (exits, crashes, or loses its owner), and only this client
  /// lifts it. true: the pin is nobody's; it stays until its ttl or until
  /// an unpin with detached = true (as `sluice kv pin` makes them).
  bool detached = false;
};

/// A committed key as listed.
struct key_info {
  std::string key{};
  std::uint64_t version = 0;
  std::uint64_t size = 0;
};

/// One page of a listing, in bytewise key order.
struct key_page {
  std::vector<key_info> keys{};
  /// More keys match after the last one here: list again with
  /// start_after = keys.back().key.
  bool more = false;
};

class client;
class dict_builder;
class rpc_endpoint;

/// A new value being written before it is committed. On the owner's host
/// (shared memory) bytes() is the pool memory the value will live in: what
/// the caller writes there is the value, with no further copy. Elsewhere
/// it is a local buffer, sent when committed.
///
/// Move-only. Destroying it without commit() gives the room back. Any
/// thread may commit it; on the owner's host the room is held by the link
/// of the thread that reserved it, so it is given back if that thread
/// ends first (a later commit() answers invalid_argument).
class writable_value {
 public:
  writable_value(writable_value&&) noexcept;
  writable_value& operator=(writable_value&&) noexcept;
  ~writable_value();

  /// Where to write the value; exactly the size reserved. Write it before
  /// commit(), not after.
  std::span<std::byte> bytes() const noexcept;
  /// Makes the bytes the key's new version; returns it. A writable_value
  /// commits at most once. A condition given to reserve() is checked now.
  result<std::uint64_t> commit(call_options options = {});
  /// commit(), also saying how many copies were committed (see
  /// put_options::min_replicas).
  result<put_result> commit_with_copies(call_options options = {});
  /// Gives the room back without storing anything.
  void abort();

  struct impl;
  explicit writable_value(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

class client {
 public:
  /// Connects to the owner at `address` ("host:port") and checks that it
  /// answers. Fails with `unavailable` when nothing answers there in time.
  static result<std::unique_ptr<client>> connect(const std::string& address,
                                                 client_options options = {});

  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// Stores `bytes` under `key`; returns the new version. The last
  /// committed version of a key wins. On the owner's host a large value
  /// is copied once, straight into the owner's pool.
  result<std::uint64_t> put(std::string_view key, std::span<const std::byte> bytes,
                            call_options options = {});
  result<std::uint64_t> put(std::string_view key, std::string_view text, call_options options = {});
  /// A put with a condition (put_options): fails with `conflict`, storing
  /// nothing, when the key's committed version does not meet it.
  result<std::uint64_t> put(std::string_view key, std::span<const std::byte> bytes, const put_options& options);
  result<std::uint64_t> put(std::string_view key, std::string_view text, const put_options& options);
  /// A put that also says how many copies it committed: with
  /// put_options::min_replicas it may succeed with fewer than replicas.
  result<put_result> put_with_copies(std::string_view key, std::span<const std::byte> bytes,
                                     const put_options& options);
  result<put_result> put_with_copies(std::string_view key, std::string_view text, const put_options& options);

  /// Room for a new value of `size` bytes under `key`, to write in place
  /// (see writable_value). Fails like put: invalid_argument for a bad key
  /// or a size over the owner's max_value, no_capacity when it has no room.
  result<writable_value> reserve(std::string_view key, std::uint64_t size, call_options options = {});
  /// A reservation whose commit is conditional (see put_options).
  result<writable_value> reserve(std::string_view key, std::uint64_t size, const put_options& options);

  /// Encodes a dict (sluice/dict.hpp) straight into a reservation and
  /// commits it: each field's buffers are copied once, to their place.
  result<std::uint64_t> put(std::string_view key, const dict_builder& dict, call_options options = {});

  /// Several puts at once, pipelined; one result per item, in order.
  std::vector<result<std::uint64_t>> put_batch(
      std::span<const std::pair<std::string_view, std::span<const std::byte>>> items,
      call_options options = {});

  /// The latest committed version of `key`; `not_found` when there is none.
  /// On the owner's host the value is a view of the owner's memory, no
  /// copy: it stays valid, unchanged, while it lives, even if the key is
  /// overwritten or removed meanwhile.
  result<value> get(std::string_view key, call_options options = {});

  /// Copies the latest committed version of `key` into `out` and returns
  /// its size. Fails with invalid_argument (naming the size needed) when
  /// `out` is too small, and like get() otherwise.
  result<std::size_t> get_into(std::string_view key, std::span<std::byte> out, call_options options = {});

  /// Several gets at once, pipelined; one result per key, in order.
  std::vector<result<value>> get_batch(std::span<const std::string_view> keys, call_options options = {});

  /// Removes `key`; returns whether it had a committed version.
  result<bool> remove(std::string_view key, call_options options = {});
  /// Removes `key` only while its committed version is options.if_version
  /// (`conflict` otherwise).
  result<bool> remove(std::string_view key, const remove_options& options);

  /// Whether `key` has a committed version. Asking does not count as a
  /// use of the key: it renews nothing and does not keep it from eviction.
  result<bool> exists(std::string_view key, call_options options = {});

  /// Several removes / exists at once, pipelined; one result per key, in
  /// order. A key that fails has its own error; the others still run.
  std::vector<result<bool>> remove_batch(std::span<const std::string_view> keys, call_options options = {});
  std::vector<result<bool>> exists_batch(std::span<const std::string_view> keys, call_options options = {});

  /// Committed keys starting with `prefix` ("" lists every key), a page
  /// at a time, in bytewise order. Keys put or removed while a listing
  /// pages on may or may not appear; each key appears at most once.
  result<key_page> list(std::string_view prefix, const list_options& options = {});
  /// How many committed keys start with `prefix`.
  result<std::uint64_t> count(std::string_view prefix, call_options options = {});

  /// Keeps `key` from eviction (see pin_options for how long); returns
  /// its committed version, or not_found. A pin is on the key, not a
  /// version: it stays across overwrites, goes with a remove, and does not
  /// stop a time to live. Pinning again extends a pin, never shortens it.
  result<std::uint64_t> pin(std::string_view key, const pin_options& options = {});
  /// Lifts this client's pin on `key` (the detached pins with
  /// options.detached); returns whether there was one in force.
  result<bool> unpin(std::string_view key, const pin_options& options = {});

  /// Members of the cluster, their state and usage.
  result<cluster_status> status(call_options options = {});

  // Asynchronous forms. The callback runs exactly once.
  void put_async(std::string_view key, std::span<const std::byte> bytes,
                 std::function<void(result<std::uint64_t>)> done, call_options options = {});
  void get_async(std::string_view key, std::function<void(result<value>)> done,
                 call_options options = {});
  void remove_async(std::string_view key, std::function<void(result<bool>)> done,
                    call_options options = {});
  void exists_async(std::string_view key, std::function<void(result<bool>)> done,
                    call_options options = {});

  std::future<result<std::uint64_t>> put_async(std::string_view key, std::span<const std::byte> bytes,
                                               call_options options = {});
  std::future<result<value>> get_async(std::string_view key, call_options options = {});

  /// The address this client talks to.
  const std::string& address() const noexcept;

  /// Serving and calling named handlers (sluice/rpc.hpp); lives as long
  /// as the client.
  rpc_endpoint& rpc();

  struct impl;
  /// Used by sluice::local_cluster.
  explicit client(std::unique_ptr<impl> state);

 private:
  friend class mq;  // sluice/mq.hpp
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
