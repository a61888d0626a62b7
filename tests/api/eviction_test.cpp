// Eviction through the public API: an owner with a small pool keeps taking
// puts by evicting the least recently used values, never one a reader
// holds, and answers no_capacity when nothing may go.

#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/node.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;

constexpr std::size_t value_bytes = 100 << 10;

struct fixture {
  std::unique_ptr<sluice::local_cluster> cluster;
  std::unique_ptr<sluice::client> kv;

  explicit fixture(const std::string& owner_config) {
    sluice::local_cluster_options options;
    options.config_text = "[master]\nheartbeat_interval = \"50ms\"\nheartbeat_timeout = \"1s\"\n[owner]\n" +
                          owner_config;
    auto c = sluice::local_cluster::start(options);
    REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
    cluster = std::move(*c);
    auto k = cluster->connect();
    REQUIRE_MESSAGE(k.ok(), (k ? "" : k.error().to_string()));
    kv = std::move(*k);
  }
};

std::string value_for(int i) { return std::string(value_bytes, static_cast<char>('a' + i % 26)); }

std::uint64_t evictions(sluice::client& kv) {
  // Owners report evictions with their heartbeats.
  std::uint64_t n = 0;
  for (int i = 0; i < 100; ++i) {
    auto s = kv.status();
    REQUIRE(s.ok());
    n = s->members.at(0).evictions;
    if (n > 0) return n;
    std::this_thread::sleep_for(20ms);
  }
  return n;
}

}  // namespace

TEST_CASE("eviction: a full owner evicts the least recently used values and keeps taking puts") {
  fixture f{"capacity = \"1MiB\"\nshm = \"off\"\nevict_high = 90\nevict_low = 60\n"};
  // 30 values of 100 KiB into 1 MiB: most must be evicted on the way.
  for (int i = 0; i < 30; ++i) {
    auto v = f.kv->put("k" + std::to_string(i), value_for(i));
    REQUIRE_MESSAGE(v.ok(), "put " << i << ": " << v.error().to_string());
    // k0 is read after every put: always recently used, never evicted.
    if (i > 0) REQUIRE(f.kv->get("k0").value().str() == value_for(0));
  }
  CHECK(f.kv->get("k0").ok());
  CHECK(f.kv->get("k29").value().str() == value_for(29));
  int present = 0;
  for (int i = 1; i < 30; ++i) {
    auto got = f.kv->get("k" + std::to_string(i));
    if (got.ok()) {
      ++present;
      CHECK(got->str() == value_for(i));  // never the bytes of another key
    } else {
      CHECK(got.code() == errc::not_found);  // evicted keys answer not_found
    }
  }
  CHECK(present >= 4);
  CHECK(present <= 9);
  // The oldest values went first.
  CHECK_FALSE(f.kv->exists("k1").value());
  CHECK(f.kv->exists("k28").value());
  CHECK(evictions(*f.kv) >= 20);
  CHECK(f.kv->count("k").value() == static_cast<std::uint64_t>(present + 1));
}

TEST_CASE("eviction: a value a reader holds is never evicted, and with nothing evictable a put gets no_capacity") {
  fixture f{"capacity = \"1MiB\"\nshm = \"off\"\nevict_high = 90\nevict_low = 60\n"};
  std::vector<sluice::value> held;
  for (int i = 0; i < 8; ++i) {
    REQUIRE(f.kv->put("held" + std::to_string(i), value_for(i)).ok());
    held.push_back(f.kv->get("held" + std::to_string(i)).value());
  }
  // 800 KiB held by readers: a 300 KiB put cannot find room.
  auto big = f.kv->put("big", std::string(300 << 10, 'B'));
  CHECK(big.code() == errc::no_capacity);
  for (int i = 0; i < 8; ++i) CHECK(f.kv->exists("held" + std::to_string(i)).value());
  // Readers let go: the same put evicts and fits.
  held.clear();
  auto again = f.kv->put("big", std::string(300 << 10, 'B'));
  CHECK_MESSAGE(again.ok(), (again ? "" : again.error().to_string()));
  CHECK(f.kv->get("big").value().size() == 300 << 10);
}

TEST_CASE("eviction: with eviction off a full owner answers no_capacity and keeps what it has") {
  fixture f{"capacity = \"1MiB\"\nshm = \"off\"\neviction = \"none\"\n"};
  int stored = 0;
  for (int i = 0; i < 12; ++i) {
    auto v = f.kv->put("k" + std::to_string(i), value_for(i));
    if (v.ok()) {
      ++stored;
    } else {
      CHECK(v.code() == errc::no_capacity);
    }
  }
  CHECK(stored >= 8);
  CHECK(stored < 12);
  for (int i = 0; i < stored; ++i) CHECK(f.kv->get("k" + std::to_string(i)).value().str() == value_for(i));
}

TEST_CASE("eviction: a pinned key is never evicted until its pin is lifted, lapses, or its client goes away") {
  fixture f{"capacity = \"1MiB\"\nshm = \"off\"\nevict_high = 90\nevict_low = 60\n"};
  REQUIRE(f.kv->put("pinned", value_for(0)).ok());
  REQUIRE(f.kv->put("briefly", value_for(1)).ok());
  CHECK(f.kv->pin("pinned").value() > 0);
  CHECK(f.kv->pin("briefly", {.ttl = 300ms}).ok());
  CHECK(f.kv->pin("missing").code() == errc::not_found);
  // The oldest keys, never read again: only the pins keep them.
  for (int i = 2; i < 30; ++i) REQUIRE(f.kv->put("k" + std::to_string(i), value_for(i)).ok());
  CHECK(f.kv->get("pinned").value().str() == value_for(0));
  CHECK(f.kv->exists("briefly").value());
  CHECK_FALSE(f.kv->exists("k2").value());  // unpinned and old: gone
  // The short pin lapses; the other is lifted.
  std::this_thread::sleep_for(350ms);
  CHECK(f.kv->unpin("pinned").value());
  CHECK_FALSE(f.kv->unpin("pinned").value());
  for (int i = 30; i < 50; ++i) REQUIRE(f.kv->put("k" + std::to_string(i), value_for(i)).ok());
  CHECK_FALSE(f.kv->exists("pinned").value());
  CHECK_FALSE(f.kv->exists("briefly").value());

  // A client's pins go with it.
  REQUIRE(f.kv->put("theirs", value_for(2)).ok());
  {
    auto other = f.cluster->connect();
    REQUIRE(other.ok());
    REQUIRE((*other)->pin("theirs").ok());
    for (int i = 50; i < 70; ++i) REQUIRE(f.kv->put("k" + std::to_string(i), value_for(i)).ok());
    CHECK(f.kv->exists("theirs").value());
  }
  // The owner stops listing the client with its next heartbeat (50 ms).
  std::this_thread::sleep_for(300ms);
  for (int i = 70; i < 90; ++i) REQUIRE(f.kv->put("k" + std::to_string(i), value_for(i)).ok());
  CHECK_FALSE(f.kv->exists("theirs").value());
}
