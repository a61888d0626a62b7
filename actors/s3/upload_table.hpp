// The multipart uploads in progress: id → where the object goes and the
// headers it will carry. Bounded (uploads_max); kept in memory only, so
// uploads do not survive a restart (the store drops their staged parts).
// Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/rng.hpp"
#include "runtime/storage/bucket_store.hpp"

namespace sluice::s3 {

struct upload_record {
  std::string id{};
  std::string bucket{};
  std::string key{};
  object_meta meta{};  ///< headers only; the ETag comes at completion
  std::int64_t initiated_ns{};
};

class upload_table {
 public:
  upload_table(std::size_t uploads_max, std::uint64_t seed) : uploads_max_(uploads_max), rng_(seed) {}

  /// The new upload's id, or nullopt when uploads_max are in progress.
  std::optional<std::string> create(upload_record record);
  std::optional<upload_record> find(const std::string& id) const;
  /// Removes and returns the upload, so one completion or abort wins.
  std::optional<upload_record> take(const std::string& id);
  /// Puts back an upload taken by a completion that failed.
  void restore(upload_record record);
  /// The uploads of `bucket` whose keys start with `prefix`, by key, then initiation.
  std::vector<upload_record> list(const std::string& bucket, const std::string& prefix) const;

 private:
  mutable std::mutex mutex_;
  std::size_t uploads_max_;
  rng rng_;
  std::map<std::string, upload_record> uploads_;
};

/// Where an upload's part N is staged in the store, and the prefix of all of them.
std::string staged_prefix(const std::string& upload_id);
std::string staged_part_key(const std::string& upload_id, std::uint32_t part_number);

}  // namespace sluice::s3
