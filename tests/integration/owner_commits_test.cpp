// Owner-committed puts across real processes: an owner the master handed
// key slots commits plain puts of its local clients itself, and every
// reader elsewhere — another owner's client, a listing, a master that was
// killed and restarted — still sees each acknowledged put.

#include <doctest/doctest.h>

#include <signal.h>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

const sluice::member_info& member_at(const sluice::cluster_status& s, const std::string& address) {
  for (auto& m : s.members) {
    if (m.address == address) return m;
  }
  FAIL("no member at " << address);
  return s.members.front();
}

sluice::member_info status_of(sluice::client& c, const std::string& address) {
  auto s = c.status();
  REQUIRE_MESSAGE(s.ok(), (s ? "" : s.error().to_string()));
  return member_at(*s, address);
}

}  // namespace

TEST_CASE("owner commits: puts through one owner are committed by it, and read back through another at once") {
  // A reports its own commits late, so a reader that did not wait for
  // them would read stale values.
  auto slow_reports = write_config("[owner]\ncommit_report_delay = \"100ms\"\n");
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", slow_reports});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto a = connect(owner_a.address);
  auto b = connect(owner_b.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  // The first put of the key goes through the master; A then asks for the
  // key's slot, and the next ones A commits itself. Versions only grow,
  // and another owner reads the newest right after each acknowledgement.
  std::uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    auto value = pattern(64 + static_cast<std::size_t>(i), static_cast<char>('a' + i % 26));
    auto v = a->put("hot", value);
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
    CHECK(*v > last);
    last = *v;
    if (i % 50 == 49) {
      auto got = b->get("hot");
      REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
      CHECK(got->version() == last);
      CHECK(got->str() == value);
    }
  }
  auto mine = status_of(*a, owner_a.address);
  CHECK(mine.home_slots >= 1);
  CHECK(mine.own_commits >= 150);
  // B's reads left no copy there: A keeps the slot.
  auto theirs = status_of(*a, owner_b.address);
  CHECK(theirs.own_commits == 0);
  CHECK(theirs.object_count == 0);

  // Keys A commits itself are listed and counted through B.
  for (int i = 0; i < 300; ++i) REQUIRE(a->put("dir/" + std::to_string(i), "x").ok());
  CHECK(b->count("dir/").value() == 300);
  auto page = b->list("dir/");
  REQUIRE(page.ok());
  CHECK(page->keys.size() == 300);

  // B writes the key: its version follows A's, and A reads B's value; then
  // A's next put follows B's.
  auto vb = b->put("hot", "from b");
  REQUIRE(vb.ok());
  CHECK(*vb > last);
  CHECK(a->get("hot").value().str() == "from b");
  auto va = a->put("hot", "from a again");
  REQUIRE(va.ok());
  CHECK(*va > *vb);
  CHECK(b->get("hot").value().str() == "from a again");

  // Removes and exists see A's own commits too.
  CHECK(b->remove("dir/7").value());
  CHECK_FALSE(a->exists("dir/7").value());
  CHECK(a->exists("dir/8").value());
}

TEST_CASE("owner commits: a master killed right after puts its owner committed itself comes back knowing them all") {
  auto data_dir = temp_path("master-data");
  auto master = start_node({"master", "--listen", "127.0.0.1:0", "--data-dir", data_dir});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto kv = connect(owner.address);
  await_status(*kv, [](const sluice::cluster_status& s) { return count_up(s) == 1; });

  // Enough keys that most slots are handed over early and most puts are
  // the owner's own.
  constexpr int keys = 3000;
  std::vector<std::uint64_t> versions;
  for (int i = 0; i < keys; ++i) {
    auto v = kv->put("k/" + std::to_string(i), pattern(32, static_cast<char>(i)));
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
    versions.push_back(*v);
  }
  // Killed the moment the last put is acknowledged: the owner's latest
  // commits may not have reached the master yet.
  master.proc->signal(SIGKILL);
  master.proc->wait(5s);
  master = start_node({"master", "--listen", master.address, "--data-dir", data_dir});

  auto s = await_status(*kv, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  CHECK(member_at(s, owner.address).own_commits >= keys / 2);
  REQUIRE_MESSAGE(kv->count("k/").value() == keys, "the restarted master lost puts");
  for (int i = 0; i < keys; i += 7) {
    auto got = kv->get("k/" + std::to_string(i));
    REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
    CHECK(got->version() == versions[static_cast<std::size_t>(i)]);
    CHECK(got->str() == pattern(32, static_cast<char>(i)));
  }
}

TEST_CASE("owner commits: an owner told not to commits nothing itself") {
  auto config = write_config("[owner]\nfast_puts = false\n");
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0", "--config", config});
  auto kv = connect(owner.address);
  await_status(*kv, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  for (int i = 0; i < 50; ++i) REQUIRE(kv->put("same", std::to_string(i)).ok());
  auto m = status_of(*kv, owner.address);
  CHECK(m.home_slots == 0);
  CHECK(m.own_commits == 0);
  CHECK(kv->get("same").value().str() == "49");
}

TEST_CASE("owner commits: puts of a client over tcp are committed by its owner too, and read back in order") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  sluice::client_options over_tcp;
  over_tcp.transport = sluice::client_transport::tcp;
  auto opened = sluice::client::connect(owner.address, over_tcp);
  REQUIRE_MESSAGE(opened.ok(), (opened ? "" : opened.error().to_string()));
  auto kv = std::move(*opened);
  auto reader = connect(owner.address);
  await_status(*kv, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  std::uint64_t last = 0;
  for (int i = 0; i < 200; ++i) {
    auto value = pattern(100 + static_cast<std::size_t>(i), static_cast<char>('a' + i % 26));
    auto v = kv->put("tcp-hot", value);
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
    CHECK(*v > last);
    last = *v;
    auto got = kv->get("tcp-hot");
    REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
    CHECK(got->version() == last);
    CHECK(got->str() == value);
  }
  // The owner took the key's slot after its first put and committed the
  // later ones itself (on its tcp thread, where the fast path took them).
  auto m = status_of(*kv, owner.address);
  CHECK(m.home_slots >= 1);
  CHECK(m.own_commits >= 150);
  // Another client sees the last one, and a listing counts it.
  CHECK(reader->get("tcp-hot").value().version() == last);
  auto n = kv->count("tcp-");
  REQUIRE(n.ok());
  CHECK(*n == 1);
}
