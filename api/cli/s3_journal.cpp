#include "api/cli/s3_journal.hpp"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

namespace sluice::cli {
namespace {

struct statement {
  sqlite3_stmt* s = nullptr;
  ~statement() { sqlite3_finalize(s); }
};

error db_error(sqlite3* db, std::string_view what) {
  return error{errc::unavailable, "the write-back journal: " + std::string{what} + ": " + sqlite3_errmsg(db)};
}

std::string text_of(sqlite3_stmt* s, int column) {
  const auto* p = sqlite3_column_text(s, column);
  return p == nullptr ? std::string{} : std::string{reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s, column))};
}

std::string blob_of(sqlite3_stmt* s, int column) {
  const auto* p = sqlite3_column_blob(s, column);
  return p == nullptr ? std::string{} : std::string{static_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s, column))};
}

result<void> exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message == nullptr ? "?" : message;
    sqlite3_free(message);
    return fail(errc::unavailable, "the write-back journal: " + text);
  }
  return {};
}

std::string headers_json(const object_meta& meta) {
  auto out = nlohmann::json::array();
  for (const auto& [name, value] : meta.headers) out.push_back({name, value});
  return out.dump();
}

result<std::vector<std::pair<std::string, std::string>>> headers_of(const std::string& text) {
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (!parsed.is_array()) return fail(errc::internal, "the write-back journal holds headers that are not a list");
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& pair : parsed) {
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string()) {
      return fail(errc::internal, "the write-back journal holds a header that is not a name and a value");
    }
    out.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
  }
  return out;
}

result<std::string> new_journal_id() {
  std::uint64_t bits = 0;
  if (::getrandom(&bits, sizeof bits, 0) != static_cast<ssize_t>(sizeof bits)) {
    return fail(errc::unavailable, "no random bytes for the journal's id");
  }
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(bits));
  return std::string{id, 16};
}

}  // namespace

result<std::unique_ptr<s3_journal>> s3_journal::open(const std::string& path) {
  std::unique_ptr<s3_journal> out{new s3_journal};
  out->path_ = path;
  // One gateway per journal: two would flush each other's objects. The
  // lock goes with the process, so a crashed gateway leaves none behind.
  out->lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (out->lock_fd_ < 0) {
    return fail(errc::invalid_argument, "cannot open the write-back journal " + path + ": " + std::strerror(errno));
  }
  if (::flock(out->lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return fail(errc::conflict, "the write-back journal " + path + " is in use by another gateway");
  }
  if (sqlite3_open_v2(path.c_str(), &out->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    return fail(errc::invalid_argument, "cannot open the write-back journal " + path + ": " + sqlite3_errmsg(out->db_));
  }
  sqlite3_busy_timeout(out->db_, 5000);  // `sluice s3 status` reads it meanwhile
  for (const char* sql :
       // NORMAL: a commit is in the WAL, so in the kernel's hands: it
       // outlives the gateway's process. sync() puts it on the disk.
       {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
        "CREATE TABLE IF NOT EXISTS info (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS dirty (seq INTEGER PRIMARY KEY, bucket TEXT NOT NULL, key BLOB NOT NULL, "
        "size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, etag TEXT NOT NULL, headers TEXT NOT NULL, "
        "chunks_id INTEGER NOT NULL, chunk_bytes INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
        "last_error TEXT NOT NULL DEFAULT '')"}) {
    if (auto ok = exec(out->db_, sql); !ok) {
      return fail(errc::invalid_argument, "cannot use " + path + " as a write-back journal: " + ok.error().message());
    }
  }
  {
    statement s;
    sqlite3_prepare_v2(out->db_, "SELECT value FROM info WHERE name = 'id'", -1, &s.s, nullptr);
    if (s.s != nullptr && sqlite3_step(s.s) == SQLITE_ROW) out->id_ = text_of(s.s, 0);
  }
  if (out->id_.empty()) {
    auto id = new_journal_id();
    if (!id) return std::move(id).error();
    statement s;
    if (sqlite3_prepare_v2(out->db_, "INSERT INTO info (name, value) VALUES ('id', ?)", -1, &s.s, nullptr) != SQLITE_OK) {
      return db_error(out->db_, "prepare");
    }
    sqlite3_bind_text(s.s, 1, id->c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(s.s) != SQLITE_DONE) return db_error(out->db_, "name the journal");
    out->id_ = *id;
  }
  return out;
}

s3_journal::~s3_journal() {
  if (db_ != nullptr) sqlite3_close(db_);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

result<void> s3_journal::sync() {
  std::lock_guard lock{mutex_};
  // A checkpoint syncs the WAL, then copies it into the database.
  int rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, nullptr, nullptr);
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) return db_error(db_, "sync");
  return {};
}

result<std::vector<s3::dirty_object>> s3_journal::load() {
  std::lock_guard lock{mutex_};
  statement s;
  if (sqlite3_prepare_v2(db_,
                         "SELECT seq, bucket, key, size, mtime_ns, etag, headers, chunks_id, chunk_bytes, attempts, "
                         "last_error FROM dirty ORDER BY seq",
                         -1, &s.s, nullptr) != SQLITE_OK) {
    return db_error(db_, "prepare");
  }
  std::vector<s3::dirty_object> out;
  int rc = 0;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    s3::dirty_object o;
    o.seq = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 0));
    o.bucket = text_of(s.s, 1);
    o.key = blob_of(s.s, 2);
    o.identity = {.size = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 3)),
                  .mtime_ns = sqlite3_column_int64(s.s, 4),
                  .inode = 0};
    o.meta.etag = text_of(s.s, 5);
    auto headers = headers_of(text_of(s.s, 6));
    if (!headers) return std::move(headers).error();
    o.meta.headers = std::move(*headers);
    o.chunks_id = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 7));
    o.chunk_bytes = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 8));
    o.attempts = static_cast<std::uint32_t>(sqlite3_column_int64(s.s, 9));
    o.last_error = text_of(s.s, 10);
    if (o.chunk_bytes == 0) return fail(errc::internal, "the write-back journal holds an object without a chunk size");
    out.push_back(std::move(o));
  }
  if (rc != SQLITE_DONE) return db_error(db_, "read");
  return out;
}

result<void> s3_journal::add(const s3::dirty_object& o) {
  std::lock_guard lock{mutex_};
  statement s;
  if (sqlite3_prepare_v2(db_,
                         "INSERT INTO dirty (seq, bucket, key, size, mtime_ns, etag, headers, chunks_id, chunk_bytes) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         -1, &s.s, nullptr) != SQLITE_OK) {
    return db_error(db_, "prepare");
  }
  auto headers = headers_json(o.meta);
  sqlite3_bind_int64(s.s, 1, static_cast<sqlite3_int64>(o.seq));
  sqlite3_bind_text(s.s, 2, o.bucket.data(), static_cast<int>(o.bucket.size()), SQLITE_TRANSIENT);
  sqlite3_bind_blob(s.s, 3, o.key.data(), static_cast<int>(o.key.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.s, 4, static_cast<sqlite3_int64>(o.identity.size));
  sqlite3_bind_int64(s.s, 5, o.identity.mtime_ns);
  sqlite3_bind_text(s.s, 6, o.meta.etag.data(), static_cast<int>(o.meta.etag.size()), SQLITE_TRANSIENT);
  sqlite3_bind_text(s.s, 7, headers.data(), static_cast<int>(headers.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.s, 8, static_cast<sqlite3_int64>(o.chunks_id));
  sqlite3_bind_int64(s.s, 9, static_cast<sqlite3_int64>(o.chunk_bytes));
  if (sqlite3_step(s.s) != SQLITE_DONE) return db_error(db_, "record an object");
  return {};
}

result<void> s3_journal::remove(std::span<const std::uint64_t> seqs) {
  std::lock_guard lock{mutex_};
  if (auto ok = exec(db_, "BEGIN IMMEDIATE"); !ok) return ok;
  statement s;
  if (sqlite3_prepare_v2(db_, "DELETE FROM dirty WHERE seq = ?", -1, &s.s, nullptr) != SQLITE_OK) {
    (void)exec(db_, "ROLLBACK");
    return db_error(db_, "prepare");
  }
  for (auto seq : seqs) {
    sqlite3_reset(s.s);
    sqlite3_bind_int64(s.s, 1, static_cast<sqlite3_int64>(seq));
    if (sqlite3_step(s.s) != SQLITE_DONE) {
      auto e = db_error(db_, "forget an object");
      (void)exec(db_, "ROLLBACK");
      return e;
    }
  }
  return exec(db_, "COMMIT");
}

result<void> s3_journal::failed(std::uint64_t seq, std::uint32_t attempts, const std::string& error) {
  std::lock_guard lock{mutex_};
  statement s;
  if (sqlite3_prepare_v2(db_, "UPDATE dirty SET attempts = ?, last_error = ? WHERE seq = ?", -1, &s.s, nullptr) !=
      SQLITE_OK) {
    return db_error(db_, "prepare");
  }
  sqlite3_bind_int64(s.s, 1, attempts);
  sqlite3_bind_text(s.s, 2, error.data(), static_cast<int>(error.size()), SQLITE_TRANSIENT);
  sqlite3_bind_int64(s.s, 3, static_cast<sqlite3_int64>(seq));
  if (sqlite3_step(s.s) != SQLITE_DONE) return db_error(db_, "record a failed flush");
  return {};
}

result<journal_status> read_journal_status(const std::string& path) {
  journal_status out;
  {
    // Whether a gateway holds it; checked before sqlite opens the file, as
    // closing another descriptor of it would drop sqlite's own locks.
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) return fail(errc::not_found, "there is no write-back journal " + path);
      return fail(errc::invalid_argument, "cannot open " + path + ": " + std::strerror(errno));
    }
    if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
      out.in_use = true;
    } else {
      ::flock(fd, LOCK_UN);
    }
    ::close(fd);
  }
  sqlite3* db = nullptr;
  // Read-write (never created): reading a WAL database may need to write its index.
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string message = db == nullptr ? "out of memory" : sqlite3_errmsg(db);
    sqlite3_close(db);
    return fail(errc::invalid_argument, "cannot open " + path + ": " + message);
  }
  std::unique_ptr<sqlite3, int (*)(sqlite3*)> owned{db, sqlite3_close};
  sqlite3_busy_timeout(db, 5000);
  {
    statement s;
    if (sqlite3_prepare_v2(db,
                           "SELECT bucket, COUNT(*), SUM(size), MIN(mtime_ns), SUM(attempts > 0) FROM dirty "
                           "GROUP BY bucket ORDER BY bucket",
                           -1, &s.s, nullptr) != SQLITE_OK) {
      return fail(errc::invalid_argument, path + " is not a write-back journal: " + sqlite3_errmsg(db));
    }
    int rc = 0;
    while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
      out.buckets.push_back({.bucket = text_of(s.s, 0),
                             .objects = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 1)),
                             .bytes = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 2)),
                             .oldest_ns = sqlite3_column_int64(s.s, 3),
                             .failing = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 4))});
    }
    if (rc != SQLITE_DONE) return db_error(db, "read");
  }
  statement s;
  if (sqlite3_prepare_v2(db,
                         "SELECT bucket, key, size, mtime_ns, attempts, last_error FROM dirty WHERE attempts > 0 "
                         "ORDER BY seq LIMIT 100",
                         -1, &s.s, nullptr) != SQLITE_OK) {
    return db_error(db, "prepare");
  }
  int rc = 0;
  while ((rc = sqlite3_step(s.s)) == SQLITE_ROW) {
    out.failures.push_back({.bucket = text_of(s.s, 0),
                            .key = blob_of(s.s, 1),
                            .size = static_cast<std::uint64_t>(sqlite3_column_int64(s.s, 2)),
                            .acknowledged_ns = sqlite3_column_int64(s.s, 3),
                            .attempts = static_cast<std::uint32_t>(sqlite3_column_int64(s.s, 4)),
                            .error = text_of(s.s, 5)});
  }
  if (rc != SQLITE_DONE) return db_error(db, "read");
  return out;
}

}  // namespace sluice::cli
