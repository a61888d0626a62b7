// eviction: the order in which an owner gives up committed values when its
// pool fills. A policy only ranks what it was told about — keys, their
// current version here, their size, their uses; whether a candidate may
// really go (a reader holds it, a pin protects it) is decided by the owner
// and the master when the candidate comes up.
//
// Pure bookkeeping: no I/O, no clock, deterministic order.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config/node_config.hpp"

namespace sluice {

struct eviction_candidate {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
};

class eviction_policy {
 public:
  virtual ~eviction_policy() = default;
  /// `version` of `key` became the key's committed version, held here;
  /// it replaces any older version of the key the policy knew.
  virtual void admit(const std::string& key, std::uint64_t version, std::uint64_t size) = 0;
  /// `key` was read (or proved itself worth keeping).
  virtual void touch(const std::string& key) = 0;
  /// `version` of `key` is gone from here; an other version is kept.
  virtual void forget(const std::string& key, std::uint64_t version) = 0;
  /// Up to `max` candidates, the one to go first first.
  virtual std::vector<eviction_candidate> candidates(std::size_t max) const = 0;
  virtual std::size_t size() const = 0;
};

/// Least recently used (admitted or touched) first.
///
/// Invariants (asserted):
///   1. order_ and where_ name the same keys: one candidate per key, and
///      where_ points at the key's own candidate;
///   2. a key's version only grows: admit() of an older version than the
///      one known changes nothing.
class lru_policy final : public eviction_policy {
 public:
  void admit(const std::string& key, std::uint64_t version, std::uint64_t size) override;
  void touch(const std::string& key) override;
  void forget(const std::string& key, std::uint64_t version) override;
  std::vector<eviction_candidate> candidates(std::size_t max) const override;
  std::size_t size() const override { return order_.size(); }

 private:
  std::list<eviction_candidate> order_;  // front: most recently used
  std::unordered_map<std::string, std::list<eviction_candidate>::iterator> where_;
};

/// The policy `kind` names; null for eviction_policy_kind::none.
std::unique_ptr<eviction_policy> make_eviction_policy(eviction_policy_kind kind);

}  // namespace sluice
