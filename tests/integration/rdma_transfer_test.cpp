// Values read from another owner over RDMA, on the software provider
// ([rdma] device = "soft": one-sided reads between owner processes of
// this host): a large value moves over the rdma path (the link state
// counts its bytes), a failing read demotes the path to tcp and the get
// still succeeds, the path comes back after its backoff, a holder that
// vanishes mid-read gives a typed error by the deadline, and an owner
// whose peer has no rdma path reads over tcp.

#include <doctest/doctest.h>

#include <signal.h>

#include <fstream>
#include <future>

#include <nlohmann/json.hpp>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

constexpr std::size_t value_bytes = 64 << 20;

/// Owners that move values in 1 MiB pieces, four in flight, and try a
/// demoted path again 200 ms after it failed.
std::string owner_config(const std::string& rdma) {
  return "[owner]\nfast_puts = false\ntransfer_chunk = \"1MiB\"\ntransfer_window = 4\ncache_remote = false\n"
         "[links]\nretry = \"200ms\"\nretry_max = \"400ms\"\ntimeout = \"4s\"\n[rdma]\n" +
         rdma + "\n";
}

struct cluster {
  node_proc master;
  node_proc a;  // reads
  node_proc b;  // holds
  cluster(const std::string& rdma_a, const std::string& rdma_b) {
    master = start_node({"master", "--listen", "127.0.0.1:0"});
    a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config",
                    write_config(owner_config(rdma_a))});
    b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config",
                    write_config(owner_config(rdma_b))});
  }
};

/// How `from` (an owner's address) reaches the other owner, over `kind`.
std::optional<sluice::path_info> path_of(const sluice::cluster_status& s, const std::string& from,
                                         const std::string& kind) {
  for (auto& m : s.members) {
    if (m.address != from) continue;
    for (auto& l : m.links) {
      for (auto& p : l.paths) {
        if (p.kind == kind) return p;
      }
    }
  }
  return std::nullopt;
}

std::uint64_t bytes_over(const sluice::cluster_status& s, const std::string& from, const std::string& kind) {
  auto p = path_of(s, from, kind);
  return p ? p->bytes : 0;
}

int log_lines_with(const std::string& path, const std::string& text) {
  std::ifstream log{path};
  std::string line;
  int n = 0;
  while (std::getline(log, line)) n += line.find(text) != std::string::npos ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("rdma: a 64 MiB value held by another owner is read over the rdma path, and status says so") {
  cluster c{"device = \"soft\"", "device = \"soft\""};
  auto on_b = connect(c.b.address);
  auto on_a = connect_shm(c.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern(value_bytes, 'R');
  REQUIRE(on_b->put("big", value).ok());

  auto got = on_a->get("big", sluice::call_options{.timeout = 20s});
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->str() == value);

  // A's link to B: the rdma path is up and carried the value; tcp carried
  // only the control messages.
  auto s = await_status(*on_a, [&](const sluice::cluster_status& s) {
    return bytes_over(s, c.a.address, "rdma") >= value_bytes;
  });
  auto rdma = path_of(s, c.a.address, "rdma");
  REQUIRE(rdma.has_value());
  CHECK(rdma->health == "up");
  CHECK(rdma->failures == 0);
  CHECK(bytes_over(s, c.a.address, "tcp") < value_bytes);

  // sluice status shows it too.
  auto cli = run(sluice_bin, {"status", "--json", "--connect", c.master.address});
  REQUIRE(cli.exit_code == 0);
  bool shown = false;
  auto parsed = nlohmann::json::parse(cli.out);
  for (auto& m : parsed["members"]) {
    if (m["address"] != c.a.address) continue;
    for (auto& l : m["links"]) {
      CHECK(l["active"] == "rdma");
      for (auto& p : l["paths"]) shown |= p["kind"] == "rdma" && p["bytes"].get<std::uint64_t>() >= value_bytes;
    }
  }
  CHECK_MESSAGE(shown, cli.out);
  auto text = run(sluice_bin, {"status", "--connect", c.master.address});
  CHECK(text.out.find("rdma up") != std::string::npos);

  // Each owner said once that it moves values over the software provider.
  CHECK(log_lines_with(c.a.log, "[rdma]") == 1);
  CHECK(log_lines_with(c.a.log, "software provider") == 1);
}

TEST_CASE("rdma: a read that fails on the rdma path demotes it to tcp, the get still succeeds, and rdma comes back") {
  // A's third read fails, as a broken link would, and takes its queue pair
  // into the error state.
  cluster c{"device = \"soft\"\nsoft_fail_read = 3", "device = \"soft\""};
  auto on_b = connect(c.b.address);
  auto on_a = connect(c.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern(value_bytes, 'F');
  REQUIRE(on_b->put("flaky", value).ok());

  auto got = on_a->get("flaky", sluice::call_options{.timeout = 20s});
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->str() == value);
  CHECK(log_lines_with(c.a.log, "over rdma is down") == 1);
  auto s = await_status(*on_a, [&](const sluice::cluster_status& s) {
    return bytes_over(s, c.a.address, "tcp") >= value_bytes;
  });
  auto rdma = path_of(s, c.a.address, "rdma");
  REQUIRE(rdma.has_value());
  CHECK(rdma->last_error.find("injected") != std::string::npos);
  CHECK(rdma->bytes < value_bytes);

  // After its backoff the path is set up afresh and carries the next read.
  await_status(*on_a, [&](const sluice::cluster_status& s) {
    auto p = path_of(s, c.a.address, "rdma");
    return p && p->health == "up";
  });
  auto again = on_a->get("flaky", sluice::call_options{.timeout = 20s});
  REQUIRE_MESSAGE(again.ok(), (again ? "" : again.error().to_string()));
  CHECK(again->str() == value);
  await_status(*on_a, [&](const sluice::cluster_status& s) {
    return bytes_over(s, c.a.address, "rdma") >= value_bytes;
  });
  CHECK(log_lines_with(c.a.log, "over rdma is back") == 1);
}

TEST_CASE("rdma: a holder that vanishes mid-read gives a typed error by the deadline, never a hang") {
  // A's reads are slow (20 ms each, 64 of them): B goes away halfway.
  cluster c{"device = \"soft\"\nsoft_read_delay = \"20ms\"", "device = \"soft\""};
  auto on_b = connect(c.b.address);
  auto on_a = connect(c.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern(value_bytes, 'V');
  REQUIRE(on_b->put("gone", value).ok());

  auto started = std::chrono::steady_clock::now();
  auto reading = std::async(std::launch::async, [&] { return on_a->get("gone", sluice::call_options{.timeout = 8s}); });
  std::this_thread::sleep_for(400ms);
  c.b.proc->signal(SIGKILL);
  c.b.proc->wait(5s);
  auto got = reading.get();
  auto took = std::chrono::steady_clock::now() - started;
  CHECK(took < 9s);
  MESSAGE("the read ended with " << (got.ok() ? std::string{"success"} : got.error().to_string()) << " after "
                                 << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms");
  if (got.ok()) {
    // The reads beat the kill: then the bytes must be right.
    CHECK(got->str() == value);
  } else {
    CHECK_MESSAGE((got.code() == sluice::errc::unavailable || got.code() == sluice::errc::timeout),
                  got.error().to_string());
  }
}

TEST_CASE("rdma: an owner whose peer has no rdma path reads from it over tcp") {
  cluster c{"device = \"soft\"", "device = \"off\""};
  auto on_b = connect(c.b.address);
  auto on_a = connect(c.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern(8 << 20, 'T');
  REQUIRE(on_b->put("plain", value).ok());
  for (int i = 0; i < 2; ++i) {
    auto got = on_a->get("plain", sluice::call_options{.timeout = 10s});
    REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
    CHECK(got->str() == value);
  }
  auto s = await_status(*on_a, [&](const sluice::cluster_status& s) {
    return bytes_over(s, c.a.address, "tcp") >= 16u << 20;
  });
  CHECK(bytes_over(s, c.a.address, "rdma") == 0);
  CHECK(log_lines_with(c.b.log, "rdma is off") == 1);
}
