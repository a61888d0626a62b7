// The S3 gateway as the launcher runs it: alone (`sluice s3`) or beside
// an owner in `sluice up`. Checks the [s3] settings, then wires the
// bucket store, the read path (through the chunk cache, a client of the
// owner, when there is one), the protocol core and the HTTP server.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/s3/chunk_cache.hpp"
#include "actors/s3/gateway.hpp"
#include "actors/s3/write_back.hpp"
#include "api/cli/s3_journal.hpp"
#include "api/cli/s3_users.hpp"
#include "api/src/s3_server.hpp"
#include "runtime/config/node_config.hpp"
#include "runtime/storage/posix_bucket_store.hpp"
#include "sluice/result.hpp"

namespace sluice::cli {

/// A serving gateway; dropping it stops the server, then the rest.
class running_s3_gateway {
 public:
  /// invalid_argument for settings that cannot work (no bucket, no
  /// access mode, a bad NAME=DIR), with a message that says what to give;
  /// other errors when the directories or the port cannot be had.
  /// An empty `listen` means 127.0.0.1:9000. `flag_prefix` names the
  /// flags in messages: "--" for `sluice s3`, "--s3-" for `sluice up`.
  static result<std::unique_ptr<running_s3_gateway>> start(const s3_section& settings, std::string_view flag_prefix);
  ~running_s3_gateway();
  running_s3_gateway(const running_s3_gateway&) = delete;
  running_s3_gateway& operator=(const running_s3_gateway&) = delete;

  /// "127.0.0.1:9000", the port resolved.
  const std::string& address() const { return server_->address(); }
  /// " (requests must be signed with SigV4, access key K)" or the anonymous warning.
  std::string access_note() const;
  /// "chunks of 4 MiB cached in the pool of the owner at ADDR", or why
  /// reads go to the files.
  std::string cache_note() const;
  /// "write-back for buckets a, b: ..." or empty without write-back.
  std::string write_back_note() const;

 private:
  running_s3_gateway() = default;
  std::string access_key_;  ///< empty: anonymous, or users
  std::string users_path_;  ///< empty: no users
  std::unique_ptr<s3_user_store> users_;
  std::string cache_note_;
  std::unique_ptr<posix_bucket_store> store_;
  std::unique_ptr<s3::store_read_path> file_reads_;
  std::unique_ptr<s3::chunk_store> chunks_;  ///< null: no cache
  std::unique_ptr<s3::cached_read_path> cached_reads_;
  // Write-back, when some bucket has it: the store the gateway uses wraps
  // store_, and a thread writes the files.
  std::unique_ptr<s3_journal> journal_;
  std::unique_ptr<s3::write_back_store> write_back_;
  std::string write_back_note_;
  std::mutex flush_mutex_;
  std::condition_variable flush_wake_;
  bool flush_woken_ = false;
  bool flush_stopping_ = false;
  std::thread flusher_;
  std::unique_ptr<s3::gateway> gateway_;
  std::unique_ptr<s3_server> server_;

  result<void> start_write_back(const s3_section& settings, std::string_view flag_prefix);
  void flush_loop();
  void wake_flusher();
};

}  // namespace sluice::cli
