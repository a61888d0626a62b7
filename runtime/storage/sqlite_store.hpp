// sqlite_store: a durable_store in a SQLite database (WAL). Writes go into
// an open transaction; sync() commits it, so everything written between
// two syncs becomes durable together (group commit).
//
// Single-threaded, like every durable_store.
#pragma once

#include <memory>
#include <string>

#include "runtime/storage/durable_store.hpp"

struct sqlite3;
struct sqlite3_stmt;

namespace sluice {

class sqlite_store final : public durable_store {
 public:
  /// Opens (or creates) the database at `path`. With `fsync`, a sync
  /// survives a crash of the machine; without, a crash of the process.
  /// Errors: unavailable, with SQLite's message.
  static result<std::unique_ptr<sqlite_store>> open(const std::string& path, bool fsync = true);
  ~sqlite_store() override;
  sqlite_store(const sqlite_store&) = delete;
  sqlite_store& operator=(const sqlite_store&) = delete;

  result<std::optional<std::string>> get(std::string_view key) override;
  result<void> put(std::string_view key, std::string_view value) override;
  result<void> erase(std::string_view key) override;
  result<void> sync() override;
  void discard() override;
  result<void> scan(std::string_view prefix,
                    const std::function<void(std::string_view, std::string_view)>& visit) override;

 private:
  sqlite_store() = default;
  result<void> exec(const char* sql);
  result<void> begin_if_needed();
  error failure(const char* what) const;

  sqlite3* db_ = nullptr;
  sqlite3_stmt* get_ = nullptr;
  sqlite3_stmt* put_ = nullptr;
  sqlite3_stmt* erase_ = nullptr;
  sqlite3_stmt* scan_ = nullptr;
  bool in_transaction_ = false;
};

}  // namespace sluice
