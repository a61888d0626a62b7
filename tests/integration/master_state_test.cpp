// Where `sluice master` and `sluice up` keep their state: a master keeps
// it by default (in $SLUICE_DATA_DIR, else under $XDG_STATE_HOME or
// $HOME), --in-memory keeps none, `sluice up` keeps none unless told, and
// each says where on start. One master per data directory.

#include <doctest/doctest.h>

#include <csignal>
#include <filesystem>

#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// `env ENV... sluice ARGS...`: a node started with its environment
/// changed. The first line names its address; `state` gets the second.
struct env_node {
  std::unique_ptr<process> proc;
  std::string address;
  std::string state;
};

env_node start_with_env(std::vector<std::string> env, const std::vector<std::string>& args) {
  std::vector<std::string> all{"-u", "SLUICE_DATA_DIR", "-u", "XDG_STATE_HOME"};
  all.insert(all.end(), env.begin(), env.end());
  all.push_back(sluice_bin);
  all.insert(all.end(), args.begin(), args.end());
  env_node n;
  n.proc = std::make_unique<process>("/usr/bin/env", std::move(all), temp_path("node.log"));
  auto line = n.proc->read_line(10s);
  REQUIRE_MESSAGE(line.has_value(), "the node printed no address line");
  n.address = address_in(*line);
  REQUIRE_MESSAGE(!n.address.empty(), "no address in: " << *line);
  auto state = n.proc->read_line(10s);
  REQUIRE_MESSAGE(state.has_value(), "the node printed no state line");
  n.state = *state;
  return n;
}

void stop(env_node& n) {
  n.proc->signal(SIGTERM);
  REQUIRE(n.proc->wait(10s).has_value());
}

}  // namespace

TEST_CASE("master state: sluice master keeps its state in the default directory and recovers it on restart") {
  auto home = temp_path("state-home");
  auto dir = home + "/sluice/master";
  auto master = start_with_env({"XDG_STATE_HOME=" + home}, {"master", "--listen", "127.0.0.1:0"});
  CHECK(master.state == "sluice master: state: " + dir + " (kept across restarts)");
  CHECK(std::filesystem::exists(dir + "/master.db"));
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto c = connect(owner.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  auto version = c->put("kept", "across restarts");
  REQUIRE_MESSAGE(version.ok(), (version ? "" : version.error().to_string()));

  stop(master);
  master = start_with_env({"XDG_STATE_HOME=" + home}, {"master", "--listen", master.address});
  CHECK(master.state == "sluice master: state: " + dir + " (kept across restarts)");
  // The owner registers again; the master recovered the key's version
  // from its directory, so the bytes the owner kept are readable.
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1 && s.object_count == 1; });
  auto got = c->get("kept");
  REQUIRE_MESSAGE(got.ok(), (got ? "" : got.error().to_string()));
  CHECK(got->version() == *version);
  CHECK(got->str() == "across restarts");
  stop(master);
  std::filesystem::remove_all(home);
}

TEST_CASE("master state: $SLUICE_DATA_DIR comes before $XDG_STATE_HOME and $HOME") {
  auto dir = temp_path("sluice-data");
  auto home = temp_path("home");
  auto master = start_with_env({"SLUICE_DATA_DIR=" + dir, "XDG_STATE_HOME=" + home + "/state", "HOME=" + home},
                               {"master", "--listen", "127.0.0.1:0"});
  CHECK(master.state == "sluice master: state: " + dir + " (kept across restarts)");
  CHECK(std::filesystem::exists(dir + "/master.db"));
  CHECK_FALSE(std::filesystem::exists(home));
  stop(master);
  // Without either variable, $HOME decides.
  master = start_with_env({"HOME=" + home}, {"master", "--listen", "127.0.0.1:0"});
  CHECK(master.state == "sluice master: state: " + home + "/.local/state/sluice/master (kept across restarts)");
  stop(master);
  std::filesystem::remove_all(dir);
  std::filesystem::remove_all(home);
}

TEST_CASE("master state: with --in-memory the master keeps nothing and says so") {
  auto home = temp_path("state-home");
  auto master = start_with_env({"XDG_STATE_HOME=" + home, "HOME=" + home},
                               {"master", "--listen", "127.0.0.1:0", "--in-memory"});
  CHECK(master.state == "sluice master: state: in memory (none kept; --data-dir DIR keeps it)");
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto c = connect(owner.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  REQUIRE(c->put("gone", "after a restart").ok());
  CHECK_FALSE(std::filesystem::exists(home));
  stop(master);
  master = start_with_env({"XDG_STATE_HOME=" + home}, {"master", "--listen", master.address, "--in-memory"});
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  CHECK(c->get("gone").code() == sluice::errc::not_found);
  CHECK_FALSE(std::filesystem::exists(home));
  stop(master);
}

TEST_CASE("master state: --in-memory with --data-dir is refused with exit code 2") {
  auto dir = temp_path("never");
  auto r = run(sluice_bin, {"master", "--listen", "127.0.0.1:0", "--in-memory", "--data-dir", dir});
  CHECK(r.exit_code == 2);
  CHECK(contains(r.err, "--in-memory"));
  CHECK(contains(r.err, "--data-dir"));
  CHECK_FALSE(std::filesystem::exists(dir));
}

TEST_CASE("master state: a second master on the same data directory is refused") {
  auto dir = temp_path("shared-data");
  auto first = start_node({"master", "--listen", "127.0.0.1:0", "--data-dir", dir});
  auto second = run(sluice_bin, {"master", "--listen", "127.0.0.1:0", "--data-dir", dir});
  CHECK(second.exit_code == 1);
  CHECK(contains(second.err, "unavailable"));
  CHECK(contains(second.err, "in use by another master (process " + std::to_string(first.proc->pid()) + ")"));
  // Once the first has stopped, the directory is free again.
  first.proc->signal(SIGTERM);
  REQUIRE(first.proc->wait(10s).has_value());
  auto again = start_node({"master", "--listen", "127.0.0.1:0", "--data-dir", dir});
  again.proc->signal(SIGTERM);
  REQUIRE(again.proc->wait(10s).has_value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("master state: sluice up keeps its state in memory unless given --data-dir, and says which") {
  auto home = temp_path("state-home");
  auto up = start_with_env({"XDG_STATE_HOME=" + home, "HOME=" + home},
                           {"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0"});
  // The second line names the master's address; the state line is next.
  CHECK(contains(up.state, "master listening on"));
  auto state = up.proc->read_line(10s);
  REQUIRE(state.has_value());
  CHECK(*state == "state: in memory (none kept; --data-dir DIR keeps it)");
  stop(up);
  CHECK_FALSE(std::filesystem::exists(home));

  auto dir = temp_path("up-data");
  auto kept = start_with_env({}, {"up", "--listen", "127.0.0.1:0", "--master-listen", "127.0.0.1:0", "--data-dir", dir});
  state = kept.proc->read_line(10s);
  REQUIRE(state.has_value());
  CHECK(*state == "state: " + dir + " (kept across restarts)");
  CHECK(std::filesystem::exists(dir + "/master.db"));
  stop(kept);
  std::filesystem::remove_all(dir);
}
