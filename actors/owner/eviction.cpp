#include "actors/owner/eviction.hpp"

#include <algorithm>

#include "runtime/assert.hpp"

namespace sluice {

void lru_policy::admit(const std::string& key, std::uint64_t version, std::uint64_t size) {
  auto it = where_.find(key);
  if (it != where_.end()) {
    SLUICE_ASSERT(it->second->key == key);
    if (it->second->version > version) return;  // a newer one is known already
    order_.erase(it->second);
    where_.erase(it);
  }
  order_.push_front(eviction_candidate{key, version, size});
  auto [at, inserted] = where_.emplace(key, order_.begin());
  SLUICE_ASSERT(inserted);
  SLUICE_ASSERT(order_.size() == where_.size());
}

void lru_policy::touch(const std::string& key) {
  auto it = where_.find(key);
  if (it == where_.end()) return;
  SLUICE_ASSERT(it->second->key == key);
  order_.splice(order_.begin(), order_, it->second);
  SLUICE_ASSERT(order_.begin() == it->second);
}

void lru_policy::forget(const std::string& key, std::uint64_t version) {
  auto it = where_.find(key);
  if (it == where_.end() || it->second->version != version) return;
  SLUICE_ASSERT(it->second->key == key);
  order_.erase(it->second);
  where_.erase(it);
  SLUICE_ASSERT(order_.size() == where_.size());
}

std::vector<eviction_candidate> lru_policy::candidates(std::size_t max) const {
  std::vector<eviction_candidate> out;
  for (auto it = order_.rbegin(); it != order_.rend() && out.size() < max; ++it) out.push_back(*it);
  SLUICE_ASSERT(out.size() == std::min(max, order_.size()));
  return out;
}

std::unique_ptr<eviction_policy> make_eviction_policy(eviction_policy_kind kind) {
  switch (kind) {
    case eviction_policy_kind::lru: return std::make_unique<lru_policy>();
    case eviction_policy_kind::none: return nullptr;
  }
  return nullptr;
}

}  // namespace sluice
