// The owner's fast path: a get of a key whose newest version this owner
// holds, answered without the owner actor and without the master — on
// the shm poller's thread in a real owner, at delivery in the simulator.
//
// It stays correct (linearizable) by a small protocol:
//  - the owner actor publishes a key into the fast index only when its
//    commit made this owner's version the key's current one, and takes
//    the key out before it commits or removes the key itself;
//  - the master, before another owner's version of the key becomes
//    current (or the key is removed through another owner), has this
//    owner take the key out (invalidate) and waits for the answer;
//  - the index answers only while the owner holds a fresh lease from the
//    master (a heartbeat answered within the lease, counted from when the
//    heartbeat was sent), so an owner cut off from the master stops
//    answering before the master could decide without it.
//
// Plain code with no I/O of its own, so the simulator runs it too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "runtime/memory/buffer.hpp"
#include "runtime/node_id.hpp"
#include "runtime/wire/frame.hpp"

namespace sluice {

/// What the owner publishes for its fast path. Thread-safe: the owner
/// actor writes it, the shm poller reads it.
class fast_index {
 public:
  struct entry {
    std::uint64_t version = 0;
    shared_bytes bytes;
    /// Not served from the index from then on (the value's TTL).
    std::chrono::steady_clock::time_point expires = std::chrono::steady_clock::time_point::max();
    /// Read through the index since take_touched() last looked: reads
    /// answered here never reach the owner actor, whose eviction policy
    /// learns of them this way.
    bool touched = false;
  };

  /// Makes `version` of `key` servable, unless a newer one is.
  void publish(const std::string& key, std::uint64_t version, shared_bytes bytes,
               std::chrono::steady_clock::time_point expires = std::chrono::steady_clock::time_point::max());
  void erase(const std::string& key);
  /// Erases `key` only if `version` is the one published.
  void erase_version(const std::string& key, std::uint64_t version);
  void clear();

  /// The index may answer until `until` (on the owner's clock: the actor
  /// clock, which is the steady clock in a real node); an empty time
  /// point stops it at once. The check is made at each request against
  /// the caller's clock, not by a timer that could fire late.
  void set_lease(std::chrono::steady_clock::time_point until) noexcept {
    lease_until_ns_.store(until.time_since_epoch().count(), std::memory_order_release);
  }
  bool enabled(std::chrono::steady_clock::time_point now) const noexcept {
    return now.time_since_epoch().count() < lease_until_ns_.load(std::memory_order_acquire);
  }

  /// The entry of `key`; marks it touched.
  std::optional<entry> find(std::string_view key) const;
  /// Whether `key` was read through the index since the last call; clears
  /// the mark.
  bool take_touched(const std::string& key);
  /// Whether the index holds `version` of `key` (and so a reference to
  /// its bytes).
  bool holds(const std::string& key, std::uint64_t version) const;
  std::size_t size() const;

 private:
  /// Lets find() look a string_view up without building a string.
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
  };

  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, entry, key_hash, std::equal_to<>> entries_;
  std::atomic<std::chrono::steady_clock::rep> lease_until_ns_{0};
};

/// Answers `frame`, a request from a client of this owner (`self`), from
/// `index` when it can: a kv_get of a published key while the index is
/// enabled. Returns the reply frame, or nothing: the request then goes to
/// the owner actor as usual.
std::optional<wire::outbound_frame> serve_fast(const fast_index& index, node_id self,
                                               const wire::inbound_frame& frame,
                                               std::chrono::steady_clock::time_point now);

}  // namespace sluice
