// RPC routing through the public API: calls to any instance, to a named
// client, by least outstanding; the registry's listing.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/rpc.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::test;

TEST_CASE("rpc: calls to any instance take turns, a named target gets every call, least_outstanding avoids a busy one") {
  auto cluster = start_cluster();
  auto a = shm_client(*cluster, "a");
  auto b = shm_client(*cluster, "b");
  auto caller = shm_client(*cluster, "caller");
  REQUIRE(a->rpc().serve("who", who(a->rpc().id())).ok());
  REQUIRE(b->rpc().serve("who", who(b->rpc().id())).ok());
  std::map<std::string, int> seen;
  for (int i = 0; i < 20; ++i) {
    auto r = caller->rpc().call(rpc_target::any(), "who", dict_builder{});
    REQUIRE(r.ok());
    ++seen[string_field(r->dict(), "id")];
  }
  CHECK(seen.size() == 2);
  CHECK(seen[a->rpc().id()] == 10);
  CHECK(seen[b->rpc().id()] == 10);
  for (int i = 0; i < 5; ++i) {
    auto r = caller->rpc().call(rpc_target::of(b->rpc().id()), "who", dict_builder{});
    REQUIRE(r.ok());
    CHECK(string_field(r->dict(), "id") == b->rpc().id());
  }
  // One instance holds its calls: least_outstanding sends the rest to the other.
  auto busy = shm_client(*cluster, "busy");
  std::mutex mutex;
  std::vector<sluice::rpc_promise> held;
  REQUIRE(busy->rpc()
              .serve_async("pick",
                           [&](rpc_request, sluice::rpc_promise p) {
                             std::lock_guard guard{mutex};
                             held.push_back(std::move(p));
                           })
              .ok());
  REQUIRE(a->rpc().serve("pick", who(a->rpc().id())).ok());
  auto first = caller->rpc().call_async(rpc_target::of(busy->rpc().id()), "pick", dict_builder{});
  eventually([&] {
    std::lock_guard guard{mutex};
    return held.size() == 1;
  });
  for (int i = 0; i < 6; ++i) {
    auto r = caller->rpc().call(rpc_target::any(), "pick", dict_builder{},
                                {.routing = sluice::rpc_routing::least_outstanding});
    REQUIRE(r.ok());
    CHECK(string_field(r->dict(), "id") == a->rpc().id());
  }
  std::lock_guard guard{mutex};
  for (auto& p : held) p.reply(dict_builder{});
  held.clear();
}

TEST_CASE("rpc: the registry lists each name's instances with their clients and owner") {
  auto cluster = start_cluster();
  auto a = shm_client(*cluster, "alpha");
  auto b = shm_client(*cluster, "beta");
  REQUIRE(a->rpc().serve("embed", echo, {.max_concurrent = 8}).ok());
  REQUIRE(b->rpc().serve("embed", echo).ok());
  REQUIRE(b->rpc().serve("embed.v2", echo).ok());
  std::vector<sluice::rpc_instance_info> found;
  eventually([&] {
    auto r = a->rpc().instances("embed");
    if (r) found = *r;
    return r && r->size() == 2;
  });
  std::set<std::string> clients;
  for (auto& i : found) {
    CHECK(i.name == "embed");
    CHECK_FALSE(i.owner_address.empty());
    clients.insert(i.client_name);
    if (i.client_id == a->rpc().id()) CHECK(i.max_concurrent == 8);
  }
  CHECK(clients == std::set<std::string>{"alpha", "beta"});
  auto all = a->rpc().instances("embed", true);
  REQUIRE(all.ok());
  CHECK(all->size() == 3);
  // A client that goes away leaves the registry.
  b.reset();
  eventually([&] {
    auto r = a->rpc().instances("", true);
    return r && r->size() == 1;
  });
}
