// RPC through the public API, clients and owner in one process: serving,
// calling, errors, deadlines, cancellation, limits, routing, and large
// arguments read in place in the owner's pool.

#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/rpc.hpp"

namespace {

using namespace std::chrono_literals;
using sluice::test::text_args;
using sluice::dict_builder;
using sluice::errc;
using sluice::rpc_request;
using sluice::rpc_target;

std::unique_ptr<sluice::local_cluster> start_cluster() {
  auto c = sluice::local_cluster::start();
  REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
  return std::move(*c);
}

std::unique_ptr<sluice::client> connect(const sluice::local_cluster& cluster, const std::string& name = "client") {
  return sluice::test::shm_client(cluster.client_address(), name);
}

std::string text_of(const sluice::dict_view& d, std::string_view field = "text") {
  return sluice::test::string_field(d, field);
}

/// Echoes the "text" field back.
sluice::result<dict_builder> echo(const rpc_request& r) {
  auto* f = r.args().find("text");
  if (f == nullptr) return sluice::fail(errc::invalid_argument, "no 'text' argument");
  auto text = f->as_string();
  if (!text) return text.error();
  dict_builder out;
  if (auto ok = out.add_string("text", *text); !ok) return ok.error();
  return out;
}

/// Answers with the serving client's id.
sluice::rpc_handler who(std::string id) {
  return [id](const rpc_request&) -> sluice::result<dict_builder> {
    dict_builder out;
    REQUIRE(out.add_string("id", id).ok());
    return out;
  };
}

/// Calls until `pred` holds for a result or 5 s pass (a new instance
/// reaches the routing of other owners within their lookup interval).
template <class Pred>
void eventually(Pred pred) {
  auto give_up = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "the condition never held");
    std::this_thread::sleep_for(10ms);
  }
}

}  // namespace

TEST_CASE("rpc: a served handler echoes what another client sends it, and sees who called") {
  auto cluster = start_cluster();
  auto server = connect(*cluster, "server");
  auto caller = connect(*cluster, "caller");
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
  CHECK(text_of(r->dict()) == "hello");
  CHECK(seen_caller == caller->rpc().id());
  CHECK_FALSE(r->location().has_value());  // small: it came with the answer
  // Many calls, one after another, all answered in order.
  for (int i = 0; i < 200; ++i) {
    auto text = "call " + std::to_string(i);
    auto again = caller->rpc().call(rpc_target::of(server->rpc().id()), "echo", text_args(text));
    REQUIRE(again.ok());
    CHECK(text_of(again->dict()) == text);
  }
}

TEST_CASE("rpc: a client over TCP calls a handler and serves one, through its node's own link") {
  auto cluster = start_cluster();
  auto server = connect(*cluster, "server");
  REQUIRE(server->rpc().serve("echo", echo).ok());
  sluice::client_options tcp;
  tcp.transport = sluice::client_transport::tcp;
  auto remote = sluice::client::connect(cluster->client_address(), tcp).value();
  auto r = remote->rpc().call(rpc_target::any(), "echo", text_args("over tcp"));
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(text_of(r->dict()) == "over tcp");

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
  CHECK(text_of(back->dict()) == "to tcp");
  CHECK(seen_caller == server->rpc().id());
  // Large arguments reach it too (copied over TCP, not through the pool).
  auto big = std::string(1 << 20, 'b');
  auto large = server->rpc().call(rpc_target::any(), "tcp/echo", text_args(big));
  REQUIRE(large.ok());
  CHECK(text_of(large->dict()) == big);
  REQUIRE(remote->rpc().unserve("tcp/echo").ok());
  CHECK(server->rpc().call(rpc_target::any(), "tcp/echo", text_args("x")).code() == errc::not_found);
}

TEST_CASE("rpc: a handler's error reaches the caller with its code and message, an exception as handler_failed") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
  REQUIRE(server->rpc().serve("echo", echo).ok());
  REQUIRE(caller->rpc().call(rpc_target::any(), "echo", text_args("a")).ok());
  REQUIRE(server->rpc().unserve("echo").ok());
  CHECK(caller->rpc().call(rpc_target::any(), "echo", text_args("a")).code() == errc::not_found);
}

TEST_CASE("rpc: the deadline reaches the handler, and a call past it fails with timeout") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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
    CHECK(text_of(r->dict()) == std::to_string(i));
  }
  std::lock_guard guard{mutex};
  for (auto& w : workers) w.join();
}

TEST_CASE("rpc: a promise dropped unanswered fails the call with handler_failed") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
  REQUIRE(server->rpc().serve_async("forgetful", [](rpc_request, sluice::rpc_promise) {}).ok());
  auto r = caller->rpc().call(rpc_target::any(), "forgetful", dict_builder{});
  CHECK(r.code() == errc::handler_failed);
}

TEST_CASE("rpc: beyond max_concurrent calls in progress, a handler answers overloaded") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
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

TEST_CASE("rpc: calls to any instance take turns, a named target gets every call, least_outstanding avoids a busy one") {
  auto cluster = start_cluster();
  auto a = connect(*cluster, "a");
  auto b = connect(*cluster, "b");
  auto caller = connect(*cluster, "caller");
  REQUIRE(a->rpc().serve("who", who(a->rpc().id())).ok());
  REQUIRE(b->rpc().serve("who", who(b->rpc().id())).ok());
  std::map<std::string, int> seen;
  for (int i = 0; i < 20; ++i) {
    auto r = caller->rpc().call(rpc_target::any(), "who", dict_builder{});
    REQUIRE(r.ok());
    ++seen[text_of(r->dict(), "id")];
  }
  CHECK(seen.size() == 2);
  CHECK(seen[a->rpc().id()] == 10);
  CHECK(seen[b->rpc().id()] == 10);
  for (int i = 0; i < 5; ++i) {
    auto r = caller->rpc().call(rpc_target::of(b->rpc().id()), "who", dict_builder{});
    REQUIRE(r.ok());
    CHECK(text_of(r->dict(), "id") == b->rpc().id());
  }
  // One instance holds its calls: least_outstanding sends the rest to the other.
  auto busy = connect(*cluster, "busy");
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
    CHECK(text_of(r->dict(), "id") == a->rpc().id());
  }
  std::lock_guard guard{mutex};
  for (auto& p : held) p.reply(dict_builder{});
  held.clear();
}

TEST_CASE("rpc: the registry lists each name's instances with their clients and owner") {
  auto cluster = start_cluster();
  auto a = connect(*cluster, "alpha");
  auto b = connect(*cluster, "beta");
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

TEST_CASE("rpc: a 64 MiB tensor argument is read by the handler in place, where the caller wrote it in the pool") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
  constexpr std::size_t count = 16u << 20;  // float32: 64 MiB
  std::vector<float> data(count);
  for (std::size_t i = 0; i < count; ++i) data[i] = static_cast<float>(i % 1000);
  std::optional<sluice::pool_location> seen_at;
  bool in_place = false;
  REQUIRE(server->rpc()
              .serve("sum",
                     [&](const rpc_request& r) -> sluice::result<dict_builder> {
                       seen_at = r.args_location();
                       auto t = r.args().find("x")->as_tensor();
                       if (!t) return t.error();
                       // The tensor's bytes lie inside the arguments' region: a view, not a copy.
                       auto region = r.args().region();
                       in_place = t->data.data() >= region.data() && t->data.data() + t->data.size() <= region.data() + region.size();
                       double sum = 0;
                       auto* f = reinterpret_cast<const float*>(t->data.data());
                       for (std::size_t i = 0; i < t->element_count(); i += 4096) sum += f[i];
                       dict_builder out;
                       REQUIRE(out.add_float64("sum", sum).ok());
                       return out;
                     })
              .ok());
  dict_builder args;
  REQUIRE(args.add_tensor("x", {sluice::dtype_float32, {static_cast<std::int64_t>(count)}},
                          std::as_bytes(std::span{data}))
              .ok());
  double expected = 0;
  for (std::size_t i = 0; i < count; i += 4096) expected += data[i];

  // Written in place: the caller encodes into pool memory; the handler reads those very bytes.
  auto room = caller->rpc().args_buffer(args.encoded_size());
  REQUIRE(room.ok());
  REQUIRE(room->location().has_value());
  auto where = *room->location();
  REQUIRE(args.encode_into(room->bytes()).ok());
  auto r = caller->rpc().call(rpc_target::any(), "sum", std::move(*room), {.timeout = 20s});
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(r->dict().find("sum")->as_float64().value() == expected);
  REQUIRE(seen_at.has_value());
  CHECK(*seen_at == where);
  CHECK(in_place);

  // From a builder: encoded once, into the pool, and read there.
  seen_at.reset();
  auto again = caller->rpc().call(rpc_target::any(), "sum", args, {.timeout = 20s});
  REQUIRE(again.ok());
  CHECK(seen_at.has_value());
}

TEST_CASE("rpc: a large result is read by the caller in place in the pool") {
  auto cluster = start_cluster();
  auto server = connect(*cluster);
  auto caller = connect(*cluster);
  std::string big(1 << 20, 'r');
  REQUIRE(server->rpc()
              .serve("big",
                     [&big](const rpc_request&) -> sluice::result<dict_builder> {
                       dict_builder out;
                       REQUIRE(out.add_bytes("data", std::as_bytes(std::span{big})).ok());
                       return out;
                     })
              .ok());
  auto r = caller->rpc().call(rpc_target::any(), "big", dict_builder{});
  REQUIRE_MESSAGE(r.ok(), (r ? "" : r.error().to_string()));
  CHECK(r->location().has_value());
  auto bytes = r->dict().find("data")->as_bytes().value();
  CHECK(std::string_view{reinterpret_cast<const char*>(bytes.data()), bytes.size()} == big);
  // Asynchronously too, on the async channel.
  auto f = caller->rpc().call_async(rpc_target::any(), "big", dict_builder{});
  auto ra = f.get();
  REQUIRE(ra.ok());
  CHECK(ra->location().has_value());
}
