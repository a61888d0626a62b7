// Streams of results through the public API, clients and owner in one
// process: items in order, credit and a slow consumer, cancel, a handler
// that fails, the deadline, a caller that goes away.

#include <doctest/doctest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sluice/node.hpp"
#include "sluice/rpc.hpp"
#include "tests/support/rpc.hpp"

using namespace std::chrono_literals;
using namespace sluice;
using namespace sluice::test;

namespace {

/// Threads the handlers write from; joined when the test ends.
struct writers {
  std::mutex mutex;
  std::vector<std::thread> threads;
  void add(std::thread t) {
    std::lock_guard guard{mutex};
    threads.push_back(std::move(t));
  }
  ~writers() {
    for (auto& t : threads) t.join();
  }
};

dict_builder item_of(std::int64_t seq) {
  dict_builder d;
  REQUIRE(d.add_int64("seq", seq).ok());
  REQUIRE(d.add_string("text", "item " + std::to_string(seq)).ok());
  return d;
}

std::int64_t seq_of(const rpc_result& r) { return r.dict().find("seq")->as_int64().value(); }

/// A stream handler that writes items 0, 1, 2, ... from a thread of its
/// own until a write fails: `written` counts the items written, `stopped`
/// gets the failure.
struct endless_server {
  std::atomic<std::int64_t> written{0};
  std::promise<error> stopped;
  std::future<error> stopped_future = stopped.get_future();
  /// Also check that the writer says it was cancelled when a write fails.
  bool expect_cancelled = false;
  writers threads;  // last: joined before the rest goes

  rpc_stream_handler handler() {
    return [this](rpc_request, rpc_stream_writer w) {
      threads.add(std::thread([this, w = std::move(w)]() mutable {
        for (std::int64_t i = 0;; ++i) {
          auto ok = w.write(item_of(i));
          if (!ok) {
            if (expect_cancelled) CHECK(w.cancelled());
            return stopped.set_value(ok.error());
          }
          written = i + 1;
        }
      }));
    };
  }
};

}  // namespace

TEST_CASE("rpc: a stream delivers its items in order with their content, a large one through the pool, then its end") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  const std::string big(256 * 1024, 'z');
  writers threads;
  REQUIRE(server->rpc()
              .serve_stream("count",
                            [&](rpc_request req, rpc_stream_writer w) {
                              auto n = req.args().find("n")->as_int64().value();
                              threads.add(std::thread([w = std::move(w), n, &big]() mutable {
                                for (std::int64_t i = 0; i < n; ++i) {
                                  auto item = item_of(i);
                                  if (i == n / 2) REQUIRE(item.add_string("big", big).ok());
                                  REQUIRE(w.write(item).ok());
                                }
                                w.finish();
                              }));
                            })
              .ok());
  dict_builder args;
  REQUIRE(args.add_int64("n", 200).ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "count", args, {.timeout = 20s});
  for (std::int64_t i = 0; i < 200; ++i) {
    auto item = stream.next();
    REQUIRE_MESSAGE(item.ok(), (item ? "" : item.error().to_string()));
    REQUIRE(item->has_value());
    CHECK(seq_of(**item) == i);
    CHECK(string_field((*item)->dict()) == "item " + std::to_string(i));
    if (i == 100) {
      CHECK(string_field((*item)->dict(), "big") == big);
      CHECK((*item)->location().has_value());
    }
  }
  auto end = stream.next();
  REQUIRE(end.ok());
  CHECK_FALSE(end->has_value());
  CHECK_FALSE(stream.next()->has_value());  // the end again
}

TEST_CASE("rpc: a slow consumer makes the writer wait for credit, never more than the window ahead, nothing lost") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  std::atomic<std::int64_t> written{0};
  std::atomic<bool> try_write_refused{false};
  writers threads;
  REQUIRE(server->rpc()
              .serve_stream("slow",
                            [&](rpc_request, rpc_stream_writer w) {
                              threads.add(std::thread([w = std::move(w), &written, &try_write_refused]() mutable {
                                for (std::int64_t i = 0; i < 40; ++i) {
                                  if (i == 4 && w.credit() == 0) {
                                    try_write_refused = w.try_write(item_of(i)).code() == errc::overloaded;
                                  }
                                  REQUIRE(w.write(item_of(i)).ok());
                                  written = i + 1;
                                }
                                w.finish();
                              }));
                            })
              .ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "slow", dict_builder{}, {.timeout = 20s, .window = 4});
  // Nothing consumed: the writer stops at the window and waits there.
  eventually([&] { return written.load() == 4; });
  std::this_thread::sleep_for(200ms);
  CHECK(written.load() == 4);
  for (std::int64_t i = 0; i < 40; ++i) {
    auto item = stream.next();
    REQUIRE(item.ok());
    REQUIRE(item->has_value());
    CHECK(seq_of(**item) == i);
    // Each item consumed grants one more: never more than the window ahead.
    CHECK(written.load() <= i + 1 + 4);
    if (i % 8 == 0) std::this_thread::sleep_for(20ms);
  }
  CHECK_FALSE(stream.next()->has_value());
  CHECK(try_write_refused.load());
}

TEST_CASE("rpc: a handler may write within its credit on the serving thread, and finish there") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  REQUIRE(server->rpc()
              .serve_stream("inline",
                            [](rpc_request, rpc_stream_writer w) {
                              for (std::int64_t i = 0; i < 3; ++i) REQUIRE(w.write(item_of(i)).ok());
                              // Past the credit, this thread must not wait: it would take the credit.
                              CHECK(w.credit() == 0);
                              CHECK(w.write(item_of(3)).code() == errc::overloaded);
                              w.finish();
                            })
              .ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "inline", dict_builder{}, {.window = 3});
  for (std::int64_t i = 0; i < 3; ++i) CHECK(seq_of(*stream.next().value()) == i);
  CHECK_FALSE(stream.next()->has_value());
}

TEST_CASE("rpc: a stream opened in the callback of an asynchronous call opens at once, and is read on another thread") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  REQUIRE(server->rpc().serve("ping", [](const rpc_request&) -> result<dict_builder> { return dict_builder{}; }).ok());
  REQUIRE(server->rpc()
              .serve_stream("three",
                            [](rpc_request, rpc_stream_writer w) {
                              for (std::int64_t i = 0; i < 3; ++i) (void)w.try_write(item_of(i));
                              w.finish();
                            })
              .ok());
  // The callback runs on the thread that reads the answers of the
  // caller's asynchronous calls, the opening call's included.
  std::promise<rpc_stream> opened;
  std::atomic<bool> ping_ok{false};
  auto started = std::chrono::steady_clock::now();
  caller->rpc().call_async(rpc_target::any(), "ping", dict_builder{}, [&](result<rpc_result> r) {
    ping_ok = r.ok();
    opened.set_value(caller->rpc().call_stream(rpc_target::any(), "three", dict_builder{}, {.timeout = 5s, .window = 4}));
  });
  auto f = opened.get_future();
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  CHECK(std::chrono::steady_clock::now() - started < 4s);  // not held until the stream's deadline
  CHECK(ping_ok.load());
  auto stream = f.get();
  for (std::int64_t i = 0; i < 3; ++i) CHECK(seq_of(*stream.next().value()) == i);
  CHECK_FALSE(stream.next()->has_value());
}

TEST_CASE("rpc: cancelling a stream mid-way reaches the handler, whose write then fails cancelled") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  endless_server endless;
  endless.expect_cancelled = true;
  REQUIRE(server->rpc().serve_stream("endless", endless.handler()).ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "endless", dict_builder{}, {.timeout = 30s, .window = 2});
  for (std::int64_t i = 0; i < 5; ++i) CHECK(seq_of(*stream.next().value()) == i);
  stream.cancel();
  CHECK(stream.next().code() == errc::cancelled);
  REQUIRE(endless.stopped_future.wait_for(5s) == std::future_status::ready);
  CHECK(endless.stopped_future.get().code() == errc::cancelled);
}

TEST_CASE("rpc: a handler failing mid-stream gives its typed error after the items it wrote") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  writers threads;
  REQUIRE(server->rpc()
              .serve_stream("flaky",
                            [&](rpc_request, rpc_stream_writer w) {
                              threads.add(std::thread([w = std::move(w)]() mutable {
                                for (std::int64_t i = 0; i < 5; ++i) REQUIRE(w.write(item_of(i)).ok());
                                w.fail(error{errc::permission_denied, "no more for you"});
                              }));
                            })
              .ok());
  REQUIRE(server->rpc().serve_stream("dropped", [](rpc_request, rpc_stream_writer) {}).ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "flaky", dict_builder{}, {.window = 2});
  for (std::int64_t i = 0; i < 5; ++i) CHECK(seq_of(*stream.next().value()) == i);
  auto failed = stream.next();
  CHECK(failed.code() == errc::permission_denied);
  CHECK(failed.error().message().find("'flaky': no more for you") != std::string::npos);
  CHECK(stream.next().code() == errc::permission_denied);  // it stays ended
  // A writer dropped unfinished fails the stream with handler_failed.
  auto dropped = caller->rpc().call_stream(rpc_target::any(), "dropped", dict_builder{});
  CHECK(dropped.next().code() == errc::handler_failed);
}

TEST_CASE("rpc: a stream's deadline ends it with timeout at both ends") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  std::promise<error> stopped;
  auto stopped_future = stopped.get_future();
  std::atomic<bool> first{true};
  writers threads;
  REQUIRE(server->rpc()
              .serve_stream("late",
                            [&](rpc_request req, rpc_stream_writer w) {
                              threads.add(std::thread([w = std::move(w), &stopped, &first,
                                                       deadline = req.deadline()]() mutable {
                                REQUIRE(w.write(item_of(0)).ok());
                                // Without credit for a second item this waits until the deadline.
                                auto r = w.write(item_of(1));
                                if (r) {
                                  std::this_thread::sleep_until(deadline + 100ms);
                                  r = w.write(item_of(2));
                                }
                                if (first.exchange(false)) stopped.set_value(r ? error{errc::internal, "wrote"} : r.error());
                              }));
                            })
              .ok());
  auto started = std::chrono::steady_clock::now();
  auto stream = caller->rpc().call_stream(rpc_target::any(), "late", dict_builder{}, {.timeout = 400ms, .window = 1});
  REQUIRE(stopped_future.wait_for(5s) == std::future_status::ready);
  CHECK(stopped_future.get().code() == errc::timeout);
  CHECK(std::chrono::steady_clock::now() - started >= 350ms);
  // The item came, but the deadline passed: the stream is over. (The two
  // ends' clocks see the deadline a few ms apart: wait past both.)
  std::this_thread::sleep_until(started + 500ms);
  CHECK(stream.next().code() == errc::timeout);
  // A wait of next()'s own that ends first leaves the stream going.
  auto again = caller->rpc().call_stream(rpc_target::any(), "late", dict_builder{}, {.timeout = 1s, .window = 1});
  CHECK(seq_of(*again.next().value()) == 0);
  CHECK(seq_of(*again.next().value()) == 1);  // its credit came with the first read
  CHECK(again.next(50ms).code() == errc::timeout);
  CHECK(again.next().code() == errc::timeout);  // then its deadline
}

TEST_CASE("rpc: a plain call to a stream, or a stream of a plain handler, fails clearly") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  REQUIRE(server->rpc().serve_stream("tokens", [](rpc_request, rpc_stream_writer w) { w.finish(); }).ok());
  REQUIRE(server->rpc().serve("echo", echo).ok());
  auto plain = caller->rpc().call(rpc_target::any(), "tokens", dict_builder{});
  CHECK(plain.code() == errc::invalid_argument);
  CHECK(plain.error().message().find("serves a stream") != std::string::npos);
  auto odd = caller->rpc().call_stream(rpc_target::any(), "echo", text_args("x"));
  CHECK(odd.next().code() == errc::invalid_argument);
  CHECK(caller->rpc().call_stream(rpc_target::any(), "nobody", dict_builder{}).next().code() == errc::not_found);
  CHECK(caller->rpc().call_stream(rpc_target::any(), "tokens", dict_builder{}, {.window = 0}).next().code() ==
        errc::invalid_argument);
  auto empty = caller->rpc().call_stream(rpc_target::any(), "tokens", dict_builder{});
  CHECK_FALSE(empty.next().value().has_value());
}

TEST_CASE("rpc: a client over TCP reads a stream and serves one, a cancel reaching its handler") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  endless_server endless;
  writers threads;
  REQUIRE(server->rpc()
              .serve_stream("count",
                            [&](rpc_request, rpc_stream_writer w) {
                              threads.add(std::thread([w = std::move(w)]() mutable {
                                for (std::int64_t i = 0; i < 30; ++i) REQUIRE(w.write(item_of(i)).ok());
                                w.finish();
                              }));
                            })
              .ok());
  sluice::client_options tcp;
  tcp.transport = sluice::client_transport::tcp;
  auto remote = sluice::client::connect(cluster->client_address(), tcp).value();
  auto stream = remote->rpc().call_stream(rpc_target::any(), "count", dict_builder{}, {.timeout = 20s, .window = 3});
  for (std::int64_t i = 0; i < 30; ++i) {
    auto item = stream.next();
    REQUIRE_MESSAGE(item.ok(), (item ? "" : item.error().to_string()));
    CHECK(seq_of(**item) == i);
  }
  CHECK_FALSE(stream.next()->has_value());

  REQUIRE(remote->rpc().serve_stream("tcp/endless", endless.handler()).ok());
  auto back = server->rpc().call_stream(rpc_target::of(remote->rpc().id()), "tcp/endless", dict_builder{},
                                        {.timeout = 30s, .window = 2});
  for (std::int64_t i = 0; i < 5; ++i) CHECK(seq_of(*back.next().value()) == i);
  back.cancel();
  REQUIRE(endless.stopped_future.wait_for(5s) == std::future_status::ready);
  CHECK(endless.stopped_future.get().code() == errc::cancelled);
}

TEST_CASE("rpc: a caller that pulls out of turn cannot make a handler hold more items than its window") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  endless_server held;
  auto& written = held.written;
  REQUIRE(server->rpc().serve_stream("held", held.handler()).ok());
  // The stream's own calls (docs/wire-format.md, 6.2), made by hand.
  dict_builder open;
  REQUIRE(open.add_int64("sluice.window", 2).ok());
  auto opened = caller->rpc().call(rpc_target::any(), "held", open, {.timeout = 20s});
  REQUIRE(opened.ok());
  auto id = opened->dict().find("sluice.stream")->as_int64().value();
  auto to = rpc_target::of(string_field(opened->dict(), "sluice.server"));
  auto control = [&](std::string_view op, std::int64_t seq) {
    dict_builder d;
    REQUIRE(d.add_int64("sluice.stream", id).ok());
    REQUIRE(d.add_string("sluice.op", op).ok());
    REQUIRE(d.add_int64("sluice.seq", seq).ok());
    return caller->rpc().call_async(to, "held", d, {.timeout = 20s});
  };
  // Pulls far ahead grant credit up to item 11, but items 0 to 9 are
  // never pulled: the handler holds two of them and waits.
  auto far = control("pull", 10);
  auto farther = control("pull", 11);
  eventually([&] { return written.load() == 2; });
  std::this_thread::sleep_for(200ms);
  CHECK(written.load() == 2);
  auto cancelled = control("cancel", 0);
  REQUIRE(cancelled.wait_for(5s));
  CHECK(cancelled.get().ok());
  REQUIRE(held.stopped_future.wait_for(5s) == std::future_status::ready);
  CHECK(held.stopped_future.get().code() == errc::cancelled);
  CHECK(far.get().code() == errc::cancelled);
  CHECK(farther.get().code() == errc::cancelled);
}

TEST_CASE("rpc: a stream its caller abandons without a word ends at its deadline and frees its place") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  // Two items written within the window's credit and the end, all at once
  // on the serving thread; one stream at a time.
  REQUIRE(server->rpc()
              .serve_stream(
                  "once",
                  [](rpc_request, rpc_stream_writer w) {
                    REQUIRE(w.try_write(item_of(0)).ok());
                    REQUIRE(w.try_write(item_of(1)).ok());
                    w.finish();
                  },
                  {.max_concurrent = 1})
              .ok());
  // Opened by hand (docs/wire-format.md, 6.2), then never pulled nor
  // cancelled: a caller that went away.
  dict_builder open;
  REQUIRE(open.add_int64("sluice.window", 2).ok());
  auto started = std::chrono::steady_clock::now();
  REQUIRE(caller->rpc().call(rpc_target::any(), "once", open, {.timeout = 300ms}).ok());
  // It holds the name's one place...
  auto refused = caller->rpc().call_stream(rpc_target::any(), "once", dict_builder{}, {.timeout = 5s});
  CHECK(refused.next().code() == errc::overloaded);
  // ...until its deadline, when the server ends it without being told.
  std::this_thread::sleep_until(started + 300ms);
  eventually([&] {
    auto again = caller->rpc().call_stream(rpc_target::any(), "once", dict_builder{}, {.timeout = 5s});
    auto first = again.next();
    if (!first) return false;
    CHECK(seq_of(**first) == 0);
    CHECK(seq_of(*again.next().value()) == 1);
    CHECK_FALSE(again.next()->has_value());
    return true;
  });
}

TEST_CASE("rpc: a serving client that closes mid-stream fails its waiting writer and its caller's stream with unavailable") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  auto caller = shm_client(*cluster, "caller");
  endless_server endless;
  auto& written = endless.written;
  REQUIRE(server->rpc().serve_stream("endless", endless.handler()).ok());
  auto stream = caller->rpc().call_stream(rpc_target::any(), "endless", dict_builder{}, {.timeout = 60s, .window = 2});
  for (std::int64_t i = 0; i < 2; ++i) CHECK(seq_of(*stream.next().value()) == i);
  // Two read, two more written ahead: the writer now waits for credit.
  eventually([&] { return written.load() == 4; });
  std::this_thread::sleep_for(50ms);
  server.reset();
  REQUIRE(endless.stopped_future.wait_for(5s) == std::future_status::ready);
  CHECK(endless.stopped_future.get().code() == errc::unavailable);
  auto last = stream.next();
  while (last && last->has_value()) last = stream.next();
  CHECK(last.code() == errc::unavailable);
}

TEST_CASE("rpc: the registry says which names serve a stream") {
  auto cluster = start_cluster();
  auto server = shm_client(*cluster, "server");
  REQUIRE(server->rpc().serve_stream("tokens", [](rpc_request, rpc_stream_writer w) { w.finish(); }).ok());
  REQUIRE(server->rpc().serve("echo", [](const rpc_request&) -> result<dict_builder> { return dict_builder{}; }).ok());
  std::vector<rpc_instance_info> found;
  eventually([&] {
    auto r = server->rpc().instances("", true);
    if (r) found = *r;
    return r && r->size() == 2;
  });
  REQUIRE(found.size() == 2);
  for (auto& i : found) CHECK(i.stream == (i.name == "tokens"));
}
