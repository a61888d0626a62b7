// Multi-process tests: real `sluice` processes on loopback, free ports,
// driven through the public client API and the launcher.

#include <doctest/doctest.h>

#include <algorithm>

#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

}  // namespace

TEST_CASE("cluster: a value put through one owner is read through another and a killed owner's keys fail typed") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});

  auto a = connect(owner_a.address);
  auto b = connect(owner_b.address);
  await_status(*b, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  // Put through A, get through B: B fetches the bytes from A.
  auto value = pattern(1 << 20, 'a');
  auto v1 = a->put("shared/key", value);
  REQUIRE_MESSAGE(v1.ok(), (v1 ? "" : v1.error().to_string()));
  auto got = b->get("shared/key");
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->str() == value);
  CHECK(got->version() == *v1);
  CHECK(b->exists("shared/key").value());

  // Delete through A; B sees it gone.
  CHECK(a->remove("shared/key").value());
  auto gone = b->get("shared/key");
  CHECK(gone.code() == sluice::errc::not_found);
  CHECK_FALSE(b->exists("shared/key").value());
  CHECK_FALSE(a->remove("shared/key").value());

  // A key that only A holds (B never read it, so B keeps no copy), then
  // A dies without warning.
  REQUIRE(a->put("only/on/a", "precious").ok());
  REQUIRE(a->get("only/on/a").value().str() == "precious");
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);

  auto s = await_status(*b, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  bool a_down = false;
  for (auto& m : s.members) a_down |= m.address == owner_a.address && !m.up;
  CHECK(a_down);

  // The master reports A down through the launcher too.
  auto cli = sluice::test::run(sluice_bin, {"status", "--connect", master.address, "--json"});
  REQUIRE(cli.exit_code == 0);
  auto json = nlohmann::json::parse(cli.out);
  bool reported_down = false;
  for (auto& m : json["members"]) {
    if (m["address"] == owner_a.address) reported_down = m["state"] == "down";
  }
  CHECK(reported_down);

  // A's key: a typed error, never bytes.
  auto lost = b->get("only/on/a");
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.code() == sluice::errc::unavailable);
  CHECK(b->exists("only/on/a").code() == sluice::errc::unavailable);

  // B keeps serving new keys.
  REQUIRE(b->put("after/failure", "still here").ok());
  CHECK(b->get("after/failure").value().str() == "still here");
}

TEST_CASE("cluster: the launcher's kv commands round-trip through sluice up") {
  auto up = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto file = sluice::test::temp_path("value");
  {
    std::FILE* f = std::fopen(file.c_str(), "wb");
    std::fputs("from a file\n", f);
    std::fclose(f);
  }
  auto put = sluice::test::run(sluice_bin, {"kv", "put", "k", file, "--connect", up.address});
  CHECK_MESSAGE(put.exit_code == 0, put.err);
  auto get = sluice::test::run(sluice_bin, {"kv", "get", "k", "--connect", up.address});
  CHECK(get.exit_code == 0);
  CHECK(get.out == "from a file\n");
  auto exists = sluice::test::run(sluice_bin, {"kv", "exists", "k", "--connect", up.address});
  CHECK(exists.out == "yes\n");
  auto rm = sluice::test::run(sluice_bin, {"kv", "rm", "k", "--connect", up.address});
  CHECK(rm.exit_code == 0);
  auto again = sluice::test::run(sluice_bin, {"kv", "get", "k", "--connect", up.address});
  CHECK(again.exit_code == 1);
  CHECK(again.err.find("not_found") != std::string::npos);

  // Conditional puts, listing and counting.
  auto first = sluice::test::run(sluice_bin, {"kv", "put", "dir/a", file, "--if-absent", "--connect", up.address});
  CHECK_MESSAGE(first.exit_code == 0, first.err);
  auto second = sluice::test::run(sluice_bin, {"kv", "put", "dir/a", file, "--if-absent", "--connect", up.address});
  CHECK(second.exit_code == 1);
  CHECK(second.err.find("conflict") != std::string::npos);
  auto both = sluice::test::run(sluice_bin, {"kv", "put", "dir/a", file, "--if-absent", "--if-version", "3"});
  CHECK(both.exit_code == 2);
  for (auto key : {"dir/b", "dir/c", "other"}) {
    REQUIRE(sluice::test::run(sluice_bin, {"kv", "put", key, file, "--connect", up.address}).exit_code == 0);
  }
  auto ls = sluice::test::run(sluice_bin, {"kv", "ls", "dir/", "--connect", up.address});
  CHECK_MESSAGE(ls.exit_code == 0, ls.err);
  CHECK(ls.out.find("dir/a\t") == 0);
  CHECK(ls.out.find("dir/b\t") != std::string::npos);
  CHECK(ls.out.find("dir/c\t") != std::string::npos);
  CHECK(ls.out.find("other") == std::string::npos);
  CHECK(std::count(ls.out.begin(), ls.out.end(), '\n') == 3);
  auto limited = sluice::test::run(sluice_bin, {"kv", "ls", "dir/", "--limit", "2", "--json", "--connect", up.address});
  REQUIRE_MESSAGE(limited.exit_code == 0, limited.err);
  auto page = nlohmann::json::parse(limited.out);
  CHECK(page["keys"].size() == 2);
  CHECK(page["more"] == true);
  CHECK(page["next"] == "dir/b");
  auto rest = sluice::test::run(sluice_bin, {"kv", "ls", "dir/", "--start-after", "dir/b", "--connect", up.address});
  CHECK(rest.out.find("dir/c\t") == 0);
  auto count = sluice::test::run(sluice_bin, {"kv", "count", "--connect", up.address});
  CHECK(count.out == "4\n");
  auto ttl = sluice::test::run(sluice_bin, {"kv", "put", "short", file, "--ttl", "300ms", "--connect", up.address});
  CHECK_MESSAGE(ttl.exit_code == 0, ttl.err);
  auto two = sluice::test::run(sluice_bin, {"kv", "put", "two", file, "--replicas", "2", "--connect", up.address});
  CHECK(two.exit_code == 1);  // one owner cannot hold two copies
  CHECK(two.err.find("unavailable") != std::string::npos);
  auto at_least_one = sluice::test::run(
      sluice_bin, {"kv", "put", "two", file, "--replicas", "2", "--min-replicas", "1", "--connect", up.address});
  CHECK_MESSAGE(at_least_one.exit_code == 0, at_least_one.err);
  CHECK(at_least_one.err.find(", 1 of 2 copies") != std::string::npos);
  auto too_many = sluice::test::run(
      sluice_bin, {"kv", "put", "two", file, "--replicas", "2", "--min-replicas", "3", "--connect", up.address});
  CHECK(too_many.exit_code != 0);
  CHECK(too_many.err.find("min_replicas") != std::string::npos);
  auto pin = sluice::test::run(sluice_bin, {"kv", "pin", "dir/a", "--connect", up.address});
  CHECK_MESSAGE(pin.exit_code == 0, pin.err);
  auto pin_missing = sluice::test::run(sluice_bin, {"kv", "pin", "nothing", "--ttl", "1s", "--connect", up.address});
  CHECK(pin_missing.exit_code == 1);
  CHECK(pin_missing.err.find("not_found") != std::string::npos);
  auto unpin = sluice::test::run(sluice_bin, {"kv", "unpin", "dir/a", "--connect", up.address});
  CHECK_MESSAGE(unpin.exit_code == 0, unpin.err);
  auto unpin_again = sluice::test::run(sluice_bin, {"kv", "unpin", "dir/a", "--connect", up.address});
  CHECK(unpin_again.exit_code == 1);
  auto bad_ttl = sluice::test::run(sluice_bin, {"kv", "put", "short", file, "--ttl", "soon", "--connect", up.address});
  CHECK(bad_ttl.exit_code == 2);
  CHECK(bad_ttl.err.find("--ttl") != std::string::npos);
  std::this_thread::sleep_for(400ms);
  auto expired = sluice::test::run(sluice_bin, {"kv", "get", "short", "--connect", up.address});
  CHECK(expired.exit_code == 1);
  CHECK(expired.err.find("not_found") != std::string::npos);
  std::remove(file.c_str());

  // SIGTERM stops the node cleanly.
  up.proc->signal(SIGTERM);
  CHECK(up.proc->wait(10s) == std::optional<int>{0});
}

TEST_CASE("cluster: an owner restarted on the same address replaces the dead one, whose keys are dropped") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto c = connect(owner.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  REQUIRE(c->put("held/by/old", "gone with it").ok());
  auto old_id = c->status().value().members.at(0).id;

  owner.proc->signal(SIGKILL);
  owner.proc->wait(5s);
  c.reset();
  owner = start_node({"owner", "--master", master.address, "--listen", owner.address});
  c = connect(owner.address);
  // The dead member is forgotten once its lease ran out; only the new one
  // is listed, and the old one's key is gone rather than unavailable.
  auto s = await_status(*c, [&](const sluice::cluster_status& s) {
    return s.members.size() == 1 && s.members[0].up && s.members[0].id != old_id;
  });
  CHECK(s.object_count == 0);
  CHECK(c->get("held/by/old").code() == sluice::errc::not_found);
  REQUIRE(c->put("held/by/new", "here").ok());
  CHECK(c->get("held/by/new").value().str() == "here");
}
