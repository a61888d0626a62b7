#include "actors/owner/pool_store.hpp"

#include <cstring>

#include "runtime/assert.hpp"

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

/// A region of `size` bytes that goes back to the pool with its last
/// reference. Thread-safe.
result<transport::receive_slot> allocate_slot(const std::shared_ptr<pool_store::shared_pool>& p,
                                              std::uint64_t size) {
  result<region> r = error{errc::internal, ""};
  std::span<std::byte> bytes;
  {
    std::lock_guard guard{p->mutex};
    r = p->memory->allocate(size);
    if (r) bytes = p->memory->resolve(*r).value();
  }
  if (!r) return r.error();
  SLUICE_ASSERT(r->length == size);
  SLUICE_ASSERT(bytes.size() == size);
  return transport::receive_slot{std::make_shared<region_hold>(p, *r), bytes};
}

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
  auto slot = allocate_slot(pool_, size);
  if (!slot) return slot.error();
  return slot->frozen();
}

transport::payload_allocator pool_store::payload_allocator() const {
  return [p = pool_](std::uint64_t bytes) -> std::optional<transport::receive_slot> {
    auto slot = allocate_slot(p, bytes);
    if (!slot) return std::nullopt;
    return std::move(*slot);
  };
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
    auto [at, inserted] = versions.emplace(version, std::move(value));
    SLUICE_ASSERT(inserted);
    count_ += 1;
    return {};
  }
  auto slot = allocate_slot(pool_, value.size());
  if (!slot) {
    if (versions.empty()) values_.erase(key);
    return slot.error();
  }
  SLUICE_ASSERT(slot->bytes.size() == value.size());
  if (!value.empty()) std::memcpy(slot->bytes.data(), value.data(), value.size());
  auto [at, inserted] = versions.emplace(version, slot->frozen());
  SLUICE_ASSERT(inserted);
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
  SLUICE_ASSERT(count_ > 0);
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
  auto out = inventory_of(values_);
  // A walk over everything anyway (a registration's): check the count.
  SLUICE_ASSERT(out.size() == count_);
  return out;
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
