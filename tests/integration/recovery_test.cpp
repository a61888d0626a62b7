// The master's durable state: a master killed with SIGKILL in the middle
// of a workload comes back from its data directory, forgets no committed
// object, and owners and clients carry on without anyone stepping in.

#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;

/// What the workload knows about a key: the value its last acknowledged
/// change left, or nothing when a change's outcome is unknown.
struct expected {
  bool known = true;
  std::optional<std::uint64_t> version;  // empty: removed (or never put)
  std::string bytes;
};

}  // namespace

TEST_CASE("recovery: a master killed mid-workload restarts from its data directory and forgets nothing") {
  auto data_dir = temp_path("master-data");
  auto master = start_node({"master", "--listen", "127.0.0.1:0", "--data-dir", data_dir});
  auto owner_a = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto owner_b = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto a = connect(owner_a.address);
  auto b = connect(owner_b.address);
  await_status(*a, [](const sluice::cluster_status& s) { return count_up(s) == 2; });

  std::mutex mu;
  std::map<std::string, expected> model;
  std::atomic<int> acked{0};
  std::atomic<int> failed{0};
  std::atomic<bool> stop{false};
  // Keys change set when the master is killed: those written before must
  // all come back from the master's storage, untouched since.
  std::atomic<int> phase{0};

  // Puts through one owner, removes through the other, over 40 keys.
  std::thread worker{[&] {
    for (int i = 0; !stop; ++i) {
      auto key = "p" + std::to_string(phase.load()) + "/k" + std::to_string(i % 40);
      auto& via = i % 2 == 0 ? *a : *b;
      if (i % 7 == 3) {
        auto r = via.remove(key);
        std::lock_guard lock{mu};
        if (r) {
          model[key] = expected{true, std::nullopt, {}};
          ++acked;
        } else {
          model[key].known = false;
          ++failed;
        }
      } else {
        auto value = pattern(100 + static_cast<std::size_t>(i % 5000), static_cast<char>('a' + i % 26));
        auto r = via.put(key, value);
        std::lock_guard lock{mu};
        if (r) {
          model[key] = expected{true, *r, value};
          ++acked;
        } else {
          model[key].known = false;
          ++failed;
        }
      }
    }
  }};

  auto wait_for = [&](auto pred, std::chrono::seconds limit) {
    auto give_up = std::chrono::steady_clock::now() + limit;
    while (!pred() && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
    return pred();
  };
  REQUIRE(wait_for([&] { return acked >= 300; }, 20s));

  phase = 1;
  master.proc->signal(SIGKILL);
  master.proc->wait(5s);
  int acked_before = acked;
  // The workload keeps going against a cluster without a master.
  REQUIRE(wait_for([&] { return failed >= 3; }, 30s));

  auto restarted = std::chrono::steady_clock::now();
  master = start_node({"master", "--listen", master.address, "--data-dir", data_dir});
  // Owners reconnect and clients succeed again on their own.
  REQUIRE_MESSAGE(wait_for([&] { return acked >= acked_before + 300; }, 30s),
                  "the workload did not resume after the master restarted");
  MESSAGE("the workload resumed "
          << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - restarted).count()
          << " ms after the master restarted");
  stop = true;
  worker.join();

  // Every key whose last change was acknowledged reads back exactly that,
  // through either owner.
  int checked = 0;
  int before_kill = 0;
  for (auto& [key, want] : model) {
    if (key.starts_with("p0/") && want.known && want.version) ++before_kill;
    if (!want.known) continue;
    for (auto* via : {a.get(), b.get()}) {
      auto got = via->get(key);
      if (want.version) {
        REQUIRE_MESSAGE(got.ok(), key << ": " << got.error().to_string());
        CHECK(got->version() == *want.version);
        CHECK(got->str() == want.bytes);
      } else {
        CHECK_MESSAGE(got.code() == sluice::errc::not_found, key << " was removed but reads "
                                                                 << (got ? "a value" : got.error().to_string()));
      }
      ++checked;
    }
  }
  CHECK(checked >= 80);
  CHECK(before_kill >= 20);  // values written before the kill, read back after it
}

TEST_CASE("recovery: an owner reconciles with a master that forgot its values, and frees them") {
  // A master without a data directory forgets everything when it restarts;
  // the owner keeps its process and its memory, and must not keep bytes
  // nobody can reach.
  auto master = start_node({"master", "--listen", "127.0.0.1:0"});
  auto owner = start_node({"owner", "--master", master.address, "--listen", "127.0.0.1:0"});
  auto c = connect(owner.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 1; });
  for (int i = 0; i < 10; ++i) REQUIRE(c->put("old/" + std::to_string(i), pattern(4096, 'o')).ok());
  auto stored = [](const sluice::cluster_status& s) { return s.members.empty() ? 0 : s.members[0].stored_objects; };
  await_status(*c, [&](const sluice::cluster_status& s) { return stored(s) == 10; });

  master.proc->signal(SIGKILL);
  master.proc->wait(5s);
  master = start_node({"master", "--listen", master.address});
  // The owner registers again, sends its inventory and frees all ten.
  auto s = await_status(*c, [&](const sluice::cluster_status& s) { return count_up(s) == 1 && stored(s) == 0; });
  CHECK(s.object_count == 0);
  CHECK(c->get("old/1").code() == sluice::errc::not_found);
  // And it goes on serving.
  REQUIRE(c->put("new", "value").ok());
  CHECK(c->get("new").value().str() == "value");
}
