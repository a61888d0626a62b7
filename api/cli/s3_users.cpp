#include "api/cli/s3_users.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <chrono>
#include <filesystem>

#include "actors/s3/names.hpp"

namespace sluice::cli {
namespace {

/// Finalizes a statement on every way out.
struct statement {
  sqlite3_stmt* s = nullptr;
  ~statement() { sqlite3_finalize(s); }
};

std::string text_of(sqlite3_stmt* s, int column) {
  const auto* p = sqlite3_column_text(s, column);
  return p == nullptr ? std::string{} : std::string{reinterpret_cast<const char*>(p)};
}

error db_error(sqlite3* db, std::string_view what) {
  return error{errc::unavailable, std::string{what} + ": " + sqlite3_errmsg(db)};
}

/// `n` characters of `alphabet`, from the kernel's random source.
result<std::string> random_text(std::size_t n, std::string_view alphabet) {
  std::string out;
  while (out.size() < n) {
    unsigned char bytes[64];
    auto got = ::getrandom(bytes, sizeof bytes, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return fail(errc::unavailable, "no random bytes for a key");
    }
    // Rejection sampling: no character is likelier than another.
    auto limit = 256 - 256 % alphabet.size();
    for (ssize_t i = 0; i < got && out.size() < n; ++i) {
      if (bytes[i] < limit) out.push_back(alphabet[bytes[i] % alphabet.size()]);
    }
  }
  return out;
}

bool valid_user_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '@' || c == '-';
    if (!ok) return false;
  }
  return true;
}

result<void> check_bucket(const std::string& bucket) {
  if (bucket == s3::any_bucket || s3::valid_bucket_name(bucket)) return {};
  return fail(errc::invalid_argument, "'" + bucket + "' is not an S3 bucket name (or * for every bucket)");
}

}  // namespace

result<std::pair<std::string, s3::bucket_access>> parse_grant(std::string_view text) {
  auto eq = text.find('=');
  auto access = eq == std::string_view::npos ? std::nullopt : s3::parse_bucket_access(text.substr(eq + 1));
  if (!access) {
    return fail(errc::invalid_argument,
                "a grant is BUCKET=read, BUCKET=write or BUCKET=none (BUCKET * for every bucket), not '" +
                    std::string{text} + "'");
  }
  std::string bucket{text.substr(0, eq)};
  if (auto ok = check_bucket(bucket); !ok) return ok.error();
  return std::pair{bucket, *access};
}

result<std::unique_ptr<s3_user_store>> s3_user_store::open(const std::string& path, bool create) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    if (!create) return fail(errc::not_found, "no users file at '" + path + "' (sluice s3 user add makes one)");
    // Made here, readable by its owner only: it holds secrets.
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno != EEXIST) {
      return fail(errc::unavailable, "cannot create the users file '" + path + "': " + std::strerror(errno));
    }
    if (fd >= 0) ::close(fd);
  }
  std::unique_ptr<s3_user_store> out{new s3_user_store{}};
  if (sqlite3_open_v2(path.c_str(), &out->db_, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    return fail(errc::unavailable, "cannot open the users file '" + path + "': " +
                                       (out->db_ ? sqlite3_errmsg(out->db_) : "out of memory"));
  }
  sqlite3_busy_timeout(out->db_, 5000);  // the gateway and `sluice s3 user` share the file
  for (const char* sql :
       {"PRAGMA foreign_keys=ON",
        "CREATE TABLE IF NOT EXISTS users (name TEXT PRIMARY KEY, access_key TEXT NOT NULL UNIQUE, "
        "secret_key TEXT NOT NULL, created_ns INTEGER NOT NULL)",
        "CREATE TABLE IF NOT EXISTS grants (name TEXT NOT NULL REFERENCES users(name) ON DELETE CASCADE, "
        "bucket TEXT NOT NULL, access TEXT NOT NULL, PRIMARY KEY (name, bucket))"}) {
    if (auto ok = out->exec(sql); !ok) return ok.error();
  }
  return out;
}

s3_user_store::~s3_user_store() { sqlite3_close(db_); }

result<void> s3_user_store::exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string why = message != nullptr ? message : "unknown error";
    sqlite3_free(message);
    return fail(errc::unavailable, "the users file: " + why);
  }
  return {};
}

result<s3::s3_user> s3_user_store::add(const std::string& name,
                                       const std::vector<std::pair<std::string, s3::bucket_access>>& grants) {
  if (!valid_user_name(name)) {
    return fail(errc::invalid_argument, "a user name is 1 to 64 of A-Z a-z 0-9 . _ @ -, not '" + name + "'");
  }
  auto key = random_text(18, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  if (!key) return key.error();
  auto secret = random_text(40, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/");
  if (!secret) return secret.error();
  s3::s3_user user{.name = name, .keys = {.access_key = "SL" + *key, .secret_key = *secret}, .grants = {}};
  std::lock_guard lock{mutex_};
  if (auto ok = exec("BEGIN IMMEDIATE"); !ok) return ok.error();
  auto rollback = [this](error e) -> error {
    (void)exec("ROLLBACK");
    return e;
  };
  {
    statement st;
    sqlite3_prepare_v2(db_, "INSERT INTO users (name, access_key, secret_key, created_ns) VALUES (?, ?, ?, ?)", -1,
                       &st.s, nullptr);
    sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st.s, 2, user.keys.access_key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st.s, 3, user.keys.secret_key.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st.s, 4, std::chrono::system_clock::now().time_since_epoch().count());
    auto rc = sqlite3_step(st.s);
    if (rc == SQLITE_CONSTRAINT) return rollback(error{errc::conflict, "there is a user '" + name + "' already"});
    if (rc != SQLITE_DONE) return rollback(db_error(db_, "cannot add the user"));
  }
  for (const auto& [bucket, access] : grants) {
    if (auto ok = check_bucket(bucket); !ok) return rollback(ok.error());
    if (access == s3::bucket_access::none) continue;
    statement st;
    sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO grants (name, bucket, access) VALUES (?, ?, ?)", -1, &st.s,
                       nullptr);
    sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st.s, 2, bucket.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st.s, 3, std::string{s3::to_string(access)}.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st.s) != SQLITE_DONE) return rollback(db_error(db_, "cannot grant"));
    user.grants.emplace_back(bucket, access);
  }
  if (auto ok = exec("COMMIT"); !ok) return rollback(ok.error());
  return user;
}

result<bool> s3_user_store::remove(const std::string& name) {
  std::lock_guard lock{mutex_};
  statement st;
  sqlite3_prepare_v2(db_, "DELETE FROM users WHERE name = ?", -1, &st.s, nullptr);
  sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return db_error(db_, "cannot remove the user");
  return sqlite3_changes(db_) > 0;
}

result<void> s3_user_store::grant(const std::string& name, const std::string& bucket, s3::bucket_access access) {
  if (auto ok = check_bucket(bucket); !ok) return ok.error();
  std::lock_guard lock{mutex_};
  {
    statement st;
    sqlite3_prepare_v2(db_, "SELECT 1 FROM users WHERE name = ?", -1, &st.s, nullptr);
    sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st.s) != SQLITE_ROW) return fail(errc::not_found, "there is no user '" + name + "'");
  }
  statement st;
  if (access == s3::bucket_access::none) {
    sqlite3_prepare_v2(db_, "DELETE FROM grants WHERE name = ? AND bucket = ?", -1, &st.s, nullptr);
  } else {
    sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO grants (name, bucket, access) VALUES (?, ?, ?)", -1, &st.s,
                       nullptr);
    sqlite3_bind_text(st.s, 3, std::string{s3::to_string(access)}.c_str(), -1, SQLITE_TRANSIENT);
  }
  sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  sqlite3_bind_text(st.s, 2, bucket.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st.s) != SQLITE_DONE) return db_error(db_, "cannot grant");
  return {};
}

result<std::vector<std::pair<std::string, s3::bucket_access>>> s3_user_store::grants_of(const std::string& name) {
  std::vector<std::pair<std::string, s3::bucket_access>> out;
  statement st;
  sqlite3_prepare_v2(db_, "SELECT bucket, access FROM grants WHERE name = ? ORDER BY bucket", -1, &st.s, nullptr);
  sqlite3_bind_text(st.s, 1, name.c_str(), -1, SQLITE_TRANSIENT);
  int rc;
  while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
    auto access = s3::parse_bucket_access(text_of(st.s, 1));
    if (access) out.emplace_back(text_of(st.s, 0), *access);  // an unknown level grants nothing
  }
  if (rc != SQLITE_DONE) return db_error(db_, "cannot read grants");
  return out;
}

result<std::vector<s3::s3_user>> s3_user_store::all() {
  std::lock_guard lock{mutex_};
  std::vector<s3::s3_user> out;
  {
    statement st;
    sqlite3_prepare_v2(db_, "SELECT name, access_key, secret_key FROM users ORDER BY name", -1, &st.s, nullptr);
    int rc;
    while ((rc = sqlite3_step(st.s)) == SQLITE_ROW) {
      out.push_back(s3::s3_user{.name = text_of(st.s, 0), .keys = {text_of(st.s, 1), text_of(st.s, 2)}, .grants = {}});
    }
    if (rc != SQLITE_DONE) return db_error(db_, "cannot list users");
  }
  for (auto& u : out) {
    auto grants = grants_of(u.name);
    if (!grants) return grants.error();
    u.grants = std::move(*grants);
  }
  return out;
}

std::optional<s3::s3_user> s3_user_store::find(std::string_view access_key) {
  std::lock_guard lock{mutex_};
  s3::s3_user user;
  {
    statement st;
    sqlite3_prepare_v2(db_, "SELECT name, access_key, secret_key FROM users WHERE access_key = ?", -1, &st.s,
                       nullptr);
    sqlite3_bind_text(st.s, 1, access_key.data(), static_cast<int>(access_key.size()), SQLITE_TRANSIENT);
    if (sqlite3_step(st.s) != SQLITE_ROW) return std::nullopt;  // unknown, or the file unreadable: refused
    user = s3::s3_user{.name = text_of(st.s, 0), .keys = {text_of(st.s, 1), text_of(st.s, 2)}, .grants = {}};
  }
  auto grants = grants_of(user.name);
  if (!grants) return std::nullopt;
  user.grants = std::move(*grants);
  return user;
}

}  // namespace sluice::cli
