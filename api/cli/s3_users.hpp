// The S3 gateway's users, kept in a sqlite file: `sluice s3 user …`
// manages them, and a gateway started with --users FILE checks every
// request against them (s3::user_directory). A lookup reads the file, so
// users added, removed or granted while the gateway runs count from the
// next request on. The file holds secrets: it is created readable by
// its owner only, and no secret is ever logged.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/s3/users.hpp"
#include "sluice/result.hpp"

struct sqlite3;

namespace sluice::cli {

class s3_user_store final : public s3::user_directory {
 public:
  /// `create`: make the file (mode 0600) when it is not there; else a
  /// missing file is not_found.
  static result<std::unique_ptr<s3_user_store>> open(const std::string& path, bool create);
  ~s3_user_store() override;
  s3_user_store(const s3_user_store&) = delete;
  s3_user_store& operator=(const s3_user_store&) = delete;

  /// A new user with fresh keys; conflict when the name is taken,
  /// invalid_argument for a name that is not 1-64 of A-Z a-z 0-9 . _ @ -.
  result<s3::s3_user> add(const std::string& name,
                          const std::vector<std::pair<std::string, s3::bucket_access>>& grants);
  /// False when there was no such user.
  result<bool> remove(const std::string& name);
  /// Sets the user's grant on `bucket` ("*": every bucket); none removes it.
  result<void> grant(const std::string& name, const std::string& bucket, s3::bucket_access access);
  /// Every user, by name, secrets included (for the caller to leave out).
  result<std::vector<s3::s3_user>> all();

  std::optional<s3::s3_user> find(std::string_view access_key) override;

 private:
  s3_user_store() = default;
  result<void> exec(const char* sql);
  result<std::vector<std::pair<std::string, s3::bucket_access>>> grants_of(const std::string& name);

  std::mutex mutex_;
  sqlite3* db_ = nullptr;
};

/// "BUCKET=ACCESS" (ACCESS: read, write or none).
result<std::pair<std::string, s3::bucket_access>> parse_grant(std::string_view text);

}  // namespace sluice::cli
