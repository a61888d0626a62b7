// `sluice rpc ls` and `sluice rpc call` against a running cluster with a
// serving process.

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "tests/support/nodes.hpp"
#include "tests/support/rpc.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

const std::string rpc_child_bin = SLUICE_RPC_CHILD;

/// `sluice rpc ls --json` until it lists `count` instances (the owner
/// tells the master what its clients serve asynchronously).
nlohmann::json await_listed(const std::string& address, std::size_t count) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (true) {
    auto ls = run(sluice_bin, {"rpc", "ls", "--json", "--connect", address});
    REQUIRE(ls.exit_code == 0);
    auto json = nlohmann::json::parse(ls.out);
    if (json["instances"].size() == count) return json;
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "rpc ls never listed " << count << ": " << ls.out);
    std::this_thread::sleep_for(50ms);
  }
}

}  // namespace

TEST_CASE("launcher: sluice rpc ls lists served names and sluice rpc call calls them") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto empty = await_listed(node.address, 0);
  CHECK(empty["instances"].empty());

  process server{rpc_child_bin, {node.address, "tools/echo", "echo"}, temp_path("rpc_child.log")};
  auto ready = server.read_line(10s);
  REQUIRE(ready.has_value());
  REQUIRE(ready->starts_with("ready "));
  auto id = ready->substr(6);

  auto listed = await_listed(node.address, 1);
  auto& i = listed["instances"][0];
  CHECK(i["name"] == "tools/echo");
  CHECK(i["client"] == id);
  CHECK(i["client_name"] == "rpc-child-echo");
  CHECK(i["max_concurrent"] == 64);
  CHECK(i["stream"] == false);
  auto table = run(sluice_bin, {"rpc", "ls", "tools/", "--connect", node.address});
  REQUIRE(table.exit_code == 0);
  CHECK(table.out.find("tools/echo") != std::string::npos);
  CHECK(table.out.find(id) != std::string::npos);
  CHECK(table.out.find(" call\n") != std::string::npos);

  auto call = run(sluice_bin, {"rpc", "call", "tools/echo", "--arg", "text=hello there", "--arg", "n:int=3",
                               "--connect", node.address});
  REQUIRE_MESSAGE(call.exit_code == 0, call.err);
  CHECK(nlohmann::json::parse(call.out) == nlohmann::json{{"text", "hello there"}});
  auto targeted = run(sluice_bin, {"rpc", "call", "tools/echo", "--arg", "text=to you", "--target", id,
                                   "--connect", node.address});
  REQUIRE(targeted.exit_code == 0);
  CHECK(nlohmann::json::parse(targeted.out)["text"] == "to you");

  // The handler's own error, an unknown name, a malformed argument.
  auto refused = run(sluice_bin, {"rpc", "call", "tools/echo", "--connect", node.address});
  CHECK(refused.exit_code == 1);
  CHECK(refused.err.find("invalid_argument") != std::string::npos);
  CHECK(refused.err.find("no 'text' argument") != std::string::npos);
  auto missing = run(sluice_bin, {"rpc", "call", "nobody", "--connect", node.address});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("not_found") != std::string::npos);
  CHECK(run(sluice_bin, {"rpc", "call", "tools/echo", "--arg", "n:int=three", "--connect", node.address}).exit_code == 2);
  CHECK(run(sluice_bin, {"rpc", "call", "tools/echo", "--arg", "novalue", "--connect", node.address}).exit_code == 2);
}
