// object_store: where an owner keeps the versions it holds. The owner
// actor depends on this interface only; memory_store keeps values in
// process memory, pool_store in the shared-memory pool.
//
// Thread-safe: the owner actor and the owner's fast path (the shm
// poller's thread) both use it.
#pragma once

#include <cstdint>
#include <optional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice {

class object_store {
 public:
  virtual ~object_store() = default;

  /// Stores `value` as `version` of `key`. Fails with `no_capacity` when it
  /// does not fit, leaving everything stored before untouched.
  virtual result<void> put(const std::string& key, std::uint64_t version, shared_bytes value) = 0;

  /// The bytes of `version` of `key`, or nothing when not held.
  virtual std::optional<shared_bytes> get(const std::string& key, std::uint64_t version) const = 0;

  /// Frees `version` of `key`; false when it was not held.
  virtual bool drop(const std::string& key, std::uint64_t version) = 0;

  /// The newest version of `key` held; 0 when none is.
  virtual std::uint64_t latest(const std::string& key) const = 0;

  /// Room for a value of `size` bytes, which the caller fills in place and
  /// then put()s (without a copy). The room goes back when the returned
  /// bytes are dropped without being put. Fails with no_capacity.
  virtual result<shared_bytes> reserve(std::uint64_t size) = 0;

  /// Where `bytes` lie in the store's shared-memory pool, when they do (a
  /// local client reaches them there).
  virtual std::optional<wire::pool_region> locate(const shared_bytes& bytes) const = 0;

  /// How many references to the bytes of `version` of `key` exist, the
  /// store's own included (0: not held). More than the store's and the
  /// fast index's mean a reader holds them: evicting would free nothing.
  virtual long references(const std::string& key, std::uint64_t version) const = 0;

  /// Every (key, version) held, sorted.
  virtual std::vector<std::pair<std::string, std::uint64_t>> inventory() const = 0;

  virtual std::uint64_t capacity_bytes() const = 0;
  virtual std::uint64_t used_bytes() const = 0;
  virtual std::uint64_t object_count() const = 0;
};

/// Fresh bytes, to fill in place: room reserve() handed out and not yet
/// put(), or a buffer just frozen. REQUIRES: nothing reads `fresh` yet —
/// until it is put or handed on, its bytes are the filler's alone.
inline std::span<std::byte> fill_in_place(const shared_bytes& fresh) noexcept {
  return {const_cast<std::byte*>(fresh.data()), fresh.size()};
}

/// The versions a store holds: key → version → bytes (a key holds more
/// than one version while an overwrite is in flight).
using versions_by_key = std::unordered_map<std::string, std::map<std::uint64_t, shared_bytes>>;
/// object_store::references, ::inventory and ::latest over such a map.
long references_in(const versions_by_key& values, const std::string& key, std::uint64_t version);
std::vector<std::pair<std::string, std::uint64_t>> inventory_of(const versions_by_key& values);
std::uint64_t latest_in(const versions_by_key& values, const std::string& key);

/// Values in process memory, within a byte budget. The stored bytes are
/// the ones that arrived (shared, not copied).
///
/// Invariants (asserted):
///   1. used_ is the sum of the sizes of the versions stored, never above
///      capacity_ and never below 0 (a drop takes off what its put added);
///   2. count_ is the number of versions stored, never below 0;
///   3. no key maps to an empty set of versions: a key goes with its last
///      version.
class memory_store final : public object_store {
 public:
  explicit memory_store(std::uint64_t capacity_bytes) : capacity_(capacity_bytes) {}

  result<void> put(const std::string& key, std::uint64_t version, shared_bytes value) override;
  std::optional<shared_bytes> get(const std::string& key, std::uint64_t version) const override;
  bool drop(const std::string& key, std::uint64_t version) override;
  std::uint64_t latest(const std::string& key) const override;
  /// Heap memory, counted against the capacity only once it is put.
  result<shared_bytes> reserve(std::uint64_t size) override;
  std::optional<wire::pool_region> locate(const shared_bytes&) const override { return std::nullopt; }
  long references(const std::string& key, std::uint64_t version) const override;
  std::vector<std::pair<std::string, std::uint64_t>> inventory() const override;
  std::uint64_t capacity_bytes() const override { return capacity_; }
  std::uint64_t used_bytes() const override;
  std::uint64_t object_count() const override;

 private:
  mutable std::mutex mutex_;  // guards everything below capacity_
  const std::uint64_t capacity_;
  std::uint64_t used_ = 0;
  std::uint64_t count_ = 0;
  versions_by_key values_;
};

}  // namespace sluice
