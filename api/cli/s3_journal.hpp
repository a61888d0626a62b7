// The write-back journal in a sqlite file: one row per object
// acknowledged and not yet in its file (write_back.hpp). A write-back
// PUT is answered once its row is committed to the file (in the kernel's
// page cache: it survives the gateway's process), and sync() puts what
// was committed on the disk (the gateway calls it every second). `sluice
// s3 status` reads the same file, while the gateway runs or not.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/s3/write_back.hpp"

struct sqlite3;

namespace sluice::cli {

class s3_journal final : public s3::write_back_journal {
 public:
  /// Opens `path`, made when missing; conflict when another gateway has it
  /// open.
  static result<std::unique_ptr<s3_journal>> open(const std::string& path);
  ~s3_journal() override;

  std::string id() const override { return id_; }
  result<std::vector<s3::dirty_object>> load() override;
  result<void> add(const s3::dirty_object& object) override;
  result<void> remove(std::span<const std::uint64_t> seqs) override;
  result<void> failed(std::uint64_t seq, std::uint32_t attempts, const std::string& error) override;
  /// What was committed, on the disk when it returns.
  result<void> sync();

 private:
  s3_journal() = default;

  std::mutex mutex_;
  sqlite3* db_ = nullptr;
  int lock_fd_ = -1;
  std::string id_;
  std::string path_;
};

/// What `sluice s3 status` shows of one bucket.
struct journal_bucket_status {
  std::string bucket{};
  std::uint64_t objects = 0;
  std::uint64_t bytes = 0;
  std::int64_t oldest_ns = 0;  ///< acknowledged at; 0 when none
  std::uint64_t failing = 0;
};

struct journal_failure {
  std::string bucket{};
  std::string key{};
  std::uint64_t size = 0;
  std::int64_t acknowledged_ns = 0;
  std::uint32_t attempts = 0;
  std::string error{};
};

struct journal_status {
  std::vector<journal_bucket_status> buckets{};  ///< by name, those with dirty objects
  std::vector<journal_failure> failures{};       ///< the 100 oldest failing objects
  bool in_use = false;                           ///< a gateway has the journal open
};

/// Reads `path` without taking it: not_found when there is no such file.
result<journal_status> read_journal_status(const std::string& path);

}  // namespace sluice::cli
