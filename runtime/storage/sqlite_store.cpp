#include "runtime/storage/sqlite_store.hpp"

#include <sqlite3.h>

namespace sluice {
namespace {

/// Resets a statement on every way out of the function that used it.
struct statement_reset {
  sqlite3_stmt* s;
  ~statement_reset() {
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
};

int bind_text(sqlite3_stmt* s, int index, std::string_view text) {
  return sqlite3_bind_blob(s, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

std::string_view column(sqlite3_stmt* s, int index) {
  auto* data = static_cast<const char*>(sqlite3_column_blob(s, index));
  return {data == nullptr ? "" : data, static_cast<std::size_t>(sqlite3_column_bytes(s, index))};
}

}  // namespace

result<std::unique_ptr<sqlite_store>> sqlite_store::open(const std::string& path, bool fsync) {
  std::unique_ptr<sqlite_store> out{new sqlite_store{}};
  if (sqlite3_open_v2(path.c_str(), &out->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return fail(errc::unavailable, "cannot open the database '" + path + "': " +
                                       (out->db_ ? sqlite3_errmsg(out->db_) : "out of memory"));
  }
  // In WAL mode, NORMAL keeps every commit across a crash of the process
  // and FULL across a crash of the machine too (an fsync per commit).
  for (const char* sql : {"PRAGMA journal_mode=WAL", fsync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                          "CREATE TABLE IF NOT EXISTS kv (key BLOB PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID"}) {
    if (auto ok = out->exec(sql); !ok) return ok.error();
  }
  struct {
    sqlite3_stmt** slot;
    const char* sql;
  } statements[] = {
      {&out->get_, "SELECT value FROM kv WHERE key = ?1"},
      {&out->put_, "INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)"},
      {&out->erase_, "DELETE FROM kv WHERE key = ?1"},
      {&out->scan_, "SELECT key, value FROM kv WHERE key >= ?1 ORDER BY key"},
  };
  for (auto& s : statements) {
    if (sqlite3_prepare_v2(out->db_, s.sql, -1, s.slot, nullptr) != SQLITE_OK) return out->failure("prepare");
  }
  return out;
}

sqlite_store::~sqlite_store() {
  if (in_transaction_) (void)exec("COMMIT");  // what was written is kept, as sync() would
  for (auto* s : {get_, put_, erase_, scan_}) sqlite3_finalize(s);
  sqlite3_close(db_);
}

error sqlite_store::failure(const char* what) const {
  return error{errc::unavailable, std::string{"the database failed to "} + what + ": " + sqlite3_errmsg(db_)};
}

result<void> sqlite_store::exec(const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    return fail(errc::unavailable, std::string{"the database failed '"} + sql + "': " + text);
  }
  return {};
}

result<void> sqlite_store::begin_if_needed() {
  if (in_transaction_) return {};
  if (auto ok = exec("BEGIN"); !ok) return ok;
  in_transaction_ = true;
  return {};
}

result<std::optional<std::string>> sqlite_store::get(std::string_view key) {
  statement_reset reset{get_};
  bind_text(get_, 1, key);
  int rc = sqlite3_step(get_);
  if (rc == SQLITE_DONE) return std::optional<std::string>{};
  if (rc != SQLITE_ROW) return failure("read");
  return std::optional<std::string>{std::string{column(get_, 0)}};
}

result<void> sqlite_store::put(std::string_view key, std::string_view value) {
  if (auto ok = begin_if_needed(); !ok) return ok;
  statement_reset reset{put_};
  bind_text(put_, 1, key);
  bind_text(put_, 2, value);
  if (sqlite3_step(put_) != SQLITE_DONE) return failure("write");
  return {};
}

result<void> sqlite_store::erase(std::string_view key) {
  if (auto ok = begin_if_needed(); !ok) return ok;
  statement_reset reset{erase_};
  bind_text(erase_, 1, key);
  if (sqlite3_step(erase_) != SQLITE_DONE) return failure("write");
  return {};
}

result<void> sqlite_store::sync() {
  if (!in_transaction_) return {};
  auto ok = exec("COMMIT");
  in_transaction_ = sqlite3_get_autocommit(db_) == 0;
  if (!ok && !in_transaction_) {
    // SQLite rolled the transaction back: its writes are gone.
    return fail(errc::internal, ok.error().message() + "; the writes since the last sync are lost");
  }
  return ok;
}

void sqlite_store::discard() {
  if (!in_transaction_) return;
  (void)exec("ROLLBACK");
  in_transaction_ = false;
}

result<void> sqlite_store::scan(std::string_view prefix,
                                const std::function<void(std::string_view, std::string_view)>& visit) {
  statement_reset reset{scan_};
  bind_text(scan_, 1, prefix);
  while (true) {
    int rc = sqlite3_step(scan_);
    if (rc == SQLITE_DONE) return {};
    if (rc != SQLITE_ROW) return failure("scan");
    auto key = column(scan_, 0);
    if (!key.starts_with(prefix)) return {};
    visit(key, column(scan_, 1));
  }
}

}  // namespace sluice
