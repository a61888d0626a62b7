#include "actors/owner/pool_store.hpp"

#include <cstring>

namespace sluice {

struct pool_store::shared_pool {
  mutable std::mutex mutex;
  std::unique_ptr<pool> memory;  // guarded by mutex
};

namespace {

/// Keeps one region allocated while any shared_bytes over it lives.
struct region_hold {
  region_hold(std::shared_ptr<pool_store::shared_pool> o, region w) : owner(std::move(o)), where(w) {}
  region_hold(const region_hold&) = delete;
  region_hold& operator=(const region_hold&) = delete;
  std::shared_ptr<pool_store::shared_pool> owner;
  region where;
  ~region_hold() {
    std::lock_guard guard{owner->mutex};
    owner->memory->free(where);
  }
};

}  // namespace

pool_store::pool_store(std::shared_ptr<shared_pool> p) : pool_(std::move(p)) {
  for (std::uint32_t i = 0; i < pool_->memory->segment_count(); ++i) {
    auto& s = pool_->memory->segment_at(i);
    bases_.emplace_back(s.base(), s.size_bytes());
  }
}

std::optional<wire::pool_region> pool_store::locate(const shared_bytes& bytes) const {
  for (std::uint32_t i = 0; i < bases_.size(); ++i) {
    auto [base, size] = bases_[i];
    if (bytes.data() >= base && bytes.data() + bytes.size() <= base + size) {
      return wire::pool_region{i, static_cast<std::uint64_t>(bytes.data() - base), bytes.size()};
    }
  }
  return std::nullopt;
}

result<shared_bytes> pool_store::reserve(std::uint64_t size) {
  result<region> r = error{errc::internal, ""};
  std::span<std::byte> bytes;
  {
    std::lock_guard guard{pool_->mutex};
    r = pool_->memory->allocate(size);
    if (r) bytes = pool_->memory->resolve(*r).value();
  }
  if (!r) return r.error();
  return shared_bytes{std::make_shared<region_hold>(pool_, *r), bytes};
}

result<std::unique_ptr<pool_store>> pool_store::create(const pool_options& options) {
  auto p = pool::create(options);
  if (!p) return p.error();
  auto shared = std::make_shared<shared_pool>();
  shared->memory = std::move(*p);
  return std::unique_ptr<pool_store>{new pool_store{std::move(shared)}};
}

result<void> pool_store::put(const std::string& key, std::uint64_t version, shared_bytes value) {
  std::lock_guard values_guard{values_mutex_};
  auto& versions = values_[key];
  if (versions.contains(version)) {
    return fail(errc::conflict, "version " + std::to_string(version) + " is already stored");
  }
  if (locate(value)) {
    // Written in place into a reservation: keep it where it is.
    versions.emplace(version, std::move(value));
    count_ += 1;
    return {};
  }
  result<region> r = error{errc::internal, ""};
  std::span<std::byte> bytes;
  {
    std::lock_guard guard{pool_->mutex};
    r = pool_->memory->allocate(value.size());
    if (r) bytes = pool_->memory->resolve(*r).value();
  }
  if (!r) {
    if (versions.empty()) values_.erase(key);
    return r.error();
  }
  if (!value.empty()) std::memcpy(bytes.data(), value.data(), value.size());
  auto hold = std::make_shared<region_hold>(pool_, *r);
  versions.emplace(version, shared_bytes{std::move(hold), bytes});
  count_ += 1;
  return {};
}

std::optional<shared_bytes> pool_store::get(const std::string& key, std::uint64_t version) const {
  std::lock_guard guard{values_mutex_};
  auto it = values_.find(key);
  if (it == values_.end()) return std::nullopt;
  auto v = it->second.find(version);
  if (v == it->second.end()) return std::nullopt;
  return v->second;
}

bool pool_store::drop(const std::string& key, std::uint64_t version) {
  shared_bytes gone;  // freed after the lock is let go: freeing takes the pool's
  std::lock_guard guard{values_mutex_};
  auto it = values_.find(key);
  if (it == values_.end()) return false;
  auto v = it->second.find(version);
  if (v == it->second.end()) return false;
  gone = std::move(v->second);
  it->second.erase(v);
  if (it->second.empty()) values_.erase(it);
  count_ -= 1;
  return true;
}

std::uint64_t pool_store::latest(const std::string& key) const {
  std::lock_guard guard{values_mutex_};
  return latest_in(values_, key);
}

long pool_store::references(const std::string& key, std::uint64_t version) const {
  std::lock_guard guard{values_mutex_};
  return references_in(values_, key, version);
}

std::vector<std::pair<std::string, std::uint64_t>> pool_store::inventory() const {
  std::lock_guard guard{values_mutex_};
  return inventory_of(values_);
}

std::uint64_t pool_store::object_count() const {
  std::lock_guard guard{values_mutex_};
  return count_;
}

std::uint64_t pool_store::capacity_bytes() const {
  std::lock_guard guard{pool_->mutex};
  return pool_->memory->stats().capacity_bytes;
}

std::uint64_t pool_store::used_bytes() const {
  std::lock_guard guard{pool_->mutex};
  return pool_->memory->stats().used_bytes;
}

pool_stats pool_store::stats() const {
  std::lock_guard guard{pool_->mutex};
  return pool_->memory->stats();
}

std::vector<pool_store::segment_info> pool_store::segments() const {
  std::lock_guard guard{pool_->mutex};
  std::vector<segment_info> out;
  for (std::uint32_t i = 0; i < pool_->memory->segment_count(); ++i) {
    auto& s = pool_->memory->segment_at(i);
    out.push_back({s.fd(), s.size_bytes(), s.base()});
  }
  return out;
}

}  // namespace sluice
