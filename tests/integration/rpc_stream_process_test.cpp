// Streams across processes: a serving process killed mid-stream, a caller
// process killed mid-stream, and a stream between clients of two owners.

#include <doctest/doctest.h>

#include <signal.h>

#include <future>
#include <thread>

#include "sluice/rpc.hpp"
#include "tests/support/nodes.hpp"
#include "tests/support/rpc.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;
using sluice::dict_builder;
using sluice::errc;
using sluice::rpc_target;

const std::string rpc_child_bin = SLUICE_RPC_CHILD;

std::unique_ptr<process> start_child(const std::string& owner, const std::string& name, const std::string& mode,
                                     const std::string& ready) {
  auto p = std::make_unique<process>(rpc_child_bin, std::vector<std::string>{owner, name, mode},
                                     temp_path("rpc_stream_child.log"));
  auto line = p->read_line(10s);
  REQUIRE_MESSAGE(line.has_value(), "the child process printed nothing");
  REQUIRE_MESSAGE(line->starts_with(ready), *line);
  return p;
}

dict_builder count_args(std::int64_t n) {
  dict_builder d;
  REQUIRE(d.add_int64("n", n).ok());
  return d;
}

}  // namespace

TEST_CASE("rpc: a serving process SIGKILLed mid-stream fails the stream with unavailable, not at its deadline") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto server = start_child(node.address, "tokens", "count", "ready ");
  auto caller = shm_client(node.address);
  auto started = std::chrono::steady_clock::now();
  auto stream = caller->rpc().call_stream(rpc_target::any(), "tokens", count_args(0), {.timeout = 60s, .window = 4});
  for (std::int64_t i = 0; i < 10; ++i) {
    auto item = stream.next();
    REQUIRE_MESSAGE(item.ok(), (item ? "" : item.error().to_string()));
    REQUIRE(item->has_value());
    CHECK((*item)->dict().find("seq")->as_int64().value() == i);
  }
  server->signal(SIGKILL);
  server->wait(5s);
  // Items already on their way may still come, in order; then the loss.
  auto last = stream.next();
  while (last && last->has_value()) last = stream.next();
  CHECK(last.code() == errc::unavailable);
  CHECK(std::chrono::steady_clock::now() - started < 20s);
}

TEST_CASE("rpc: a caller process SIGKILLed mid-stream releases the handler's writer") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto server_client = shm_client(node.address, "server");
  std::promise<sluice::error> stopped;
  auto stopped_future = stopped.get_future();
  std::thread writer;
  REQUIRE(server_client->rpc()
              .serve_stream("endless",
                            [&](sluice::rpc_request, sluice::rpc_stream_writer w) {
                              writer = std::thread([w = std::move(w), &stopped]() mutable {
                                for (std::int64_t i = 0;; ++i) {
                                  dict_builder item;
                                  REQUIRE(item.add_int64("seq", i).ok());
                                  if (auto ok = w.write(item); !ok) return stopped.set_value(ok.error());
                                }
                              });
                            })
              .ok());
  auto reader = start_child(node.address, "endless", "reader", "read");
  reader->signal(SIGKILL);
  reader->wait(5s);
  // Its owner saw its links close and cancelled its calls: the writer,
  // which was waiting for credit, hears of it long before the minute.
  REQUIRE(stopped_future.wait_for(15s) == std::future_status::ready);
  auto code = stopped_future.get().code();
  CHECK((code == errc::cancelled || code == errc::unavailable));
  writer.join();
}

TEST_CASE("rpc: a stream between clients of two owners passes through both, in order") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto server = start_child(owner_b.address, "tokens", "count", "ready ");
  auto caller = shm_client(owner_a.address);
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (caller->rpc().instances("tokens").value().empty()) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(20ms);
  }
  while (true) {
    auto stream = caller->rpc().call_stream(rpc_target::any(), "tokens", count_args(300), {.timeout = 20s, .window = 8});
    auto first = stream.next();
    if (!first) {
      // The instance may need a moment to reach our owner's routing.
      REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, first.error().to_string());
      std::this_thread::sleep_for(50ms);
      continue;
    }
    REQUIRE(first->has_value());
    CHECK((*first)->dict().find("seq")->as_int64().value() == 0);
    for (std::int64_t i = 1; i < 300; ++i) {
      auto item = stream.next();
      REQUIRE_MESSAGE(item.ok(), (item ? "" : item.error().to_string()));
      REQUIRE(item->has_value());
      CHECK((*item)->dict().find("seq")->as_int64().value() == i);
    }
    auto end = stream.next();
    REQUIRE(end.ok());
    CHECK_FALSE(end->has_value());
    break;
  }
}
