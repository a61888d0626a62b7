// Values read through one owner from another: moved in pieces, received
// into the reading owner's pool (so a local client reads them in place
// through shared memory, larger than its rings), optionally kept there as
// a copy the master knows of, and failing typed and on time when the
// holder stops answering.

#include <doctest/doctest.h>

#include <signal.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "sluice/client.hpp"
#include "tests/support/delay_proxy.hpp"
#include "tests/support/nodes.hpp"
#include "transports/rdma/rdma.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

/// Owners that move values in 1 MiB pieces, three in flight. They put
/// through the master: a key whose slot has a home is not kept as a copy
/// elsewhere (owner_commits_test.cpp covers that).
std::string owner_config(bool cache_remote) {
  return std::string{"[owner]\nfast_puts = false\ntransfer_chunk = \"1MiB\"\ntransfer_window = 3\ncache_remote = "} +
         (cache_remote ? "true" : "false") + "\n";
}

struct two_owners {
  node_proc master;
  node_proc a;
  node_proc b;
  explicit two_owners(bool cache_remote) {
    auto config = write_config(owner_config(cache_remote));
    master = start_node({"master", "--listen", "127.0.0.1:0"});
    a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", config});
    b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", config});
  }
};

std::uint64_t objects_on(const sluice::cluster_status& s, const std::string& address) {
  for (auto& m : s.members) {
    if (m.address == address) return m.object_count;
  }
  return 0;
}

}  // namespace

TEST_CASE("transfer: a 24 MiB value held by another owner is read whole through shared memory, and stays as a copy") {
  two_owners cluster{true};
  auto on_b = connect(cluster.b.address);
  auto on_a = connect_shm(cluster.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  // 24 pieces of 1 MiB, and a value larger than a shared-memory ring: it
  // reaches the client in place, from the pool region it was received into.
  auto value = pattern(24 << 20, 'x');
  auto version = on_b->put("big", value);
  REQUIRE_MESSAGE(version.ok(), (version ? "" : version.error().to_string()));
  auto got = on_a->get("big");
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->version() == *version);
  CHECK(got->str() == value);

  // The copy is registered with the master: A holds the key now too, and
  // it reads through A after its first holder is gone.
  await_status(*on_a, [&](const sluice::cluster_status& s) { return objects_on(s, cluster.a.address) == 1; });
  cluster.b.proc->signal(SIGKILL);
  cluster.b.proc->wait(5s);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  auto again = on_a->get("big");
  REQUIRE_MESSAGE(again.ok(), (again ? "" : again.error().to_string()));
  CHECK(again->str() == value);
}

TEST_CASE("transfer: with cache_remote off a read leaves no copy behind") {
  two_owners cluster{false};
  auto on_b = connect(cluster.b.address);
  auto on_a = connect(cluster.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern((5 << 20) + 12345, 'y');  // pieces of 1 MiB and a short last one
  REQUIRE(on_b->put("once", value).ok());
  for (int i = 0; i < 3; ++i) CHECK(on_a->get("once").value().str() == value);

  cluster.b.proc->signal(SIGKILL);
  cluster.b.proc->wait(5s);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  CHECK(on_a->get("once").code() == sluice::errc::unavailable);
}

TEST_CASE("transfer: a read from a holder that stops answering fails with timeout by its deadline") {
  two_owners cluster{true};
  auto on_b = connect(cluster.b.address);
  auto on_a = connect(cluster.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  REQUIRE(on_b->put("frozen", pattern(3 << 20, 'z')).ok());

  cluster.b.proc->signal(SIGSTOP);
  auto started = std::chrono::steady_clock::now();
  auto got = on_a->get("frozen", sluice::call_options{.timeout = 1500ms});
  auto took = std::chrono::steady_clock::now() - started;
  cluster.b.proc->signal(SIGCONT);
  REQUIRE_FALSE(got.ok());
  CHECK(got.code() == sluice::errc::timeout);
  CHECK(took < 3s);

  // Once the holder answers again, so does the read.
  auto later = on_a->get("frozen");
  REQUIRE_MESSAGE(later.ok(), (later ? "" : later.error().to_string()));
  CHECK(later->str() == pattern(3 << 20, 'z'));
}

TEST_CASE("transfer: an owner says once whether it can use RDMA, and its paths to other owners never do") {
  two_owners cluster{false};
  auto on_b = connect(cluster.b.address);
  auto on_a = connect(cluster.a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  REQUIRE(on_b->put("r", pattern(2 << 20, 'r')).ok());
  REQUIRE(on_a->get("r").ok());
  REQUIRE(on_a->get("r").ok());

  // The links A reports list tcp and relay only.
  auto s = await_status(*on_a, [](const sluice::cluster_status& s) {
    for (auto& m : s.members) {
      if (!m.links.empty()) return true;
    }
    return false;
  });
  for (auto& m : s.members) {
    for (auto& l : m.links) {
      CHECK(l.active == "tcp");
      for (auto& p : l.paths) CHECK(p.kind != "rdma");
    }
  }
  auto cli = run(sluice_bin, {"status", "--json", "--connect", cluster.master.address});
  REQUIRE(cli.exit_code == 0);
  auto parsed = nlohmann::json::parse(cli.out);
  for (auto& m : parsed["members"]) {
    for (auto& l : m["links"]) CHECK(l["active"] != "rdma");
  }

  // One line about RDMA in A's log, however much it moved.
  std::ifstream log{cluster.a.log};
  std::string line;
  int rdma_lines = 0;
  std::string said;
  while (std::getline(log, line)) {
    if (line.find("[rdma]") == std::string::npos) continue;
    ++rdma_lines;
    said = line;
  }
  CHECK(rdma_lines == 1);
  auto found = sluice::transport::rdma::probe();
  if (!found.usable()) CHECK(said.find(found.why_not) != std::string::npos);
  CHECK(said.find("owners") != std::string::npos);
}

TEST_CASE("transfer: over a path with 150 ms of latency each way a get takes its round trips, and one with a shorter deadline fails with timeout by it") {
  // B is reached by other owners only through the proxy it advertises.
  delay_proxy slow{std::chrono::milliseconds{150}};
  auto config = write_config(owner_config(false));
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", config});
  auto b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--advertise", slow.address(),
                       "--config", config});
  slow.set_target(static_cast<std::uint16_t>(std::stoi(b.address.substr(b.address.rfind(':') + 1))));
  auto on_b = connect(b.address);
  auto on_a = connect(a.address);
  await_status(*on_a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  auto value = pattern(2 << 20, 'l');
  REQUIRE(on_b->put("far", value).ok());

  auto t0 = std::chrono::steady_clock::now();
  auto rushed = on_a->get("far", sluice::call_options{.timeout = 200ms});
  auto rushed_took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(rushed.ok());
  CHECK(rushed.code() == sluice::errc::timeout);
  CHECK(rushed_took < 1s);

  t0 = std::chrono::steady_clock::now();
  auto patient = on_a->get("far", sluice::call_options{.timeout = 5s});
  auto patient_took = std::chrono::steady_clock::now() - t0;
  REQUIRE_MESSAGE(patient.ok(), (patient ? "" : patient.error().to_string()));
  CHECK(patient->str() == value);
  // Dialling, the greeting and two pieces each cross the proxy both ways.
  CHECK(patient_took >= 300ms);
  CHECK(patient_took < 5s);
}
