// RPC across processes: handlers in processes of their own (started,
// killed) behind real `sluice` nodes on loopback, one owner or two.

#include <doctest/doctest.h>

#include <signal.h>

#include <map>
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

/// A serving child process and its client id.
struct server_proc {
  std::unique_ptr<process> proc;
  std::string id;
};

server_proc start_server(const std::string& owner, const std::string& name, const std::string& mode) {
  server_proc s;
  s.proc = std::make_unique<process>(rpc_child_bin, std::vector<std::string>{owner, name, mode}, temp_path("rpc_child.log"));
  auto line = s.proc->read_line(10s);
  REQUIRE_MESSAGE(line.has_value(), "the serving process printed nothing");
  REQUIRE_MESSAGE(line->starts_with("ready "), *line);
  s.id = line->substr(6);
  return s;
}

std::string field(const sluice::rpc_result& r, std::string_view name) { return string_field(r.dict(), name); }

/// Calls until one succeeds (the instance may need a moment to reach the
/// routing of another owner) or 10 s pass.
sluice::rpc_result call_until_ok(sluice::client& c, const rpc_target& t, std::string_view method,
                                 const dict_builder& args) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (true) {
    auto r = c.rpc().call(t, method, args);
    if (r) return std::move(*r);
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < give_up, "the call kept failing: " << r.error().to_string());
    std::this_thread::sleep_for(20ms);
  }
}

}  // namespace

TEST_CASE("rpc: a handler process SIGKILLed mid-call fails the call with unavailable, not at its deadline") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto server = start_server(node.address, "stuck", "hang");
  bool over_tcp = false;
  SUBCASE("a caller on shared memory") {}
  SUBCASE("a caller over TCP, its call relayed on the owner's tcp thread") { over_tcp = true; }
  auto caller = over_tcp ? tcp_client(node.address) : shm_client(node.address);
  auto pending = caller->rpc().call_async(rpc_target::any(), "stuck", dict_builder{}, {.timeout = 60s});
  REQUIRE(server.proc->read_line(10s) == std::optional<std::string>{"took"});
  server.proc->signal(SIGKILL);
  server.proc->wait(5s);
  // The owner saw the handler's link close and answered at once; a
  // timeout would take the whole minute.
  REQUIRE(pending.wait_for(20s));
  auto r = pending.get();
  CHECK(r.code() == errc::unavailable);
  // The name has no instance any more.
  CHECK(caller->rpc().call(rpc_target::any(), "stuck", dict_builder{}).code() == errc::not_found);
}

TEST_CASE("rpc: calls to any instance alternate between serving processes, and a killed one drops out") {
  auto node = start_node({"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  auto a = start_server(node.address, "who", "who");
  auto b = start_server(node.address, "who", "who");
  auto caller = shm_client(node.address);
  std::map<std::string, int> seen;
  for (int i = 0; i < 10; ++i) ++seen[field(call_until_ok(*caller, rpc_target::any(), "who", {}), "id")];
  CHECK(seen == std::map<std::string, int>{{a.id, 5}, {b.id, 5}});
  CHECK(field(call_until_ok(*caller, rpc_target::of(b.id), "who", {}), "id") == b.id);

  a.proc->signal(SIGKILL);
  a.proc->wait(5s);
  // Once the owner has seen it go, every call goes to the other.
  auto give_up = std::chrono::steady_clock::now() + 10s;
  int in_a_row = 0;
  while (in_a_row < 10) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    auto r = caller->rpc().call(rpc_target::any(), "who", {});
    in_a_row = r && field(*r, "id") == b.id ? in_a_row + 1 : 0;
  }
  CHECK(caller->rpc().call(rpc_target::of(a.id), "who", {}).code() == errc::not_found);
}

TEST_CASE("rpc: a call between clients of two owners passes through both, large arguments and results included") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto server = start_server(owner_b.address, "echo", "echo");
  auto caller = shm_client(owner_a.address);

  auto r = call_until_ok(*caller, rpc_target::any(), "echo", text_args("across hosts"));
  CHECK(field(r, "text") == "across hosts");
  auto named = caller->rpc().call(rpc_target::of(server.id), "echo", text_args("by name"));
  REQUIRE_MESSAGE(named.ok(), (named ? "" : named.error().to_string()));
  CHECK(field(*named, "text") == "by name");

  // 4 MiB each way: sent once between the owners, read in place by each side.
  auto big = pattern(4 << 20, 'x');
  auto large = caller->rpc().call(rpc_target::any(), "echo", text_args(big), {.timeout = 20s});
  REQUIRE_MESSAGE(large.ok(), (large ? "" : large.error().to_string()));
  CHECK(field(*large, "text") == big);
  CHECK(large->location().has_value());

  // The remote handler dies mid-call: its owner tells ours at once.
  auto hang = start_server(owner_b.address, "stuck", "hang");
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (caller->rpc().instances("stuck").value().empty()) {
    REQUIRE(std::chrono::steady_clock::now() < give_up);
    std::this_thread::sleep_for(20ms);
  }
  auto pending = caller->rpc().call_async(rpc_target::of(hang.id), "stuck", dict_builder{}, {.timeout = 60s});
  REQUIRE(hang.proc->read_line(10s) == std::optional<std::string>{"took"});
  hang.proc->signal(SIGKILL);
  hang.proc->wait(5s);
  REQUIRE(pending.wait_for(20s));
  CHECK(pending.get().code() == errc::unavailable);
}

TEST_CASE("rpc: a serving process serves again through a new owner after its owner is killed") {
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto address = owner.address;
  auto server = start_server(address, "who", "who");
  auto caller = shm_client(address);
  CHECK(field(call_until_ok(*caller, rpc_target::any(), "who", {}), "id") == server.id);

  owner.proc->signal(SIGKILL);
  owner.proc->wait(5s);
  // The host's owner comes back at the same address, empty.
  auto successor = start_node({"owner", "--master", master.address, "--listen", address});
  // The serving process finds it and serves its name again; calls reach it.
  CHECK(field(call_until_ok(*caller, rpc_target::any(), "who", {}), "id") == server.id);
  auto listed = caller->rpc().instances("who");
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().client_id == server.id);
}
