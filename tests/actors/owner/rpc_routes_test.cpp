// The owner's RPC routes as plain code: local instances, what the master
// said and for how long, the routing rules of each mode, relays, buffers,
// and what a link going down takes with it.

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "actors/owner/rpc_routes.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::errc;
using sluice::node_id;
using sluice::rpc_relay;
using sluice::rpc_route;
using sluice::rpc_routes;
using kind = rpc_route::kind;
using mode = rpc_routes::mode;
using sluice::wire::rpc_routing;

const rpc_routes::time_point t0{};
const node_id self{0x100};
const node_id other_owner{0x200};

/// Links 1..99 share the pool (shared-memory clients); others do not.
rpc_routes make_routes() {
  return rpc_routes{[](sluice::transport::link_id link) { return link < 100; }};
}

rpc_routes::local_instance instance(std::uint64_t client, sluice::transport::link_id link) {
  return {node_id{client}, "c" + std::to_string(client), link, 4, false, true};
}

sluice::wire::rpc_instance remote(const std::string& name, std::uint64_t client) {
  return {name, node_id{client}, "r", other_owner, "10.0.0.2:7000", 4, false};
}

/// Tells the routes that the master knows no other instance of `name`, fresh until t0 + 1s.
void known_local_only(rpc_routes& r, const std::string& name) { r.learn(name, {}, self, t0 + 1s); }

}  // namespace

TEST_CASE("rpc routes: a name never looked up is asked of the master, and once known its instances take turns") {
  auto r = make_routes();
  CHECK(r.route("echo", {}, rpc_routing::round_robin, t0, mode::any).what == kind::lookup);
  REQUIRE(r.serve("echo", instance(1, 11)).ok());
  REQUIRE(r.serve("echo", instance(2, 12)).ok());
  // Served here but the master's word is missing: still a lookup for "any".
  CHECK(r.route("echo", {}, rpc_routing::round_robin, t0, mode::any).what == kind::lookup);
  known_local_only(r, "echo");
  std::vector<std::uint64_t> got;
  for (int i = 0; i < 4; ++i) {
    auto route = r.route("echo", {}, rpc_routing::round_robin, t0 + 10ms, mode::any);
    REQUIRE(route.what == kind::local);
    CHECK(route.link == 10 + route.client.value);
    got.push_back(route.client.value);
    r.finished(route.client);
  }
  CHECK(got == std::vector<std::uint64_t>{1, 2, 1, 2});
  // What the master said goes stale: "any" asks again, stale_ok makes do.
  CHECK(r.route("echo", {}, rpc_routing::round_robin, t0 + 2s, mode::any).what == kind::lookup);
  CHECK(r.route("echo", {}, rpc_routing::round_robin, t0 + 2s, mode::stale_ok).what == kind::local);
}

TEST_CASE("rpc routes: least outstanding picks the idlest instance, and idle ones still take turns") {
  auto r = make_routes();
  REQUIRE(r.serve("work", instance(1, 11)).ok());
  REQUIRE(r.serve("work", instance(2, 12)).ok());
  REQUIRE(r.serve("work", instance(3, 13)).ok());
  known_local_only(r, "work");
  auto at = t0 + 1ms;
  // Three calls outstanding, one on each...
  std::set<std::uint64_t> first_three;
  for (int i = 0; i < 3; ++i) first_three.insert(r.route("work", {}, rpc_routing::least_outstanding, at, mode::any).client.value);
  CHECK(first_three == std::set<std::uint64_t>{1, 2, 3});
  // ...one finishes on client 2: it is the idlest.
  r.finished(node_id{2});
  CHECK(r.route("work", {}, rpc_routing::least_outstanding, at, mode::any).client == node_id{2});
  // Finishing more than was counted is harmless.
  for (int i = 0; i < 5; ++i) r.finished(node_id{3});
  CHECK(r.route("work", {}, rpc_routing::least_outstanding, at, mode::any).client == node_id{3});
}

TEST_CASE("rpc routes: remote instances are routed to with their owner, and calls from other owners stay local") {
  auto r = make_routes();
  REQUIRE(r.serve("svc", instance(1, 11)).ok());
  r.learn("svc", {remote("svc", 5), remote("svc", 1), remote("other", 6)}, self, t0 + 1s);
  std::set<std::uint64_t> clients;
  for (int i = 0; i < 4; ++i) {
    auto route = r.route("svc", {}, rpc_routing::round_robin, t0, mode::any);
    clients.insert(route.client.value);
    if (route.what == kind::remote) {
      CHECK(route.owner == other_owner);
      CHECK(route.owner_address == "10.0.0.2:7000");
    }
  }
  // Client 1 is known here as well: it moved here, and only the local
  // instance counts. The other name's instance is not this name's.
  CHECK(clients == std::set<std::uint64_t>{1, 5});
  for (int i = 0; i < 4; ++i) {
    CHECK(r.route("svc", {}, rpc_routing::round_robin, t0, mode::local_only).client == node_id{1});
  }
  // A named client: local or remote, or none.
  CHECK(r.route("svc", node_id{5}, rpc_routing::round_robin, t0, mode::any).what == kind::remote);
  CHECK(r.route("svc", node_id{5}, rpc_routing::round_robin, t0, mode::local_only).what == kind::none);
  CHECK(r.route("svc", node_id{9}, rpc_routing::round_robin, t0, mode::any).what == kind::none);
  r.forget_remote("svc", node_id{5});
  CHECK(r.route("svc", node_id{5}, rpc_routing::round_robin, t0, mode::any).what == kind::none);
}

TEST_CASE("rpc routes: the poller relays only when every instance is local, known and shares the pool") {
  auto r = make_routes();
  REQUIRE(r.serve("fast", instance(1, 11)).ok());
  // Not known fresh yet: the actor's.
  CHECK(r.route("fast", {}, rpc_routing::round_robin, t0, mode::relay).what == kind::none);
  known_local_only(r, "fast");
  CHECK(r.route("fast", {}, rpc_routing::round_robin, t0, mode::relay).what == kind::local);
  // A client over TCP serves it too: round robin across it is the actor's.
  REQUIRE(r.serve("fast", instance(2, 200)).ok());
  CHECK(r.route("fast", {}, rpc_routing::round_robin, t0, mode::relay).what == kind::none);
  // Named, the shm client is still relayed; the TCP one is not.
  CHECK(r.route("fast", node_id{1}, rpc_routing::round_robin, t0, mode::relay).what == kind::local);
  CHECK(r.route("fast", node_id{2}, rpc_routing::round_robin, t0, mode::relay).what == kind::none);
  REQUIRE(r.unserve("fast", node_id{2}));
  // A remote instance makes it the actor's too.
  r.learn("fast", {remote("fast", 7)}, self, t0 + 1s);
  CHECK(r.route("fast", {}, rpc_routing::round_robin, t0, mode::relay).what == kind::none);
}

TEST_CASE("rpc routes: an instance whose session is not live takes no calls to any name, but a call naming it") {
  auto r = make_routes();
  REQUIRE(r.serve("svc", instance(1, 11)).ok());
  REQUIRE(r.serve("svc", instance(2, 12)).ok());
  known_local_only(r, "svc");
  CHECK(r.set_live({2}));
  CHECK_FALSE(r.set_live({2}));  // nothing changed
  for (int i = 0; i < 3; ++i) CHECK(r.route("svc", {}, rpc_routing::round_robin, t0, mode::any).client == node_id{2});
  CHECK(r.route("svc", node_id{1}, rpc_routing::round_robin, t0, mode::any).client == node_id{1});
  auto live = r.live_instances();
  REQUIRE(live.size() == 1);
  CHECK(live[0].client == node_id{2});
  CHECK(live[0].name == "svc");
}

TEST_CASE("rpc routes: local instances are bounded, and a name known to have none is not kept") {
  auto r = make_routes();
  for (std::size_t i = 0; i < sluice::rpc_local_instances_max; ++i) {
    REQUIRE(r.serve("n" + std::to_string(i % 7), instance(1000 + i, 11)).ok());
  }
  auto more = r.serve("another", instance(1, 11));
  CHECK(more.code() == errc::overloaded);
  // Replacing an instance is not one more.
  CHECK(r.serve("n0", instance(1000, 12)).ok());
  REQUIRE(r.unserve("n0", node_id{1000}));
  CHECK(r.serve("another", instance(1, 11)).ok());
  // Names served and given up leave nothing behind.
  auto churn = make_routes();
  for (int i = 0; i < 1000; ++i) {
    REQUIRE(churn.serve("gone" + std::to_string(i), instance(1, 11)).ok());
    REQUIRE(churn.unserve("gone" + std::to_string(i), node_id{1}));
  }
  CHECK(churn.name_count() == 0);
  // The refused serve left no name behind; a lookup that found nothing neither.
  auto fresh = make_routes();
  fresh.learn("ghost", {}, self, t0 + 1s);
  CHECK(fresh.name_count() == 0);
  CHECK(fresh.route("ghost", {}, rpc_routing::round_robin, t0, mode::any).what == kind::lookup);
}

TEST_CASE("rpc routes: a relay is taken once, by its answer on the handler's link or by its caller") {
  auto r = make_routes();
  rpc_relay relay{0, 11, 41, node_id{1}, 12, node_id{2}, "svc", std::chrono::steady_clock::time_point{} + 1s};
  auto id = r.add_relay(relay);
  REQUIRE(id.has_value());
  CHECK((*id & sluice::rpc_relay_bit) != 0);
  CHECK(r.relay_count() == 1);
  // An answer from another link is not the handler's.
  CHECK_FALSE(r.take_relay(*id, 11).has_value());
  auto taken = r.take_relay(*id, 12);
  REQUIRE(taken.has_value());
  CHECK(taken->caller_request == 41);
  CHECK_FALSE(r.take_relay(*id, 12).has_value());
  CHECK_FALSE(r.take_relay_of_caller(11, 41).has_value());
  // Or its caller cancels it.
  auto again = r.add_relay(relay);
  REQUIRE(again.has_value());
  CHECK(*again != *id);
  CHECK(r.take_relay_of_caller(11, 41)->id == *again);
  CHECK(r.relay_count() == 0);
}

TEST_CASE("rpc routes: a link going down takes its instances, its relays both ways, its buffers and its repeat filter") {
  auto r = make_routes();
  REQUIRE(r.serve("a", instance(1, 11)).ok());
  REQUIRE(r.serve("b", instance(1, 11)).ok());
  REQUIRE(r.serve("b", instance(2, 12)).ok());
  auto deadline = std::chrono::steady_clock::time_point{} + 1s;
  REQUIRE(r.add_relay({0, 12, 1, node_id{2}, 11, node_id{1}, "a", deadline}).has_value());  // to a handler on 11
  REQUIRE(r.add_relay({0, 11, 2, node_id{1}, 12, node_id{2}, "b", deadline}).has_value());  // from a caller on 11
  REQUIRE(r.add_relay({0, 13, 3, node_id{3}, 12, node_id{2}, "b", deadline}).has_value());  // neither
  REQUIRE(r.add_buffer(node_id{1}, 11, sluice::shared_bytes{}).ok());
  CHECK(r.first_time(11, 5));
  CHECK_FALSE(r.first_time(11, 5));
  auto gone = r.link_down(11);
  CHECK(gone.names == std::vector<std::string>{"a", "b"});
  REQUIRE(gone.unanswered.size() == 1);
  CHECK(gone.unanswered[0].caller_request == 1);
  REQUIRE(gone.abandoned.size() == 1);
  CHECK(gone.abandoned[0].caller_request == 2);
  CHECK(r.relay_count() == 1);
  CHECK(r.first_time(11, 5));  // a new link of the same id starts afresh
  known_local_only(r, "b");
  CHECK(r.route("b", {}, rpc_routing::round_robin, t0, mode::any).client == node_id{2});
  CHECK(r.route("a", {}, rpc_routing::round_robin, t0, mode::any).what == kind::lookup);
}

TEST_CASE("rpc routes: relays past their deadline are taken by expired(), the others stay") {
  auto r = make_routes();
  auto start = std::chrono::steady_clock::time_point{};
  REQUIRE(r.add_relay({0, 11, 1, node_id{1}, 12, node_id{2}, "a", start + 100ms}).has_value());
  REQUIRE(r.add_relay({0, 11, 2, node_id{1}, 12, node_id{2}, "a", start + 300ms}).has_value());
  CHECK(r.expired(start + 50ms).empty());
  auto late = r.expired(start + 200ms);
  REQUIRE(late.size() == 1);
  CHECK(late[0].caller_request == 1);
  CHECK(r.relay_count() == 1);
}

TEST_CASE("rpc routes: buffers are bounded per link and given back only to the client that holds them") {
  auto r = make_routes();
  std::vector<std::uint64_t> ids;
  for (std::size_t i = 0; i < sluice::rpc_buffers_per_link_max; ++i) {
    auto id = r.add_buffer(node_id{1}, 11, sluice::shared_bytes{});
    REQUIRE(id.ok());
    ids.push_back(*id);
  }
  CHECK(r.add_buffer(node_id{1}, 11, sluice::shared_bytes{}).code() == errc::overloaded);
  CHECK(r.add_buffer(node_id{2}, 12, sluice::shared_bytes{}).ok());  // another link has its own
  CHECK_FALSE(r.take_buffer(ids[0], node_id{2}).has_value());
  CHECK(r.take_buffer(ids[0], node_id{1}).has_value());
  CHECK_FALSE(r.take_buffer(ids[0], node_id{1}).has_value());
  CHECK(r.add_buffer(node_id{1}, 11, sluice::shared_bytes{}).ok());  // room again
}
