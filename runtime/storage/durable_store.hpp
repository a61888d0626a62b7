// durable_store: the small key-value store a role keeps across restarts
// (its identity today; the master's directory later). Role code depends on
// this interface only. Real nodes use an implementation on disk or, when
// no data directory is configured, in memory (nothing survives a
// restart); the simulator supplies one with crash semantics.
//
// Contract: writes become durable only when sync() returns ok; a crash
// may lose any write made after the last successful sync (and keeps, of
// those, at most a prefix in write order). Single-threaded.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "sluice/result.hpp"

namespace sluice {

class durable_store {
 public:
  virtual ~durable_store() = default;

  virtual result<std::optional<std::string>> get(std::string_view key) = 0;
  virtual result<void> put(std::string_view key, std::string_view value) = 0;
  virtual result<void> erase(std::string_view key) = 0;
  /// Makes every earlier write durable. A failure with `unavailable`
  /// leaves the writes pending (sync may be tried again); any other
  /// failure means they are lost.
  virtual result<void> sync() = 0;
  /// Drops every write since the last successful sync.
  virtual void discard() = 0;
  /// Calls `visit` for every key that starts with `prefix`, in key order,
  /// as this store sees them (its own unsynced writes included).
  virtual result<void> scan(std::string_view prefix,
                            const std::function<void(std::string_view key, std::string_view value)>& visit) = 0;
};

/// Keeps everything in process memory: durable for the life of the
/// process only.
class memory_durable_store final : public durable_store {
 public:
  result<std::optional<std::string>> get(std::string_view key) override {
    auto it = values_.find(key);
    if (it == values_.end()) return std::optional<std::string>{};
    return std::optional<std::string>{it->second};
  }
  result<void> put(std::string_view key, std::string_view value) override {
    remember(key);
    values_.insert_or_assign(std::string{key}, std::string{value});
    return {};
  }
  result<void> erase(std::string_view key) override {
    remember(key);
    if (auto it = values_.find(key); it != values_.end()) values_.erase(it);
    return {};
  }
  result<void> sync() override {
    undo_.clear();
    return {};
  }
  void discard() override {
    for (auto& [key, value] : undo_) {
      if (value) {
        values_.insert_or_assign(key, *value);
      } else {
        values_.erase(key);
      }
    }
    undo_.clear();
  }
  result<void> scan(std::string_view prefix,
                    const std::function<void(std::string_view, std::string_view)>& visit) override {
    for (auto it = values_.lower_bound(prefix); it != values_.end() && it->first.starts_with(prefix); ++it) {
      visit(it->first, it->second);
    }
    return {};
  }

 private:
  /// Keeps a key's value as of the last sync, the first time it changes.
  void remember(std::string_view key) {
    if (undo_.contains(key)) return;
    auto it = values_.find(key);
    undo_.emplace(std::string{key}, it == values_.end() ? std::nullopt : std::optional<std::string>{it->second});
  }

  std::map<std::string, std::string, std::less<>> values_;
  std::map<std::string, std::optional<std::string>, std::less<>> undo_;
};

}  // namespace sluice
