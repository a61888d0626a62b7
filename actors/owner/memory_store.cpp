#include "actors/owner/object_store.hpp"

#include <algorithm>

#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice {

long references_in(const versions_by_key& values, const std::string& key, std::uint64_t version) {
  auto it = values.find(key);
  if (it == values.end()) return 0;
  auto v = it->second.find(version);
  if (v == it->second.end()) return 0;
  // An empty value has no buffer to share: nothing to free either way.
  return v->second.owner() ? v->second.owner().use_count() : 1;
}

std::uint64_t latest_in(const versions_by_key& values, const std::string& key) {
  auto it = values.find(key);
  if (it == values.end()) return 0;
  SLUICE_ASSERT(!it->second.empty());
  return it->second.rbegin()->first;
}

std::vector<std::pair<std::string, std::uint64_t>> inventory_of(const versions_by_key& values) {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (auto& [key, versions] : values) {
    for (auto& [version, bytes] : versions) out.emplace_back(key, version);
  }
  std::sort(out.begin(), out.end());
  return out;
}

result<void> memory_store::put(const std::string& key, std::uint64_t version, shared_bytes value) {
  std::lock_guard guard{mutex_};
  auto size = value.size();
  if (size > capacity_ - used_) {
    return fail(errc::no_capacity, "owner has " + format_size(capacity_ - used_) + " free of " +
                                       format_size(capacity_) + "; the value needs " +
                                       format_size(size));
  }
  auto& versions = values_[key];
  auto [it, inserted] = versions.try_emplace(version, std::move(value));
  if (!inserted) return fail(errc::conflict, "version " + std::to_string(version) + " is already stored");
  used_ += size;
  count_ += 1;
  SLUICE_ASSERT(used_ <= capacity_);
  SLUICE_ASSERT(count_ >= versions.size());
  return {};
}

std::optional<shared_bytes> memory_store::get(const std::string& key, std::uint64_t version) const {
  std::lock_guard guard{mutex_};
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  auto v = it->second.find(version);
  if (v == it->second.end()) return std::nullopt;
  return v->second;
}

result<shared_bytes> memory_store::reserve(std::uint64_t size) {
  std::lock_guard guard{mutex_};
  if (size > capacity_ - used_) {
    return fail(errc::no_capacity, "owner has " + format_size(capacity_ - used_) + " free; the value needs " +
                                       format_size(size));
  }
  return byte_buffer::allocate(size).freeze();
}

bool memory_store::drop(const std::string& key, std::uint64_t version) {
  std::lock_guard guard{mutex_};
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  auto v = it->second.find(version);
  if (v == it->second.end()) return false;
  SLUICE_ASSERT(used_ >= v->second.size());
  SLUICE_ASSERT(count_ > 0);
  used_ -= v->second.size();
  count_ -= 1;
  it->second.erase(v);
  if (it->second.empty()) values_.erase(it);
  return true;
}

std::uint64_t memory_store::latest(const std::string& key) const {
  std::lock_guard guard{mutex_};
  return latest_in(values_, key);
}

long memory_store::references(const std::string& key, std::uint64_t version) const {
  std::lock_guard guard{mutex_};
  return references_in(values_, key, version);
}

std::vector<std::pair<std::string, std::uint64_t>> memory_store::inventory() const {
  std::lock_guard guard{mutex_};
  auto out = inventory_of(values_);
  // A walk over everything anyway (a registration's): check the counts.
  SLUICE_ASSERT(out.size() == count_);
  std::uint64_t bytes = 0;
  for (auto& [key, versions] : values_) {
    for (auto& [version, value] : versions) bytes += value.size();
  }
  SLUICE_ASSERT(bytes == used_);
  return out;
}

std::uint64_t memory_store::used_bytes() const {
  std::lock_guard guard{mutex_};
  return used_;
}

std::uint64_t memory_store::object_count() const {
  std::lock_guard guard{mutex_};
  return count_;
}

}  // namespace sluice
