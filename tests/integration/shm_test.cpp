// Several processes on one host sharing an owner's memory: real `sluice
// up` and real client processes that are killed at awkward moments.

#include <doctest/doctest.h>

#include <signal.h>

#include <cstdio>
#include <thread>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::test::process;

using sluice::test::sluice_bin;
const std::string child_bin = SLUICE_TEST_CHILD;

struct cluster_proc {
  std::unique_ptr<process> proc;
  std::string address;
};

cluster_proc start_up(const std::string& config_text = {}) {
  std::vector<std::string> args{"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"};
  if (!config_text.empty()) {
    args.push_back("--config");
    args.push_back(sluice::test::write_config(config_text));
  }
  cluster_proc c;
  c.proc = std::make_unique<process>(sluice_bin, args, sluice::test::temp_path("up.log"));
  auto line = c.proc->read_line(10s);
  REQUIRE(line.has_value());
  c.address = sluice::test::address_in(*line);
  REQUIRE(!c.address.empty());
  return c;
}

/// Retries `put` until it succeeds (memory a dead process held comes back
/// within moments) or 5 s pass.
sluice::result<std::uint64_t> put_eventually(sluice::client& kv, const std::string& key, const std::string& value) {
  sluice::result<std::uint64_t> r = sluice::error{sluice::errc::timeout, "never tried"};
  for (int i = 0; i < 500; ++i) {
    r = kv.put(key, value);
    if (r || r.code() != sluice::errc::no_capacity) return r;
    std::this_thread::sleep_for(10ms);
  }
  return r;
}

/// Puts `count` values of 1 MiB under `prefix` + 0, 1, ...
void fill(sluice::client& kv, const std::string& prefix, int count) {
  for (int i = 0; i < count; ++i) REQUIRE(kv.put(prefix + std::to_string(i), std::string(1 << 20, 'f')).ok());
}

/// Keeps putting new 1 MiB values (4 per round, a round every 100 ms, at
/// most 50 rounds) until `key` is evicted; whether it was.
bool evicted_eventually(sluice::client& kv, const std::string& key) {
  for (int round = 0; round < 50; ++round) {
    std::this_thread::sleep_for(100ms);
    fill(kv, "more/" + std::to_string(round) + "/", 4);
    if (!kv.exists(key).value()) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("shm: several client processes put and get concurrently on one owner, every byte checked") {
  auto up = start_up();
  std::vector<std::unique_ptr<process>> children;
  const char* sizes[] = {"64", "4096", "65536", "262144"};
  for (int i = 0; i < 4; ++i) {
    children.push_back(std::make_unique<process>(
        child_bin, std::vector<std::string>{up.address, "hammer", std::to_string(i), "150", sizes[i]}));
  }
  for (auto& c : children) REQUIRE(c->read_line(10s) == std::optional<std::string>{"ready"});
  for (auto& c : children) {
    auto verdict = c->read_line(60s);
    REQUIRE(verdict.has_value());
    CHECK(*verdict == "ok 150");
    CHECK(c->wait(10s) == std::optional<int>{0});
  }
}

TEST_CASE("shm: a client killed in the middle of a put loses nothing committed and its memory comes back") {
  // Without eviction: "keep" must survive whatever the pool goes through.
  auto up = start_up("[owner]\ncapacity = \"8MiB\"\neviction = \"none\"\n");
  auto kv = sluice::test::connect_shm(up.address);
  std::string keep(1 << 20, 'k');
  REQUIRE(kv->put("keep", keep).ok());
  process child{child_bin, {up.address, "reserve", "half-written", std::to_string(6 << 20)}};
  REQUIRE(child.read_line(10s) == std::optional<std::string>{"ready"});
  // The child holds 6 MiB it half wrote: no room for another 6 MiB now.
  CHECK(kv->put("big", std::string(6 << 20, 'b')).code() == sluice::errc::no_capacity);
  child.signal(SIGKILL);
  child.wait(5s);
  auto big = put_eventually(*kv, "big", std::string(6 << 20, 'b'));
  CHECK_MESSAGE(big.ok(), (big ? "" : big.error().to_string()));
  CHECK(kv->get("keep").value().str() == keep);
  CHECK(kv->get("half-written").code() == sluice::errc::not_found);
}

TEST_CASE("shm: a client killed while it reads a value holds nothing after it dies") {
  auto up = start_up("[owner]\ncapacity = \"8MiB\"\n");
  auto kv = sluice::test::connect_shm(up.address);
  REQUIRE(kv->put("read", std::string(5 << 20, 'r')).ok());
  process child{child_bin, {up.address, "hold", "read"}};
  auto ready = child.read_line(10s);
  REQUIRE(ready == std::optional<std::string>{"ready " + std::to_string(5 << 20)});
  // Removed, but the child still reads it: its memory stays taken.
  REQUIRE(kv->remove("read").value());
  CHECK(kv->put("next", std::string(5 << 20, 'n')).code() == sluice::errc::no_capacity);
  child.signal(SIGKILL);
  child.wait(5s);
  auto next = put_eventually(*kv, "next", std::string(5 << 20, 'n'));
  CHECK_MESSAGE(next.ok(), (next ? "" : next.error().to_string()));
  CHECK(kv->get("next").value().str() == std::string(5 << 20, 'n'));
}

TEST_CASE("shm: a client killed while it pins a key: its pin lapses and the key can be evicted") {
  auto up = start_up("[master]\nheartbeat_interval = \"100ms\"\n[owner]\ncapacity = \"8MiB\"\n");
  auto kv = sluice::test::connect_shm(up.address);
  REQUIRE(kv->put("pinned", std::string(1 << 20, 'p')).ok());
  process child{child_bin, {up.address, "pin", "pinned"}};
  REQUIRE(child.read_line(10s) == std::optional<std::string>{"ready"});
  // 12 MiB more into 8 MiB: only the pin keeps the oldest key.
  fill(*kv, "fill/", 12);
  CHECK(kv->exists("pinned").value());
  child.signal(SIGKILL);
  child.wait(5s);
  // The owner stops vouching for the dead client's session with its next
  // heartbeat; from then on the key is evictable like any other.
  CHECK(evicted_eventually(*kv, "pinned"));
}

TEST_CASE("shm: a client that stops answering loses its session, and its pin lapses though its connection stays open") {
  auto up = start_up("[master]\nheartbeat_interval = \"100ms\"\n[owner]\ncapacity = \"8MiB\"\nclient_timeout = \"600ms\"\n");
  auto kv = sluice::test::connect_shm(up.address);
  REQUIRE(kv->put("pinned", std::string(1 << 20, 'p')).ok());
  process child{child_bin, {up.address, "pin", "pinned"}};
  REQUIRE(child.read_line(10s) == std::optional<std::string>{"ready"});
  // Alive (it sends keepalives): the pin holds through 12 MiB of puts.
  std::this_thread::sleep_for(1s);
  fill(*kv, "fill/", 12);
  CHECK(kv->exists("pinned").value());
  // Frozen: no keepalives; its socket stays open.
  child.signal(SIGSTOP);
  CHECK(evicted_eventually(*kv, "pinned"));
  child.signal(SIGKILL);
  child.wait(5s);
}
