#include "actors/master/directory.hpp"

#include <cstring>
#include <limits>
#include <new>

#include "runtime/assert.hpp"

namespace sluice::master {
namespace {

object_entry entry_of(std::uint64_t version, std::uint64_t size, std::uint32_t copies, node_id holder,
                      std::int64_t expires_ms) {
  SLUICE_ASSERT(size <= object_size_max && copies >= 1 && copies <= max_copies);
  object_entry e;
  e.version = version;
  e.size = size;
  e.copies = copies;
  e.holder = holder;
  e.expires_ms = expires_ms;
  return e;
}

}  // namespace

std::uint64_t directory::begin_put(const std::string& key, std::uint64_t size, node_id holder,
                                   clock_time expires, wire::put_condition condition, std::uint64_t ttl_ms,
                                   std::uint32_t copies) {
  SLUICE_ASSERT(copies >= 1 && copies <= max_copies);
  auto version = next_version_++;
  pending_.emplace(version, pending_entry{key, size, holder, expires, condition, ttl_ms, copies});
  usage_[holder].pending_bytes += size;
  pending_per_key_[key] += 1;
  count_in_slot(key, holder, true);
  return version;
}

result<commit_outcome> directory::commit(const std::string& key, std::uint64_t version,
                                         node_id holder) {
  auto it = pending_.find(version);
  if (it == pending_.end()) {
    return fail(errc::not_found, "no pending put with version " + std::to_string(version) +
                                     " (it expired or was aborted)");
  }
  if (it->second.key != key || it->second.holder != holder) {
    return fail(errc::invalid_argument, "commit of version " + std::to_string(version) +
                                            " does not match its pending put");
  }
  auto size = it->second.size;
  auto copies = it->second.copies;
  auto expires_ms = it->second.ttl_ms == 0 ? std::int64_t{0}
                                           : now_ms_ + static_cast<std::int64_t>(it->second.ttl_ms);
  if (it->second.condition.any()) {
    auto holds = check(key, it->second.condition);
    auto removed = removed_at_.find(key);
    if (holds && removed != removed_at_.end() && removed->second > version) {
      holds = fail(errc::conflict, "the key changed (a newer version was put and removed) since the put began");
    }
    if (!holds) {
      forget_pending(it);
      return std::move(holds).error();
    }
  }
  commit_outcome out;
  out.version = version;
  if (auto removed = removed_at_.find(key); removed != removed_at_.end() && removed->second > version) {
    // The key was removed after a newer version than this one existed.
    forget_pending(it);
    out.stale = stale_version{holder, key, version};
    return out;
  }
  forget_pending(it);

  auto [obj, inserted] = add_node(key, entry_of(version, size, copies, holder, expires_ms));
  if (inserted) set_expiry(key, 0, expires_ms);
  if (!inserted) {
    if (obj->entry.version > version) {
      // A newer version committed first: this one is obsolete on arrival.
      out.stale = stale_version{holder, key, version};
      return out;
    }
    auto& old = obj->entry;
    out.stale = stale_version{old.holder, key, old.version};
    count_copy(key, old.holder, old.size, false);
    for (auto r : old.replicas) {
      out.stale_replicas.push_back(stale_version{r, key, old.version});
      count_copy(key, r, old.size, false);
    }
    set_expiry(key, old.expires_ms, expires_ms);
    old = entry_of(version, size, copies, holder, expires_ms);
  }
  count_copy(key, holder, size, true);
  return out;
}

commit_outcome directory::commit_owned(const std::string& key, std::uint64_t version, std::uint64_t size,
                                       node_id holder) {
  commit_outcome out;
  out.version = version;
  auto [obj, inserted] = add_node(key, entry_of(version, size, 1, holder, 0));
  if (!inserted) {
    auto& old = obj->entry;
    if (old.version == version) return out;  // applied already
    if (old.version > version) {
      out.stale = stale_version{holder, key, version};
      return out;
    }
    out.stale = stale_version{old.holder, key, old.version};
    count_copy(key, old.holder, old.size, false);
    for (auto r : old.replicas) {
      out.stale_replicas.push_back(stale_version{r, key, old.version});
      count_copy(key, r, old.size, false);
    }
    set_expiry(key, old.expires_ms, 0);
    old = entry_of(version, size, 1, holder, 0);
  }
  count_copy(key, holder, size, true);
  next_version_ = std::max(next_version_, version + 1);
  return out;
}

bool directory::slot_only(key_slot slot, node_id holder) const {
  for (auto& [who, n] : slot_use_.at(slot)) {
    if (who != holder && n > 0) return false;
  }
  return true;
}

void directory::count_in_slot(std::string_view key, node_id holder, bool added) {
  auto& use = slot_use_[slot_of(key)];
  if (added) {
    use[holder] += 1;
    return;
  }
  auto it = use.find(holder);
  SLUICE_ASSERT(it != use.end() && it->second > 0);
  if (--it->second == 0) use.erase(it);
}

void directory::count_copy(std::string_view key, node_id holder, std::uint64_t size, bool added) {
  count_in_slot(key, holder, added);
  auto& u = usage_[holder];
  if (added) {
    u.objects += 1;
    u.bytes += size;
    return;
  }
  SLUICE_ASSERT(u.objects > 0 && u.bytes >= size);
  u.objects -= 1;
  u.bytes -= size;
}

bool directory::pending_on(const std::string& key, std::uint64_t version, node_id holder) const {
  auto it = pending_.find(version);
  return it != pending_.end() && it->second.key == key && it->second.holder == holder;
}

std::vector<wire::key_version> directory::held_in_range(node_id holder, std::string_view after, std::string_view through,
                                                        bool to_end) const {
  std::vector<wire::key_version> out;
  for (auto it = ordered_.upper_bound(after); it != ordered_.end(); ++it) {
    auto& r = **it;
    if (!to_end && r.key() > through) break;
    if (r.entry.held_by(holder)) out.push_back(wire::key_version{std::string{r.key()}, r.entry.version});
  }
  return out;
}

bool directory::add_replica(const std::string& key, std::uint64_t version, node_id holder) {
  auto* r = find_node(key);
  if (r == nullptr || r->entry.version != version || r->entry.held_by(holder)) return false;
  r->entry.replicas.push_back(holder);
  count_copy(key, holder, r->entry.size, true);
  return true;
}

void directory::settle_copies(const std::string& key) {
  auto* r = find_node(key);
  if (r == nullptr) return;
  auto& e = r->entry;
  e.copies = std::min<std::uint64_t>(e.copies, e.copy_count());
  SLUICE_ASSERT(e.copies >= 1);
}

evicted_copy directory::evict(const std::string& key, std::uint64_t version, node_id holder) {
  auto* r = find_node(key);
  if (r == nullptr || r->entry.version != version || !r->entry.held_by(holder)) return evicted_copy::refused;
  auto& e = r->entry;
  if (e.replicas.empty()) {
    remove(key);
    return evicted_copy::key;
  }
  if (e.holder == holder) {
    e.holder = e.replicas.front();
    e.replicas.pop_front();
  } else {
    e.replicas.remove(holder);
  }
  count_copy(key, holder, e.size, false);
  return evicted_copy::replica;
}

void directory::forget_pending(std::map<std::uint64_t, pending_entry>::iterator it) {
  auto& u = usage_[it->second.holder];
  SLUICE_ASSERT(u.pending_bytes >= it->second.size);
  u.pending_bytes -= it->second.size;
  count_in_slot(it->second.key, it->second.holder, false);
  auto count = pending_per_key_.find(it->second.key);
  SLUICE_ASSERT(count != pending_per_key_.end());
  if (--count->second == 0) {
    removed_at_.erase(it->second.key);
    pending_per_key_.erase(count);
  }
  pending_.erase(it);
}

bool directory::abort(std::uint64_t version) {
  auto it = pending_.find(version);
  if (it == pending_.end()) return false;
  forget_pending(it);
  return true;
}

std::vector<stale_version> directory::expire(clock_time now) {
  std::vector<stale_version> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expires <= now) {
      out.push_back({it->second.holder, it->second.key, it->first});
      forget_pending(it++);
    } else {
      ++it;
    }
  }
  return out;
}

result<void> directory::check(const std::string& key, const wire::put_condition& condition) const {
  auto* entry = find(key);
  if (condition.if_absent && entry != nullptr) {
    return fail(errc::conflict, "the key has a committed version (" + std::to_string(entry->version) +
                                    "); the put required none");
  }
  if (condition.if_version != 0 && entry == nullptr) {
    return fail(errc::conflict, "the key has no committed version; the put required version " +
                                    std::to_string(condition.if_version));
  }
  if (condition.if_version != 0 && entry->version != condition.if_version) {
    return fail(errc::conflict, "the key's committed version is " + std::to_string(entry->version) +
                                    ", not " + std::to_string(condition.if_version));
  }
  return {};
}

directory::listing directory::list(std::string_view prefix, std::string_view start_after,
                                   std::size_t limit) const {
  listing out;
  auto it = start_after < prefix ? ordered_.lower_bound(prefix) : ordered_.upper_bound(start_after);
  for (; it != ordered_.end() && (*it)->key().starts_with(prefix); ++it) {
    auto& r = **it;
    if (!live(r.entry)) continue;
    if (out.keys.size() == limit) {
      out.more = true;
      break;
    }
    out.keys.push_back(wire::key_info{std::string{r.key()}, r.entry.version, r.entry.size});
  }
  return out;
}

std::uint64_t directory::count(std::string_view prefix) const {
  std::uint64_t n = 0;
  for (auto it = ordered_.lower_bound(prefix); it != ordered_.end() && (*it)->key().starts_with(prefix); ++it) {
    if (live((*it)->entry)) ++n;
  }
  return n;
}

const object_entry* directory::find(const std::string& key) const {
  auto* e = find_any(key);
  return e != nullptr && live(*e) ? e : nullptr;
}

const object_entry* directory::find_any(const std::string& key) const {
  auto* r = find_node(key);
  return r == nullptr ? nullptr : &r->entry;
}

void directory::set_expiry(std::string_view key, std::int64_t old_ms, std::int64_t new_ms) {
  if (old_ms == new_ms) return;
  if (old_ms != 0) expiring_.erase({old_ms, std::string{key}});
  if (new_ms != 0) expiring_.emplace(new_ms, std::string{key});
}

std::vector<std::pair<std::string, std::uint64_t>> directory::expired(std::size_t max) const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (auto& [at, key] : expiring_) {
    if (at > now_ms_ || out.size() == max) break;
    auto* r = find_node(key);
    SLUICE_ASSERT(r != nullptr);  // a key expiring is in the directory
    out.emplace_back(key, r->entry.version);
  }
  return out;
}

std::optional<object_entry> directory::remove(const std::string& key) {
  auto* r = find_node(key);
  if (r == nullptr) return std::nullopt;
  auto entry = r->entry;
  set_expiry(key, entry.expires_ms, 0);
  erase_node(r);
  if (pending_per_key_.contains(key)) {
    auto& at = removed_at_[key];
    at = std::max(at, entry.version);
  }
  count_copy(key, entry.holder, entry.size, false);
  for (auto r : entry.replicas) count_copy(key, r, entry.size, false);
  return entry;
}

void directory::restore(std::string_view key, object_entry entry) {
  count_copy(key, entry.holder, entry.size, true);
  for (auto r : entry.replicas) count_copy(key, r, entry.size, true);
  next_version_ = std::max(next_version_, entry.version + 1);
  set_expiry(key, 0, entry.expires_ms);
  auto [it, inserted] = add_node(key, entry);
  SLUICE_ASSERT(inserted);
}

std::vector<std::string> directory::remove_holder(node_id holder, std::vector<std::string>* changed) {
  std::vector<std::string> out;
  std::vector<std::pair<std::string, std::uint64_t>> copies;
  for (auto& r : ordered_) {
    if (r->entry.held_by(holder)) copies.emplace_back(r->key(), r->entry.version);
  }
  // In key order: deterministic for whoever acts on the lists.
  for (auto& [key, version] : copies) {
    if (evict(key, version, holder) == evicted_copy::key) {
      out.push_back(key);
    } else if (changed != nullptr) {
      changed->push_back(key);
    }
  }
  return out;
}

directory::holder_usage directory::usage_of(node_id holder) const {
  auto it = usage_.find(holder);
  return it == usage_.end() ? holder_usage{} : it->second;
}

std::string_view directory::record::key() const noexcept {
  auto* tail = reinterpret_cast<const char*>(this) + sizeof(record);
  std::uint16_t n = 0;
  std::memcpy(&n, tail, sizeof n);
  return {tail + sizeof n, n};
}

void directory::record_free::operator()(record* r) const noexcept {
  r->~record();
  ::operator delete(r);
}

directory::record_ptr directory::make_record(std::string_view key, const object_entry& entry) {
  SLUICE_ASSERT(key.size() <= std::numeric_limits<std::uint16_t>::max());
  SLUICE_ASSERT(entry.size <= object_size_max);
  auto n = static_cast<std::uint16_t>(key.size());
  void* raw = ::operator new(sizeof(record) + sizeof n + key.size());
  record_ptr r{new (raw) record{entry}};
  auto* tail = static_cast<char*>(raw) + sizeof(record);
  std::memcpy(tail, &n, sizeof n);
  std::memcpy(tail + sizeof n, key.data(), key.size());
  return r;
}

directory::record* directory::find_node(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : *it;
}

std::pair<directory::record*, bool> directory::add_node(std::string_view key, const object_entry& entry) {
  if (auto it = index_.find(key); it != index_.end()) return {*it, false};
  auto r = make_record(key, entry);
  auto* raw = r.get();
  // Keys restored from storage come in key order: each goes at the end.
  auto hint = !ordered_.empty() && key_of(*std::prev(ordered_.end())) < key ? ordered_.end()
                                                                             : ordered_.lower_bound(key);
  ordered_.insert(hint, std::move(r));
  index_.insert(raw);
  SLUICE_ASSERT(ordered_.size() == index_.size());
  return {raw, true};
}

void directory::erase_node(record* r) {
  auto key = r->key();
  auto it = ordered_.find(key);
  SLUICE_ASSERT(it != ordered_.end() && it->get() == r);
  index_.erase(key);
  ordered_.erase(it);  // frees r (and the bytes `key` viewed)
  SLUICE_ASSERT(ordered_.size() == index_.size());
}

}  // namespace sluice::master
