#include "actors/master/directory.hpp"

#include "runtime/assert.hpp"

namespace sluice::master {

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

  auto [obj, inserted] = add_node(key, object_entry{version, size, holder, expires_ms, {}, copies});
  if (inserted) set_expiry(key, 0, expires_ms);
  if (!inserted) {
    if (obj->second.version > version) {
      // A newer version committed first: this one is obsolete on arrival.
      out.stale = stale_version{holder, key, version};
      return out;
    }
    auto& old = obj->second;
    out.stale = stale_version{old.holder, key, old.version};
    count_copy(key, old.holder, old.size, false);
    for (auto r : old.replicas) {
      out.stale_replicas.push_back(stale_version{r, key, old.version});
      count_copy(key, r, old.size, false);
    }
    set_expiry(key, old.expires_ms, expires_ms);
    old = object_entry{version, size, holder, expires_ms, {}, copies};
  }
  count_copy(key, holder, size, true);
  return out;
}

commit_outcome directory::commit_owned(const std::string& key, std::uint64_t version, std::uint64_t size,
                                       node_id holder) {
  commit_outcome out;
  out.version = version;
  auto [obj, inserted] = add_node(key, object_entry{version, size, holder, 0, {}});
  if (!inserted) {
    auto& old = obj->second;
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
    old = object_entry{version, size, holder, 0, {}};
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

void directory::count_in_slot(const std::string& key, node_id holder, bool added) {
  auto& use = slot_use_[slot_of(key)];
  if (added) {
    use[holder] += 1;
    return;
  }
  auto it = use.find(holder);
  SLUICE_ASSERT(it != use.end() && it->second > 0);
  if (--it->second == 0) use.erase(it);
}

void directory::count_copy(const std::string& key, node_id holder, std::uint64_t size, bool added) {
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
  for (auto it = objects_.upper_bound(after); it != objects_.end(); ++it) {
    if (!to_end && it->first > through) break;
    if (it->second.held_by(holder)) out.push_back(wire::key_version{it->first, it->second.version});
  }
  return out;
}

bool directory::add_replica(const std::string& key, std::uint64_t version, node_id holder) {
  auto it = find_node(key);
  if (it == objects_.end() || it->second.version != version || it->second.held_by(holder)) return false;
  it->second.replicas.push_back(holder);
  count_copy(key, holder, it->second.size, true);
  return true;
}

void directory::settle_copies(const std::string& key) {
  auto it = find_node(key);
  if (it == objects_.end()) return;
  auto& e = it->second;
  e.copies = std::min<std::uint32_t>(e.copies, static_cast<std::uint32_t>(e.copy_count()));
  SLUICE_ASSERT(e.copies >= 1);
}

evicted_copy directory::evict(const std::string& key, std::uint64_t version, node_id holder) {
  auto it = find_node(key);
  if (it == objects_.end() || it->second.version != version || !it->second.held_by(holder)) {
    return evicted_copy::refused;
  }
  auto& e = it->second;
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
  auto it = start_after < prefix ? objects_.lower_bound(prefix) : objects_.upper_bound(start_after);
  for (; it != objects_.end() && it->first.starts_with(prefix); ++it) {
    if (!live(it->second)) continue;
    if (out.keys.size() == limit) {
      out.more = true;
      break;
    }
    out.keys.push_back(wire::key_info{it->first, it->second.version, it->second.size});
  }
  return out;
}

std::uint64_t directory::count(std::string_view prefix) const {
  std::uint64_t n = 0;
  for (auto it = objects_.lower_bound(prefix); it != objects_.end() && it->first.starts_with(prefix); ++it) {
    if (live(it->second)) ++n;
  }
  return n;
}

const object_entry* directory::find(const std::string& key) const {
  auto* e = find_any(key);
  return e != nullptr && live(*e) ? e : nullptr;
}

const object_entry* directory::find_any(const std::string& key) const {
  auto it = find_node(key);
  return it == objects_.end() ? nullptr : &it->second;
}

void directory::set_expiry(const std::string& key, std::int64_t old_ms, std::int64_t new_ms) {
  if (old_ms == new_ms) return;
  if (old_ms != 0) expiring_.erase({old_ms, key});
  if (new_ms != 0) expiring_.emplace(new_ms, key);
}

std::vector<std::pair<std::string, std::uint64_t>> directory::expired(std::size_t max) const {
  std::vector<std::pair<std::string, std::uint64_t>> out;
  for (auto& [at, key] : expiring_) {
    if (at > now_ms_ || out.size() == max) break;
    out.emplace_back(key, find_node(key)->second.version);
  }
  return out;
}

std::optional<object_entry> directory::remove(const std::string& key) {
  auto it = find_node(key);
  if (it == objects_.end()) return std::nullopt;
  auto entry = it->second;
  set_expiry(key, entry.expires_ms, 0);
  erase_node(it);
  if (pending_per_key_.contains(key)) {
    auto& at = removed_at_[key];
    at = std::max(at, entry.version);
  }
  count_copy(key, entry.holder, entry.size, false);
  for (auto r : entry.replicas) count_copy(key, r, entry.size, false);
  return entry;
}

void directory::restore(std::string key, object_entry entry) {
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
  for (auto& [key, entry] : objects_) {
    if (entry.held_by(holder)) copies.emplace_back(key, entry.version);
  }
  // In key order (the map's): deterministic for whoever acts on the lists.
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

directory::object_map::iterator directory::find_node(std::string_view key) {
  auto it = index_.find(key);
  return it == index_.end() ? objects_.end() : *it;
}

directory::object_map::const_iterator directory::find_node(std::string_view key) const {
  auto it = index_.find(key);
  return it == index_.end() ? objects_.cend() : object_map::const_iterator{*it};
}

std::pair<directory::object_map::iterator, bool> directory::add_node(const std::string& key,
                                                                     const object_entry& entry) {
  if (auto it = index_.find(std::string_view{key}); it != index_.end()) return {*it, false};
  auto node = objects_.emplace(key, entry).first;
  index_.insert(node);
  return {node, true};
}

void directory::erase_node(object_map::iterator it) {
  index_.erase(std::string_view{it->first});
  objects_.erase(it);
}

}  // namespace sluice::master
