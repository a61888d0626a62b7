#include "actors/master/persistence.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/keys.hpp"

namespace sluice::master {
namespace {

constexpr std::string_view object_prefix = "o/";
constexpr std::string_view member_prefix = "m/";
constexpr std::string_view version_key = "v";
constexpr std::string_view pin_prefix = "p/";
constexpr std::string_view home_prefix = "h/";
constexpr std::string_view applied_prefix = "a/";

std::string home_key(key_slot slot) {
  auto digits = std::to_string(slot);
  return std::string{home_prefix} + std::string(4 - digits.size(), '0') + digits;
}

void put_u64(std::string& out, std::uint64_t v) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 8);
}

void put_u32(std::string& out, std::uint32_t v) {
  char bytes[4];
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<char>(v >> (8 * i));
  out.append(bytes, 4);
}

/// Reads little-endian integers and byte strings off the front of a record.
struct reader {
  std::string_view rest;
  bool ok = true;

  std::uint64_t u64() { return uint(8); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::string_view bytes(std::size_t n) {
    if (rest.size() < n) {
      ok = false;
      return {};
    }
    auto out = rest.substr(0, n);
    rest.remove_prefix(n);
    return out;
  }

 private:
  std::uint64_t uint(int n) {
    auto b = bytes(static_cast<std::size_t>(n));
    std::uint64_t v = 0;
    for (int i = 0; i < static_cast<int>(b.size()); ++i) {
      v |= static_cast<std::uint64_t>(static_cast<unsigned char>(b[static_cast<std::size_t>(i)])) << (8 * i);
    }
    return v;
  }
};

std::string member_key(node_id id) { return std::string{member_prefix} + id.to_string(); }

error corrupt(std::string_view key, const char* what) {
  std::string shown;
  for (char c : key.substr(0, 64)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return error{errc::internal, "the master's stored record '" + shown + "' is corrupt: " + what};
}

}  // namespace

result<recovery_stats> persistence::load(directory& dir, std::vector<member>& members, pin_table* pins,
                                         homes* slots, owner_commit_log* commits) {
  recovery_stats stats;
  if (store_ == nullptr) return stats;
  std::optional<error> bad;
  auto scanned = store_->scan(member_prefix, [&](std::string_view key, std::string_view value) {
    if (bad) return;
    auto id = node_id::parse(key.substr(member_prefix.size()));
    reader r{value};
    member m;
    m.incarnation = r.u64();
    m.capacity_bytes = r.u64();
    auto name_len = r.u32();
    m.name = std::string{r.bytes(name_len)};
    m.address = std::string{r.rest};
    if (!id || !r.ok) {
      bad = corrupt(key, "not a member");
      return;
    }
    m.id = *id;
    members.push_back(std::move(m));
    stats.members += 1;
  });
  if (!scanned) return scanned.error();
  if (bad) return *bad;

  scanned = store_->scan(object_prefix, [&](std::string_view key, std::string_view value) {
    if (bad) return;
    reader r{value};
    object_entry e;
    e.version = r.u64();
    auto size = r.u64();
    e.holder = node_id{r.u64()};
    // The copy target, when above 1, is the one field of 4 bytes: last.
    if (r.rest.size() >= 8) e.expires_ms = static_cast<std::int64_t>(r.u64());
    while (r.ok && r.rest.size() >= 8) e.replicas.push_back(node_id{r.u64()});
    std::uint32_t copies = 1;
    if (r.ok && r.rest.size() == 4) copies = r.u32();
    if (!r.ok || !r.rest.empty() || e.version == 0 || size > object_size_max || copies == 0 || copies > max_copies ||
        key.size() - object_prefix.size() > max_key_bytes) {
      bad = corrupt(key, "not an object");
      return;
    }
    e.size = size;
    e.copies = copies;
    dir.restore(key.substr(object_prefix.size()), e);
    stats.objects += 1;
  });
  if (!scanned) return scanned.error();
  if (bad) return *bad;

  scanned = store_->scan(pin_prefix, [&](std::string_view key, std::string_view value) {
    if (bad) return;
    reader r{value};
    std::vector<pin_hold> holds;
    while (r.ok && !r.rest.empty()) {
      pin_hold h;
      h.owner = node_id{r.u64()};
      h.session = r.u64();
      h.until_ms = static_cast<std::int64_t>(r.u64());
      holds.push_back(h);
    }
    if (!r.ok || holds.empty()) {
      bad = corrupt(key, "not a pin");
      return;
    }
    if (pins != nullptr) pins->restore(std::string{key.substr(pin_prefix.size())}, holds);
  });
  if (!scanned) return scanned.error();
  if (bad) return *bad;

  scanned = store_->scan(home_prefix, [&](std::string_view key, std::string_view value) {
    if (bad) return;
    reader r{value};
    auto owner = r.u64();
    auto digits = key.substr(home_prefix.size());
    unsigned slot = 0;
    bool numeric = digits.size() == 4 && std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    for (char c : digits) slot = slot * 10 + static_cast<unsigned>(c - '0');
    if (!r.ok || !r.rest.empty() || !numeric || slot >= key_slots || owner == 0) {
      bad = corrupt(key, "not a slot's home");
      return;
    }
    if (slots != nullptr) slots->grant(static_cast<key_slot>(slot), node_id{owner});
  });
  if (!scanned) return scanned.error();
  if (bad) return *bad;

  scanned = store_->scan(applied_prefix, [&](std::string_view key, std::string_view value) {
    if (bad) return;
    reader r{value};
    auto seq = r.u64();
    auto id = node_id::parse(key.substr(applied_prefix.size()));
    if (!r.ok || !r.rest.empty() || !id) {
      bad = corrupt(key, "not an owner's applied commits");
      return;
    }
    if (commits != nullptr) commits->set_applied(*id, seq);
  });
  if (!scanned) return scanned.error();
  if (bad) return *bad;

  auto floor = store_->get(version_key);
  if (!floor) return floor.error();
  if (*floor) {
    reader r{**floor};
    auto v = r.u64();
    if (!r.ok) return corrupt(version_key, "not a version");
    dir.skip_versions_below(v);
  }
  version_floor_ = dir.next_version();
  stats.next_version = dir.next_version();
  return stats;
}

void persistence::pins_changed(const std::string& key, const std::vector<pin_hold>& holds) {
  if (store_ == nullptr) return;
  std::string record_key = std::string{pin_prefix} + key;
  if (holds.empty()) return erase(record_key);
  std::string value;
  for (auto& h : holds) {
    put_u64(value, h.owner.value);
    put_u64(value, h.session);
    put_u64(value, static_cast<std::uint64_t>(h.until_ms));
  }
  write(record_key, value);
}

void persistence::write(std::string_view key, std::string_view value) {
  dirty_ = true;
  if (auto ok = store_->put(key, value); !ok && !write_error_) write_error_ = ok.error();
}

void persistence::erase(std::string_view key) {
  dirty_ = true;
  if (auto ok = store_->erase(key); !ok && !write_error_) write_error_ = ok.error();
}

void persistence::object_committed(const std::string& key, const object_entry& entry) {
  if (store_ == nullptr) return;
  scratch_.clear();
  put_u64(scratch_, entry.version);
  put_u64(scratch_, entry.size);
  put_u64(scratch_, entry.holder.value);
  if (entry.expires_ms != 0 || !entry.replicas.empty() || entry.copies > 1) {
    put_u64(scratch_, static_cast<std::uint64_t>(entry.expires_ms));
  }
  for (auto r : entry.replicas) put_u64(scratch_, r.value);
  if (entry.copies > 1) put_u32(scratch_, entry.copies);
  auto value = scratch_;
  scratch_.assign(object_prefix);
  scratch_ += key;
  write(scratch_, value);
}

void persistence::object_removed(const std::string& key) {
  if (store_ == nullptr) return;
  scratch_.assign(object_prefix);
  scratch_ += key;
  erase(scratch_);
}

void persistence::member_joined(const member& m) {
  if (store_ == nullptr) return;
  std::string value;
  put_u64(value, m.incarnation);
  put_u64(value, m.capacity_bytes);
  put_u32(value, static_cast<std::uint32_t>(m.name.size()));
  value += m.name;
  value += m.address;
  write(member_key(m.id), value);
}

void persistence::member_forgotten(node_id id) {
  if (store_ == nullptr) return;
  erase(member_key(id));
}

void persistence::home_changed(key_slot slot, std::optional<node_id> owner) {
  if (store_ == nullptr) return;
  if (!owner) return erase(home_key(slot));
  std::string value;
  put_u64(value, owner->value);
  write(home_key(slot), value);
}

void persistence::owner_commits_applied(node_id owner, std::uint64_t seq) {
  if (store_ == nullptr) return;
  auto key = std::string{applied_prefix} + owner.to_string();
  if (seq == 0) return erase(key);
  std::string value;
  put_u64(value, seq);
  write(key, value);
}

void persistence::versions_used(std::uint64_t next_version) {
  if (store_ == nullptr || next_version <= version_floor_) return;
  // The floor always stays ahead of every version handed out, so a
  // restarted master starts above all of them.
  version_floor_ = next_version + version_block;
  std::string value;
  put_u64(value, version_floor_);
  write(version_key, value);
}

void persistence::mq_changed(const std::vector<mq_log_change>& log, const std::vector<mq_group_change>& groups) {
  if (store_ == nullptr) return;
  dirty_ = true;
  auto ok = mq_journal(*store_, log);
  if (ok) ok = mq_journal(*store_, groups);
  if (!ok && !write_error_) write_error_ = ok.error();
}

result<mq_load_stats> persistence::load_mq(mq_log& log, mq_groups& groups) {
  if (store_ == nullptr) return mq_load_stats{};
  auto stats = mq_load(*store_, log, groups);
  // Partitions of the restored topics join the restored groups.
  if (stats) (void)groups.topics_changed(log);
  return stats;
}

result<void> persistence::sync() {
  if (store_ == nullptr || !dirty_) return {};
  if (write_error_) {
    auto e = *write_error_;
    return fail(errc::internal, "a write to the master's store failed: " + e.message());
  }
  if (auto ok = store_->sync(); !ok) return ok;
  dirty_ = false;
  return {};
}

void persistence::discard() {
  if (store_ == nullptr) return;
  store_->discard();
  dirty_ = false;
  write_error_.reset();
}

}  // namespace sluice::master
