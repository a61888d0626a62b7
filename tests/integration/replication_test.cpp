// Replicas across real owner processes: a value put with two copies stays
// readable when the owner holding one of them is killed.

#include <doctest/doctest.h>

#include <signal.h>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

}  // namespace

TEST_CASE("replication: SIGKILL the owner holding one of two copies and reads keep succeeding") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_c = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto a = connect(owner_a.address);
  auto c = connect(owner_c.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 3; });

  // Two copies: A's own (local-first) and one on B or C.
  std::vector<std::string> values;
  for (int i = 0; i < 20; ++i) {
    values.push_back(pattern(64 << 10, static_cast<char>('a' + i)));
    auto v = a->put("twice/" + std::to_string(i), values.back(), sluice::put_options{.replicas = 2});
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
  }
  REQUIRE(a->put("once", "only on A").ok());
  // Copies count in each holder's usage: 20 objects on A, 20 more on B and C together.
  auto before = await_status(*a, [](const sluice::cluster_status& s) {
    std::uint64_t objects = 0;
    for (auto& m : s.members) objects += m.object_count;
    return objects == 41;
  });
  CHECK(before.object_count == 21);
  // More copies than owners: refused up front.
  CHECK(a->put("thrice", "x", sluice::put_options{.replicas = 4}).code() == sluice::errc::unavailable);

  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  // Every two-copy key still reads, with its own bytes, through C — from
  // C itself or from B.
  for (int i = 0; i < 20; ++i) {
    auto got = c->get("twice/" + std::to_string(i));
    REQUIRE_MESSAGE(got.ok(), "twice/" << i << ": " << got.error().to_string());
    CHECK(got->str() == values[static_cast<std::size_t>(i)]);
  }
  CHECK(c->get("once").code() == sluice::errc::unavailable);
  // Overwrites and removes go on working for the surviving copies.
  REQUIRE(c->put("twice/0", "new", sluice::put_options{.replicas = 2}).ok());
  CHECK(c->get("twice/0").value().str() == "new");
  CHECK(c->remove("twice/1").value());
  CHECK(c->get("twice/1").code() == sluice::errc::not_found);
}

TEST_CASE("placement: a put that names an owner lands on it when it can take the value") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto a = connect(owner_a.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  std::string b_name = "owner@" + owner_b.address;
  for (int i = 0; i < 5; ++i) {
    REQUIRE(a->put("there/" + std::to_string(i), "v", sluice::put_options{.owner = b_name}).ok());
  }
  // A name nobody has: the policy decides (local-first: A).
  REQUIRE(a->put("here", "v", sluice::put_options{.owner = "no-such-owner"}).ok());
  auto s = await_status(*a, [](const sluice::cluster_status& s) { return s.object_count == 6; });
  for (auto& m : s.members) {
    CHECK(m.object_count == (m.name == b_name ? 5U : 1U));
  }
  CHECK(a->get("there/3").value().str() == "v");
}

TEST_CASE("replication: a read fails over to the next copy when its first holder is frozen, before the master notices") {
  // The master would notice the frozen owner only after a minute: every
  // read below succeeds while it still counts it up.
  auto master_config = write_config("[master]\nheartbeat_timeout = \"60s\"\n");
  auto owner_config = write_config("[owner]\ntransfer_piece_timeout = \"300ms\"\ncache_remote = false\n");
  auto master = start_node({"master", "--config", master_config, "--listen", "127.0.0.1:0"});
  auto owner_a = start_owner(master, owner_config);
  auto owner_b = start_owner(master, owner_config);
  auto owner_c = start_owner(master, owner_config);
  auto a = connect(owner_a.address);
  auto c = connect(owner_c.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 3; });

  // Two copies each: A's own (local-first) and one on B or C.
  constexpr int keys = 24;
  std::vector<std::string> values;
  for (int i = 0; i < keys; ++i) {
    values.push_back(pattern(256 << 10, static_cast<char>('a' + i % 26)));
    auto v = a->put("frozen/" + std::to_string(i), values.back(), sluice::put_options{.replicas = 2});
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
  }
  owner_a.proc->signal(SIGSTOP);
  struct thaw {
    sluice::test::node_proc& n;
    ~thaw() { n.proc->signal(SIGCONT); }  // even when a check below fails
  } thaw_a{owner_a};

  // Every key reads through C, with its own bytes: from C's copy, or from
  // B's once A gave no answer in time.
  int slow = 0;
  for (int i = 0; i < keys; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto got = c->get("frozen/" + std::to_string(i), sluice::call_options{.timeout = 10s});
    auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE_MESSAGE(got.ok(), "frozen/" << i << ": " << got.error().to_string());
    CHECK(got->str() == values[static_cast<std::size_t>(i)]);
    if (took >= 250ms) ++slow;
  }
  // At least one read went to frozen A first and went on from B.
  CHECK(slow > 0);
  auto s = c->status();
  REQUIRE(s.ok());
  CHECK(count_up(*s) == 3);
}

TEST_CASE("replication: after an owner is killed, a put of two copies is refused and one with min_replicas 1 reports one copy") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto a = connect(owner_a.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });
  REQUIRE(a->put_with_copies("warm", "up", sluice::put_options{.replicas = 2}).value().copies == 2);

  owner_b.proc->signal(SIGKILL);
  owner_b.proc->wait(5s);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  // One owner left: two copies cannot be had, and nothing is stored.
  auto strict = a->put_with_copies("k", "v1", sluice::put_options{.replicas = 2});
  REQUIRE_FALSE(strict.ok());
  CHECK(strict.code() == sluice::errc::unavailable);
  CHECK(a->get("k").code() == sluice::errc::not_found);
  auto relaxed = a->put_with_copies("k", "v2", sluice::put_options{.replicas = 2, .min_replicas = 1});
  REQUIRE_MESSAGE(relaxed.ok(), (relaxed ? "" : relaxed.error().to_string()));
  CHECK(relaxed->copies == 1);
  CHECK(a->get("k").value().str() == "v2");
  // The owner that took it counts the put as under-replicated.
  await_status(*a, [&](const sluice::cluster_status& s) {
    for (auto& m : s.members) {
      if (m.address == owner_a.address) return m.under_replicated_puts == 1;
    }
    return false;
  });
}
