// interrupt_scope through the public API: a blocking call whose answer
// does not come ends `cancelled` once the scope's check says so, on the
// thread's own shm channel and through the client node alike, and the
// thread's next call gets its own answer.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "sluice/interrupt.hpp"
#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/rpc.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::test;

namespace {

/// A handler that holds each call until released (at most 10 s).
struct held_handler {
  std::atomic<bool> released{false};
  std::atomic<int> entered{0};

  rpc_handler handler() {
    return [this](const rpc_request& r) -> result<dict_builder> {
      entered.fetch_add(1);
      auto until = std::chrono::steady_clock::now() + 10s;
      while (!released.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
      return echo(r);
    };
  }
};

/// A check that says "interrupt" from its second run on, counting runs.
struct second_time {
  std::atomic<int> runs{0};
  std::function<bool()> check() {
    return [this] { return runs.fetch_add(1) >= 1; };
  }
};

void interrupted_then_answered(client& caller, held_handler& held) {
  second_time check;
  {
    interrupt_scope scope{check.check(), 20ms};
    auto r = caller.rpc().call(rpc_target::any(), "held", text_args("first"), {.timeout = 3s});
    CHECK(r.code() == errc::cancelled);
    CHECK(check.runs.load() >= 2);
  }
  CHECK(held.entered.load() >= 1);
  held.released = true;
  // The first call's answer comes late and is skipped: this call gets its own.
  auto r = caller.rpc().call(rpc_target::any(), "held", text_args("second"), {.timeout = 3s});
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(string_field(r->dict()) == "second");
}

}  // namespace

TEST_CASE("interrupt: an RPC call on the thread's own shm channel ends cancelled when the scope says so") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  held_handler held;
  REQUIRE(server->rpc().serve("held", held.handler()).ok());
  auto caller = shm_client(*cluster, "caller");
  interrupted_then_answered(*caller, held);
}

TEST_CASE("interrupt: a call over TCP, on the thread's own link, ends cancelled when the scope says so") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  held_handler held;
  REQUIRE(server->rpc().serve("held", held.handler()).ok());
  client_options tcp;
  tcp.transport = client_transport::tcp;
  auto caller = client::connect(cluster->client_address(), tcp).value();
  interrupted_then_answered(*caller, held);
}

TEST_CASE("interrupt: a call through the client node (in-process) ends cancelled when the scope says so") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  held_handler held;
  REQUIRE(server->rpc().serve("held", held.handler()).ok());
  auto caller = cluster->connect().value();
  interrupted_then_answered(*caller, held);
}

TEST_CASE("interrupt: a call answered sooner than `every` never runs the check, and scopes nest") {
  auto cluster = start_cluster();
  auto kv = cluster->connect().value();
  REQUIRE(kv->put("k", "v").ok());
  std::atomic<int> outer_runs{0};
  interrupt_scope outer{[&] {
    outer_runs.fetch_add(1);
    return true;
  }};
  CHECK(interrupt_scope::current() == &outer);
  {
    interrupt_scope inner{[] { return false; }, 1000ms};
    CHECK(interrupt_scope::current() == &inner);
    CHECK(kv->get("k").value().str() == "v");
  }
  CHECK(interrupt_scope::current() == &outer);
  CHECK(kv->get("k").value().str() == "v");
  CHECK(outer_runs.load() == 0);
}

TEST_CASE("interrupt: a check that throws counts as not interrupted") {
  interrupt_scope scope{[]() -> bool { throw 1; }};
  CHECK_FALSE(scope.interrupted());
  CHECK(scope.every() == interrupt_scope::default_every);
}
