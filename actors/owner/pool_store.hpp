// pool_store: an object_store whose values live in the owner's shared-
// memory pool, so local clients can read them in place. Each stored
// version holds one pool region; the region goes back to the pool when
// the last reference to its bytes is gone — the store's own, and any a
// reader still holds (a frame being sent, a client's read lease). So a
// version that is overwritten or dropped stays readable, unchanged, for
// whoever still has it.
//
// Thread safety: every call from any thread (the owner actor and the
// fast path use it); the bytes it hands out may be released from any
// thread too (the pool is locked then).
//
// Invariants (asserted):
//   1. count_ is the number of versions stored, never below 0;
//   2. no key maps to an empty set of versions: a key goes with its last
//      version, and a put that fails leaves none behind;
//   3. a region handed out is exactly as long as was asked for; it goes
//      back to the pool once, with the last reference to its bytes (the
//      pool asserts that it was live).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "actors/owner/object_store.hpp"
#include "runtime/memory/pool.hpp"
#include "transports/transport.hpp"

namespace sluice {

class pool_store final : public object_store {
 public:
  /// Creates the pool. Errors: those of pool::create.
  static result<std::unique_ptr<pool_store>> create(const pool_options& options);

  result<void> put(const std::string& key, std::uint64_t version, shared_bytes value) override;
  std::optional<shared_bytes> get(const std::string& key, std::uint64_t version) const override;
  bool drop(const std::string& key, std::uint64_t version) override;
  std::uint64_t latest(const std::string& key) const override;
  result<shared_bytes> reserve(std::uint64_t size) override;
  long references(const std::string& key, std::uint64_t version) const override;
  std::vector<std::pair<std::string, std::uint64_t>> inventory() const override;
  std::optional<wire::pool_region> locate(const shared_bytes& bytes) const override;
  std::uint64_t capacity_bytes() const override;
  std::uint64_t used_bytes() const override;
  std::uint64_t object_count() const override;

  /// The pool's segments, for handing to local clients. The store keeps
  /// them mapped (and their descriptors open) while it lives.
  struct segment_info {
    int fd;
    std::uint64_t size_bytes;
    const std::byte* base;
  };
  std::vector<segment_info> segments() const;
  /// Pool regions for payloads a transport receives with no slot posted
  /// for them (a put's value, a copy to store), so that they land where
  /// they will be kept: put() keeps such bytes in place. Thread-safe (the
  /// transport calls it on its I/O thread); keeps the pool alive. Nothing
  /// when the pool has no room: the transport uses memory of its own.
  transport::payload_allocator payload_allocator() const;
  pool_stats stats() const;

  /// The shared state that regions' bytes keep alive; public for the
  /// release hook only.
  struct shared_pool;

 private:
  explicit pool_store(std::shared_ptr<shared_pool> p);
  std::vector<std::pair<const std::byte*, std::uint64_t>> bases_;  // per segment, fixed
  std::shared_ptr<shared_pool> pool_;
  // Lock order: values_mutex_ before the pool's mutex (a put allocates
  // while it holds it); never the other way round.
  mutable std::mutex values_mutex_;  // guards values_ and count_
  versions_by_key values_;
  std::uint64_t count_ = 0;
};

}  // namespace sluice
