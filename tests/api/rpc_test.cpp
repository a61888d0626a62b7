// RPC through the public API, clients and owner in one process: serving,
// calling, errors, deadlines, async handlers, limits, cancellation.

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

TEST_CASE("rpc: a served handler echoes what another client sends it, and sees who called") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  std::string seen_caller;
  REQUIRE(server->rpc()
              .serve("echo",
                     [&seen_caller](const rpc_request& r) {
                       seen_caller = r.caller();
                       return echo(r);
                     })
              .ok());
  auto r = caller->rpc().call(rpc_target::any(), "echo", text_args("hello"));
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(string_field(r->dict()) == "hello");
  CHECK(seen_caller == caller->rpc().id());
  CHECK_FALSE(r->location().has_value());  // small: it came with the answer
  // Many calls, one after another, all answered in order.
  for (int i = 0; i < 200; ++i) {
    auto text = "call " + std::to_string(i);
    auto again = caller->rpc().call(rpc_target::of(server->rpc().id()), "echo", text_args(text));
    REQUIRE(again.ok());
    CHECK(string_field(again->dict()) == text);
  }
}

TEST_CASE("rpc: a client over TCP calls a handler and serves one, large results and arguments included") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  REQUIRE(server->rpc().serve("echo", echo).ok());
  sluice::client_options tcp;
  tcp.transport = sluice::client_transport::tcp;
  auto remote = sluice::client::connect(cluster->client_address(), tcp).value();
  auto r = remote->rpc().call(rpc_target::any(), "echo", text_args("over tcp"));
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(string_field(r->dict()) == "over tcp");
  // A small call answered with a large result: the owner relays the call,
  // and the answer leaves the handler's pool for the caller's socket.
  auto answer = std::string(1 << 20, 'r');
  REQUIRE(server->rpc()
              .serve("large",
                     [&answer](const rpc_request&) -> result<dict_builder> {
                       dict_builder out;
                       if (auto ok = out.add_string("text", answer); !ok) return ok.error();
                       return out;
                     })
              .ok());
  for (int i = 0; i < 3; ++i) {
    auto got = remote->rpc().call(rpc_target::any(), "large", text_args("x"));
    REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
    CHECK(string_field(got->dict()) == answer);
    auto later = remote->rpc().call_async(rpc_target::any(), "large", text_args("y"));
    REQUIRE(later.wait_for(5s));
    auto got_later = later.get();
    REQUIRE(got_later.ok());
    CHECK(string_field(got_later->dict()) == answer);
  }

  std::string seen_caller;
  REQUIRE(remote->rpc()
              .serve("tcp/echo",
                     [&seen_caller](const rpc_request& req) {
                       seen_caller = req.caller();
                       return echo(req);
                     })
              .ok());
  auto back = server->rpc().call(rpc_target::of(remote->rpc().id()), "tcp/echo", text_args("to tcp"));
  REQUIRE_MESSAGE(back.ok(), (back ? "" : back.error().to_string()));
  CHECK(string_field(back->dict()) == "to tcp");
  CHECK(seen_caller == server->rpc().id());
  // Large arguments reach it too (copied over TCP, not through the pool).
  auto big = std::string(1 << 20, 'b');
  auto large = server->rpc().call(rpc_target::any(), "tcp/echo", text_args(big));
  REQUIRE(large.ok());
  CHECK(string_field(large->dict()) == big);
  REQUIRE(remote->rpc().unserve("tcp/echo").ok());
  CHECK(server->rpc().call(rpc_target::any(), "tcp/echo", text_args("x")).code() == errc::not_found);
}

TEST_CASE("rpc: a handler's error reaches the caller with its code and message, an exception as handler_failed") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  REQUIRE(server->rpc()
              .serve("lookup",
                     [](const rpc_request&) -> sluice::result<dict_builder> {
                       return sluice::fail(errc::not_found, "no user 'bob'");
                     })
              .ok());
  REQUIRE(server->rpc()
              .serve("boom", [](const rpc_request&) -> sluice::result<dict_builder> {
                throw std::runtime_error("the model is not loaded");
              })
              .ok());
  auto e = caller->rpc().call(rpc_target::any(), "lookup", dict_builder{});
  REQUIRE_FALSE(e.ok());
  CHECK(e.code() == errc::not_found);
  CHECK(e.error().message().find("no user 'bob'") != std::string::npos);
  auto t = caller->rpc().call(rpc_target::any(), "boom", dict_builder{});
  REQUIRE_FALSE(t.ok());
  CHECK(t.code() == errc::handler_failed);
  CHECK(t.error().message().find("the model is not loaded") != std::string::npos);
  // The handler's thread lives on: the next call is served.
  CHECK(caller->rpc().call(rpc_target::any(), "lookup", dict_builder{}).code() == errc::not_found);
}

TEST_CASE("rpc: calls to an unknown name, to a client that does not serve it, or with bad input fail clearly") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  REQUIRE(server->rpc().serve("echo", echo).ok());
  CHECK(caller->rpc().call(rpc_target::any(), "nobody", dict_builder{}).code() == errc::not_found);
  CHECK(caller->rpc().call(rpc_target::of(caller->rpc().id()), "echo", dict_builder{}).code() == errc::not_found);
  CHECK(caller->rpc().call(rpc_target::of("not hex"), "echo", dict_builder{}).code() == errc::invalid_argument);
  CHECK(caller->rpc().call(rpc_target::any(), "bad name!", dict_builder{}).code() == errc::invalid_argument);
  CHECK(server->rpc().serve("", echo).code() == errc::invalid_argument);
  CHECK(server->rpc().serve("x", echo, {.max_concurrent = 0}).code() == errc::invalid_argument);
  CHECK(server->rpc().unserve("never-served").code() == errc::not_found);
  // Arguments the handler cannot read as it expects: its own error.
  auto r = caller->rpc().call(rpc_target::any(), "echo", dict_builder{});
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.error().message().find("no 'text' argument") != std::string::npos);
}

TEST_CASE("rpc: after unserve, calls find no instance") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  REQUIRE(server->rpc().serve("echo", echo).ok());
  REQUIRE(caller->rpc().call(rpc_target::any(), "echo", text_args("a")).ok());
  REQUIRE(server->rpc().unserve("echo").ok());
  CHECK(caller->rpc().call(rpc_target::any(), "echo", text_args("a")).code() == errc::not_found);
}

TEST_CASE("rpc: the deadline reaches the handler, and a call past it fails with timeout") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  std::atomic<long long> budget_ms{-1};
  REQUIRE(server->rpc()
              .serve("slow",
                     [&budget_ms](const rpc_request& r) -> sluice::result<dict_builder> {
                       auto left = r.deadline() - std::chrono::steady_clock::now();
                       budget_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
                       while (!r.cancelled()) std::this_thread::sleep_for(1ms);
                       return dict_builder{};
                     })
              .ok());
  auto r = caller->rpc().call(rpc_target::any(), "slow", dict_builder{}, {.timeout = 200ms});
  CHECK(r.code() == errc::timeout);
  // The handler saw the caller's deadline, not a default of its own.
  CHECK(budget_ms.load() > 0);
  CHECK(budget_ms.load() <= 200);
}

TEST_CASE("rpc: an async handler answers later through its promise, from another thread") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  std::mutex mutex;
  std::vector<std::thread> workers;
  REQUIRE(server->rpc()
              .serve_async("later",
                           [&](rpc_request r, sluice::rpc_promise p) {
                             std::lock_guard guard{mutex};
                             workers.emplace_back([r = std::move(r), p = std::move(p)]() mutable {
                               std::this_thread::sleep_for(20ms);
                               auto out = echo(r);
                               p.reply(*out);
                             });
                           })
              .ok());
  std::vector<sluice::rpc_future> futures;
  for (int i = 0; i < 8; ++i) futures.push_back(caller->rpc().call_async(rpc_target::any(), "later", text_args(std::to_string(i))));
  for (int i = 0; i < 8; ++i) {
    auto r = futures[i].get();
    REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
    CHECK(string_field(r->dict()) == std::to_string(i));
  }
  std::lock_guard guard{mutex};
  for (auto& w : workers) w.join();
}

TEST_CASE("rpc: a promise dropped unanswered fails the call with handler_failed") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  REQUIRE(server->rpc().serve_async("forgetful", [](rpc_request, sluice::rpc_promise) {}).ok());
  auto r = caller->rpc().call(rpc_target::any(), "forgetful", dict_builder{});
  CHECK(r.code() == errc::handler_failed);
}

TEST_CASE("rpc: beyond max_concurrent calls in progress, a handler answers overloaded") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  auto caller = shm_client(*cluster);
  std::mutex mutex;
  std::vector<sluice::rpc_promise> held;
  REQUIRE(server->rpc()
              .serve_async(
                  "held",
                  [&](rpc_request, sluice::rpc_promise p) {
                    std::lock_guard guard{mutex};
                    held.push_back(std::move(p));
                  },
                  {.max_concurrent = 2})
              .ok());
  auto a = caller->rpc().call_async(rpc_target::any(), "held", dict_builder{});
  auto b = caller->rpc().call_async(rpc_target::any(), "held", dict_builder{});
  eventually([&] {
    std::lock_guard guard{mutex};
    return held.size() == 2;
  });
  auto c = caller->rpc().call(rpc_target::any(), "held", dict_builder{});
  CHECK(c.code() == errc::overloaded);
  {
    std::lock_guard guard{mutex};
    for (auto& p : held) p.reply(dict_builder{});
    held.clear();
  }
  CHECK(a.get().ok());
  CHECK(b.get().ok());
  // Room again: the next call runs (and waits in `held`).
  auto d = caller->rpc().call_async(rpc_target::any(), "held", dict_builder{});
  eventually([&] {
    std::lock_guard guard{mutex};
    return held.size() == 1;
  });
  std::lock_guard guard{mutex};
  held.front().reply(dict_builder{});
  held.clear();
}

TEST_CASE("rpc: a cancelled call ends with cancelled at once, and its handler learns of it") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster);
  // On shared memory the owner's poller relays the call and its cancel;
  // over TCP its tcp thread does.
  bool over_tcp = false;
  SUBCASE("a caller on shared memory") {}
  SUBCASE("a caller over TCP") { over_tcp = true; }
  auto caller = over_tcp ? tcp_client(cluster->client_address()) : shm_client(*cluster);
  std::atomic<bool> saw_cancel{false};
  std::atomic<bool> started{false};
  std::thread worker;
  REQUIRE(server->rpc()
              .serve_async("long",
                           [&](rpc_request r, sluice::rpc_promise p) {
                             worker = std::thread([&saw_cancel, r = std::move(r), p = std::move(p)]() mutable {
                               auto give_up = std::chrono::steady_clock::now() + 10s;
                               while (!r.cancelled() && std::chrono::steady_clock::now() < give_up) {
                                 std::this_thread::sleep_for(1ms);
                               }
                               saw_cancel = r.cancelled() && std::chrono::steady_clock::now() < r.deadline();
                               p.reply(dict_builder{});
                             });
                             started = true;
                           })
              .ok());
  auto f = caller->rpc().call_async(rpc_target::any(), "long", dict_builder{}, {.timeout = 30s});
  eventually([&] { return started.load(); });
  f.cancel();
  REQUIRE(f.wait_for(1s));
  CHECK(f.get().code() == errc::cancelled);
  worker.join();
  CHECK(saw_cancel.load());
}
