// Clients with no owner on their host: synchronous calls go on the
// calling thread's own TCP link to the owner, and asynchronous RPC calls
// on the client's own asynchronous channel, not through the client node.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/delay_proxy.hpp"
#include "tests/support/rpc.hpp"

namespace {

using namespace std::chrono_literals;

std::unique_ptr<sluice::local_cluster> start_cluster() {
  auto c = sluice::local_cluster::start();
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

std::uint16_t port_of(const std::string& address) {
  return static_cast<std::uint16_t>(std::stoi(address.substr(address.rfind(':') + 1)));
}

std::unique_ptr<sluice::client> tcp_client(const std::string& address, std::chrono::milliseconds timeout = 5000ms) {
  sluice::client_options options;
  options.transport = sluice::client_transport::tcp;
  options.timeout = timeout;
  auto c = sluice::client::connect(address, options);
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

}  // namespace

TEST_CASE("tcp client: each calling thread opens one link of its own to the owner and keeps it") {
  auto cluster = start_cluster();
  sluice::test::delay_proxy proxy{0ms};
  proxy.set_target(port_of(cluster->client_address()));
  auto kv = tcp_client(proxy.address());
  CHECK(proxy.accepted() == 1);  // the client node's link

  std::string big(200 * 1024, 'b');  // past the link's read-ahead
  REQUIRE(kv->put("small", "s").ok());
  REQUIRE(kv->put("big", big).ok());
  CHECK(proxy.accepted() == 2);  // this thread's own link
  for (int i = 0; i < 20; ++i) {
    CHECK(kv->get("small").value().str() == "s");
    CHECK(kv->get("big").value().str() == big);
  }
  CHECK(kv->exists("big").value());
  CHECK(kv->remove("small").value());
  CHECK(kv->get("small").code() == sluice::errc::not_found);
  CHECK(proxy.accepted() == 2);

  std::thread other{[&] {
    for (int i = 0; i < 5; ++i) CHECK(kv->get("big").value().str() == big);
  }};
  other.join();
  CHECK(proxy.accepted() == 3);  // one more for the other thread
}

TEST_CASE("tcp client: a call on a thread's own link fails within its deadline when the path to the owner goes") {
  auto cluster = start_cluster();
  auto proxy = std::make_unique<sluice::test::delay_proxy>(0ms);
  proxy->set_target(port_of(cluster->client_address()));
  auto kv = tcp_client(proxy->address(), 1000ms);
  REQUIRE(kv->put("k", "v").ok());
  proxy.reset();  // every connection through it closes
  auto start = std::chrono::steady_clock::now();
  auto r = kv->get("k");
  CHECK_FALSE(r.ok());
  CHECK((r.code() == sluice::errc::unavailable || r.code() == sluice::errc::timeout));
  // The call's deadline and the slack a thread waiting on the node gives it.
  CHECK(std::chrono::steady_clock::now() - start < 2500ms);
}

TEST_CASE("tcp client: a thread's link answers a late reply's successor correctly after a timeout") {
  auto cluster = start_cluster();
  // 300 ms each way: a 100 ms call times out, and its answer arrives later
  // on the same link, ahead of the next call's.
  sluice::test::delay_proxy proxy{300ms};
  proxy.set_target(port_of(cluster->client_address()));
  auto kv = tcp_client(proxy.address(), 3000ms);
  REQUIRE(kv->put("a", "first").ok());
  REQUIRE(kv->put("b", "second").ok());
  auto late = kv->get("a", sluice::call_options{100ms});
  CHECK(late.code() == sluice::errc::timeout);
  auto next = kv->get("b");
  REQUIRE(next.ok());
  CHECK(next->str() == "second");
}

TEST_CASE("tcp client: asynchronous RPC calls go on one connection of the client's own, answered on its thread") {
  auto cluster = start_cluster();
  auto server = sluice::test::shm_client(*cluster, "server");
  REQUIRE(server->rpc().serve("echo", sluice::test::echo).ok());
  sluice::test::delay_proxy proxy{0ms};
  proxy.set_target(port_of(cluster->client_address()));
  auto caller = tcp_client(proxy.address());
  CHECK(proxy.accepted() == 1);  // the client node's link
  constexpr int calls = 64;
  std::vector<sluice::rpc_future> pending;
  for (int i = 0; i < calls; ++i) {
    pending.push_back(caller->rpc().call_async(sluice::rpc_target::any(), "echo",
                                               sluice::test::text_args("call " + std::to_string(i))));
  }
  for (int i = 0; i < calls; ++i) {
    REQUIRE(pending[static_cast<std::size_t>(i)].wait_for(5s));
    auto r = pending[static_cast<std::size_t>(i)].get();
    REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
    CHECK(sluice::test::string_field(r->dict()) == "call " + std::to_string(i));
  }
  CHECK(proxy.accepted() == 2);  // one more: the asynchronous channel, for all of them
  // From another thread too, on the same channel; a callback may call again.
  std::promise<std::string> second;
  std::thread other{[&] {
    caller->rpc().call_async(
        sluice::rpc_target::any(), "echo", sluice::test::text_args("first"),
        [&](sluice::result<sluice::rpc_result> r) {
          REQUIRE(r.ok());
          caller->rpc().call_async(sluice::rpc_target::any(), "echo", sluice::test::text_args("again"),
                                   [&](sluice::result<sluice::rpc_result> again) {
                                     second.set_value(again ? sluice::test::string_field(again->dict()) : "failed");
                                   });
        });
  }};
  other.join();
  auto answer = second.get_future();
  REQUIRE(answer.wait_for(5s) == std::future_status::ready);
  CHECK(answer.get() == "again");
  CHECK(proxy.accepted() == 2);
}

TEST_CASE("tcp client: asynchronous calls in flight fail with unavailable at once when the path to the owner goes") {
  auto cluster = start_cluster();
  auto server = sluice::test::shm_client(*cluster, "server");
  std::atomic<bool> took{false};
  std::vector<sluice::rpc_promise> held;
  std::mutex held_mutex;
  REQUIRE(server->rpc()
              .serve_async("hold",
                           [&](sluice::rpc_request, sluice::rpc_promise p) {
                             std::lock_guard guard{held_mutex};
                             held.push_back(std::move(p));
                             took = true;
                           })
              .ok());
  auto proxy = std::make_unique<sluice::test::delay_proxy>(0ms);
  proxy->set_target(port_of(cluster->client_address()));
  auto caller = tcp_client(proxy->address());
  auto pending = caller->rpc().call_async(sluice::rpc_target::any(), "hold", sluice::dict_builder{}, {.timeout = 60s});
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!took && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(1ms);
  REQUIRE(took);
  auto start = std::chrono::steady_clock::now();
  proxy.reset();  // every connection through it closes
  REQUIRE(pending.wait_for(10s));
  CHECK(pending.get().code() == sluice::errc::unavailable);
  CHECK(std::chrono::steady_clock::now() - start < 5s);  // not at its 60 s deadline
  std::lock_guard guard{held_mutex};
  for (auto& p : held) p.reply(sluice::dict_builder{});
}
