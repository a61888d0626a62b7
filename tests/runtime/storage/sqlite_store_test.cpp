// The sqlite-backed durable store: what sync() commits survives a reopen.

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>

#include "runtime/storage/sqlite_store.hpp"

namespace {

std::string db_path(const char* stem) {
  static int n = 0;
  return "/tmp/sluice-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + "-" + stem + ".db";
}

void remove_db(const std::string& path) {
  for (auto suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

std::map<std::string, std::string> scan_all(sluice::durable_store& s, std::string_view prefix) {
  std::map<std::string, std::string> out;
  REQUIRE(s.scan(prefix, [&out](std::string_view k, std::string_view v) { out.emplace(k, v); }).ok());
  return out;
}

}  // namespace

TEST_CASE("sqlite store: synced writes survive a reopen, binary keys and values included") {
  auto path = db_path("reopen");
  {
    auto s = sluice::sqlite_store::open(path);
    REQUIRE(s.ok());
    REQUIRE((*s)->put("obj/a", "1").ok());
    REQUIRE((*s)->put(std::string{"obj/\0b", 6}, std::string{"\0\1\2", 3}).ok());
    REQUIRE((*s)->put("meta/x", "y").ok());
    REQUIRE((*s)->sync().ok());
    REQUIRE((*s)->erase("obj/a").ok());
    REQUIRE((*s)->sync().ok());
  }
  auto s = sluice::sqlite_store::open(path);
  REQUIRE(s.ok());
  CHECK_FALSE((*s)->get("obj/a").value().has_value());
  CHECK((*s)->get(std::string{"obj/\0b", 6}).value() == std::optional<std::string>{std::string{"\0\1\2", 3}});
  auto objects = scan_all(**s, "obj/");
  CHECK(objects.size() == 1);
  CHECK(scan_all(**s, "meta/").size() == 1);
  remove_db(path);
}

TEST_CASE("sqlite store: a store sees its own unsynced writes") {
  auto path = db_path("own");
  auto s = sluice::sqlite_store::open(path);
  REQUIRE(s.ok());
  REQUIRE((*s)->put("k", "v").ok());
  CHECK((*s)->get("k").value() == std::optional<std::string>{"v"});
  CHECK(scan_all(**s, "").size() == 1);
  remove_db(path);
}

TEST_CASE("sqlite store: a path it cannot create is an unavailable error") {
  auto s = sluice::sqlite_store::open("/nonexistent-dir/x/y.db");
  CHECK(s.code() == sluice::errc::unavailable);
}

TEST_CASE("durable stores: discard drops the writes since the last sync, nothing before") {
  auto path = db_path("discard");
  auto sqlite = sluice::sqlite_store::open(path, /*fsync=*/false);
  REQUIRE(sqlite.ok());
  sluice::memory_durable_store memory;
  for (sluice::durable_store* s : {static_cast<sluice::durable_store*>(sqlite->get()),
                                   static_cast<sluice::durable_store*>(&memory)}) {
    REQUIRE(s->put("kept", "1").ok());
    REQUIRE(s->put("changed", "old").ok());
    REQUIRE(s->sync().ok());
    REQUIRE(s->put("changed", "new").ok());
    REQUIRE(s->put("added", "x").ok());
    REQUIRE(s->erase("kept").ok());
    s->discard();
    CHECK(scan_all(*s, "") == std::map<std::string, std::string>{{"changed", "old"}, {"kept", "1"}});
    REQUIRE(s->put("after", "y").ok());  // the store still takes writes
    REQUIRE(s->sync().ok());
    CHECK(s->get("after").value() == std::optional<std::string>{"y"});
  }
  remove_db(path);
}
