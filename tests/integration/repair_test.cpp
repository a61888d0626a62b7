// Repair across real owner processes: copies lost with an owner are made
// again on the others, so two copies protect against one failure at a
// time, not one failure ever.

#include <doctest/doctest.h>

#include <signal.h>

#include <filesystem>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

// Owners are declared down after 1 s of silence and their copies stop
// counting 1 s after their last heartbeat.
const std::string fast_master = "[master]\nheartbeat_interval = \"200ms\"\nheartbeat_timeout = \"1s\"\n"
                                "repair_after = \"1s\"\n";
// Reads leave no copies behind: every copy counted below is repair's.
const std::string plain_owner = "[owner]\ncache_remote = false\n";

bool settled(const sluice::cluster_status& s) {
  return s.repair.under_replicated == 0 && s.repair.without_live_copy == 0 && s.repair.copies_in_flight == 0;
}

std::uint64_t copies_held(const sluice::cluster_status& s) {
  std::uint64_t n = 0;
  for (auto& m : s.members) n += m.up ? m.object_count : 0;
  return n;
}

}  // namespace

TEST_CASE("repair: the copies a killed owner held are made again, so a second owner killed later loses nothing") {
  auto master_config = write_config(fast_master);
  auto owner_config = write_config(plain_owner);
  auto master = start_node({"master", "--config", master_config, "--listen", "127.0.0.1:0"});
  auto owner_a = start_owner(master, owner_config);
  auto owner_b = start_owner(master, owner_config);
  auto owner_c = start_owner(master, owner_config);
  auto a = connect(owner_a.address);
  auto c = connect(owner_c.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 3; });

  // Two copies each: A's own (local-first) and one on B or C.
  constexpr int keys = 100;
  constexpr std::size_t size = 64 << 10;
  std::vector<std::string> values;
  for (int i = 0; i < keys; ++i) {
    // Self-describing: a value read under the wrong key never matches.
    auto head = "twice/" + std::to_string(i) + ":";
    values.push_back(head + pattern(size - head.size(), static_cast<char>('a' + i % 26)));
    auto v = a->put("twice/" + std::to_string(i), values.back(), sluice::put_options{.replicas = 2});
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
  }
  REQUIRE(a->put("once", "only on A").ok());
  auto before = await_status(*c, [](const sluice::cluster_status& s) { return copies_held(s) == 2 * keys + 1; });
  CHECK(before.repair.under_replicated == 0);
  CHECK(before.repair.copies_made == 0);

  // A goes: every two-copy key lost the copy A held, and gets it back on
  // whichever of B and C lacks it. The one-copy key is not repair's.
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);
  auto repaired = await_status(*c, [](const sluice::cluster_status& s) {
    return count_up(s) == 2 && s.repair.copies_made == keys && settled(s);
  });
  CHECK(repaired.repair.bytes_copied == std::uint64_t{keys} * size);
  CHECK(copies_held(repaired) == 2 * keys);

  // B goes too: every two-copy key still reads from C, byte for byte.
  owner_b.proc->signal(SIGKILL);
  owner_b.proc->wait(5s);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  for (int i = 0; i < keys; ++i) {
    auto got = c->get("twice/" + std::to_string(i));
    REQUIRE_MESSAGE(got.ok(), "twice/" << i << ": " << got.error().to_string());
    CHECK(got->str() == values[static_cast<std::size_t>(i)]);
  }
  CHECK(c->get("once").code() == sluice::errc::unavailable);

  // With C alone, each key is below its target and has nowhere to go; a
  // new owner takes the second copies.
  auto alone = await_status(*c, [](const sluice::cluster_status& s) {
    return count_up(s) == 1 && s.repair.under_replicated == keys;
  });
  CHECK(alone.repair.copies_made == keys);
  auto owner_d = start_owner(master, owner_config);
  auto again = await_status(*c, [](const sluice::cluster_status& s) {
    return count_up(s) == 2 && s.repair.copies_made == 2 * keys && settled(s);
  });
  CHECK(copies_held(again) == 2 * keys);
  owner_c.proc->signal(SIGKILL);
  owner_c.proc->wait(5s);
  auto d = connect(owner_d.address);
  for (int i = 0; i < keys; ++i) {
    auto got = d->get("twice/" + std::to_string(i));
    REQUIRE_MESSAGE(got.ok(), "twice/" << i << " after C went: " << got.error().to_string());
    CHECK(got->str() == values[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("repair: a put that got one of two copies under min_replicas gets its second once an owner can take it") {
  auto master_config = write_config(fast_master);
  auto owner_config = write_config(plain_owner);
  auto master = start_node({"master", "--config", master_config, "--listen", "127.0.0.1:0"});
  auto owner_a = start_owner(master, owner_config);
  // Calls of 1 s: the master looks at the put's copies soon after.
  sluice::client_options quick;
  quick.timeout = 1s;
  auto connected = sluice::client::connect(owner_a.address, quick);
  REQUIRE(connected.ok());
  auto a = std::move(*connected);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  auto put = a->put_with_copies("k", "two wanted", sluice::put_options{.replicas = 2, .min_replicas = 1});
  REQUIRE_MESSAGE(put.ok(), (put ? "" : put.error().to_string()));
  CHECK(put->copies == 1);
  // Once the put's own copies had their time, the key is repair's.
  await_status(*a, [](const sluice::cluster_status& s) { return s.repair.under_replicated == 1; });

  auto owner_b = start_owner(master, owner_config);
  auto s = await_status(*a, [](const sluice::cluster_status& s) {
    return count_up(s) == 2 && s.repair.copies_made == 1 && settled(s);
  });
  CHECK(copies_held(s) == 2);
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);
  auto b = connect(owner_b.address);
  auto got = b->get("k");
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->str() == "two wanted");
}

TEST_CASE("repair: a master restarted from its data directory goes on repairing the copies of an owner that is gone") {
  auto dir = temp_path("repair-master");
  auto master_config = write_config(fast_master);
  auto owner_config = write_config(plain_owner);
  auto master = start_node({"master", "--config", master_config, "--listen", "127.0.0.1:0", "--data-dir", dir});
  auto owner_a = start_owner(master, owner_config);
  auto owner_b = start_owner(master, owner_config);
  auto owner_c = start_owner(master, owner_config);
  auto b = connect(owner_b.address);
  await_status(*b, [](const sluice::cluster_status& s) { return count_up(s) == 3; });
  constexpr int keys = 8;
  for (int i = 0; i < keys; ++i) {
    auto v = b->put("kept/" + std::to_string(i), pattern(4096, static_cast<char>('k' + i)),
                    sluice::put_options{.replicas = 2});
    REQUIRE_MESSAGE(v.ok(), (v ? "" : v.error().to_string()));
  }
  // The master goes down with B's owner: the new master starts from what
  // it kept, counts B's copies lost once B stays away, and makes them
  // again on A and C.
  master.proc->signal(SIGKILL);
  master.proc->wait(5s);
  owner_b.proc->signal(SIGKILL);
  owner_b.proc->wait(5s);
  master = start_node({"master", "--config", master_config, "--listen", master.address, "--data-dir", dir});
  auto c = connect(owner_c.address);
  auto s = await_status(*c, [](const sluice::cluster_status& s) {
    return count_up(s) == 2 && s.repair.copies_made == keys && settled(s);
  });
  CHECK(s.object_count == keys);
  CHECK(copies_held(s) == 2 * keys);
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);
  for (int i = 0; i < keys; ++i) {
    auto got = c->get("kept/" + std::to_string(i));
    REQUIRE_MESSAGE(got.ok(), "kept/" << i << ": " << got.error().to_string());
    CHECK(got->str() == pattern(4096, static_cast<char>('k' + i)));
  }
  std::filesystem::remove_all(dir);
}
