#include "actors/s3/upload_table.hpp"

#include <algorithm>
#include <cstdio>

#include "runtime/assert.hpp"

namespace sluice::s3 {

std::optional<std::string> upload_table::create(upload_record record) {
  std::lock_guard lock{mutex_};
  if (uploads_.size() >= uploads_max_) return std::nullopt;
  char id[33];
  std::snprintf(id, sizeof id, "%016llx%016llx", static_cast<unsigned long long>(rng_.next()),
                static_cast<unsigned long long>(rng_.next()));
  record.id = id;
  // 128 random bits: a collision means the rng is broken.
  SLUICE_ASSERT(uploads_.count(record.id) == 0);
  uploads_.emplace(record.id, record);
  return record.id;
}

std::optional<upload_record> upload_table::find(const std::string& id) const {
  std::lock_guard lock{mutex_};
  auto it = uploads_.find(id);
  if (it == uploads_.end()) return std::nullopt;
  return it->second;
}

std::optional<upload_record> upload_table::take(const std::string& id) {
  std::lock_guard lock{mutex_};
  auto it = uploads_.find(id);
  if (it == uploads_.end()) return std::nullopt;
  auto out = std::move(it->second);
  uploads_.erase(it);
  return out;
}

void upload_table::restore(upload_record record) {
  std::lock_guard lock{mutex_};
  uploads_.emplace(record.id, std::move(record));
}

std::vector<upload_record> upload_table::list(const std::string& bucket, const std::string& prefix) const {
  std::vector<upload_record> out;
  {
    std::lock_guard lock{mutex_};
    for (const auto& [id, u] : uploads_) {
      if (u.bucket == bucket && u.key.starts_with(prefix)) out.push_back(u);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.key != b.key ? a.key < b.key : a.initiated_ns != b.initiated_ns ? a.initiated_ns < b.initiated_ns : a.id < b.id;
  });
  return out;
}

std::string staged_prefix(const std::string& upload_id) { return ".sluice-uploads/" + upload_id + "/"; }

std::string staged_part_key(const std::string& upload_id, std::uint32_t part_number) {
  char name[16];
  std::snprintf(name, sizeof name, "%05u", part_number);
  return staged_prefix(upload_id) + name;
}

}  // namespace sluice::s3
