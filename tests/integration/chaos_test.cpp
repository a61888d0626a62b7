// Chaos across real processes: clients put, get and remove while owners
// and the master are SIGKILLed and started again, one failure at a time
// with time for repair between them. Values describe themselves, so a
// torn or foreign value never passes for the right one.

#include <doctest/doctest.h>

#include <signal.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "sluice/client.hpp"
#include "tests/support/nodes.hpp"

namespace {

using namespace std::chrono_literals;
using namespace sluice::test;
using steady = std::chrono::steady_clock;

/// "KEY#SEQ|" and then bytes drawn from both.
std::string value_for(const std::string& key, std::uint64_t seq, std::size_t size) {
  auto out = key + "#" + std::to_string(seq) + "|";
  auto h = std::hash<std::string>{}(key) ^ (seq * 0x9e3779b97f4a7c15ULL);
  while (out.size() < size) {
    h = h * 6364136223846793005ULL + 1442695040888963407ULL;
    out.push_back(static_cast<char>(h >> 56));
  }
  return out;
}

/// Whether `got` is a whole value some put of `key` wrote.
bool describes(const std::string& key, std::string_view got) {
  auto bar = got.find('|');
  auto hash = got.rfind('#', bar);
  if (bar == std::string_view::npos || hash == std::string_view::npos) return false;
  if (got.substr(0, hash) != key) return false;
  auto digits = got.substr(hash + 1, bar - hash - 1);
  if (digits.empty() || digits.size() > 18 || digits.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  return got == value_for(key, std::stoull(std::string{digits}), got.size());
}

struct tally {
  std::atomic<std::uint64_t> ok{0}, failed{0};
  std::mutex m;
  std::vector<std::string> problems;
  std::map<std::string, std::uint64_t> errors;  ///< by code
  void failed_with(sluice::errc code) {
    std::lock_guard lock{m};
    errors[std::string{sluice::to_string(code)}] += 1;
  }
  void problem(std::string p) {
    std::lock_guard lock{m};
    if (problems.size() < 20) problems.push_back(std::move(p));
  }
};

/// Puts, gets and removes keys of its own through `address` until told
/// to stop, each call within 2 s; a call that overruns, or a read that
/// returns bytes no put of the key wrote, is a problem.
void churn(const std::string& address, int worker, std::atomic<bool>& stop, tally& t) {
  sluice::client_options options;
  options.timeout = 2s;
  auto connected = sluice::client::connect(address, options);
  if (!connected) return t.problem("worker " + std::to_string(worker) + " could not connect");
  auto c = std::move(*connected);
  std::uint64_t seq = 0;
  while (!stop) {
    auto key = "churn/" + std::to_string(worker) + "/" + std::to_string(seq % 16);
    auto op = seq % 5;
    ++seq;
    auto t0 = steady::now();
    auto code = sluice::errc::ok;
    if (op < 2) {
      code = c->put(key, value_for(key, seq, 1000 + (seq * 37) % 30000)).code();
    } else if (op < 4) {
      auto got = c->get(key);
      code = got.code() == sluice::errc::not_found ? sluice::errc::ok : got.code();
      if (got && !describes(key, got->str())) t.problem("get " + key + " returned bytes no put of it wrote");
    } else {
      code = c->remove(key).code();
    }
    bool ok = code == sluice::errc::ok;
    if (!ok) t.failed_with(code);
    auto took = steady::now() - t0;
    // 2 s deadline; the slack covers a loaded machine's scheduling.
    if (took > 5s) t.problem(key + ": a call took " + std::to_string(took / 1ms) + " ms, past its 2 s deadline");
    (ok ? t.ok : t.failed) += 1;
  }
}

bool settled(const sluice::cluster_status& s) {
  return s.repair.under_replicated == 0 && s.repair.without_live_copy == 0 && s.repair.copies_in_flight == 0;
}

}  // namespace

TEST_CASE("chaos: owners and the master killed and restarted one at a time under load lose no key written with two copies") {
  auto dir = temp_path("chaos-master");
  auto master_config = write_config("[master]\nheartbeat_interval = \"200ms\"\nheartbeat_timeout = \"1s\"\n"
                                    "repair_after = \"1s\"\n");
  auto master = start_node({"master", "--config", master_config, "--listen", "127.0.0.1:0", "--data-dir", dir});
  auto owner_a = start_owner(master);
  auto owner_b = start_owner(master);
  auto owner_c = start_owner(master);
  auto c = connect(owner_c.address);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 3; });

  // Written before the faults, two copies each, through A and B.
  constexpr int durable = 40;
  {
    auto a = connect(owner_a.address);
    auto b = connect(owner_b.address);
    for (int i = 0; i < durable; ++i) {
      auto key = "durable/" + std::to_string(i);
      auto v = (i % 2 == 0 ? a : b)->put(key, value_for(key, 0, 20000), sluice::put_options{.replicas = 2});
      REQUIRE_MESSAGE(v.ok(), key << ": " << (v ? "" : v.error().to_string()));
    }
  }

  // Load through C, which stays up, and through B until B goes.
  std::atomic<bool> stop{false}, stop_b{false};
  tally t;
  std::vector<std::thread> workers;
  workers.emplace_back(churn, owner_c.address, 0, std::ref(stop), std::ref(t));
  workers.emplace_back(churn, owner_c.address, 1, std::ref(stop), std::ref(t));
  workers.emplace_back(churn, owner_b.address, 2, std::ref(stop_b), std::ref(t));
  // Waits for `owners_up` owners and no object below its target, with
  // more than `made` repair copies made since the master started.
  auto repaired = [&](std::size_t owners_up, std::uint64_t made) {
    await_status(*c, [&](const sluice::cluster_status& s) {
      return count_up(s) == owners_up && settled(s) && s.repair.copies_made > made;
    });
  };

  // 1. A goes; its copies are made again on B and C. A new owner joins.
  owner_a.proc->signal(SIGKILL);
  owner_a.proc->wait(5s);
  repaired(2, 0);
  auto owner_d = start_owner(master);
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 3 && settled(s); });

  // 2. The master goes, and comes back from its data directory.
  master.proc->signal(SIGKILL);
  master.proc->wait(5s);
  std::this_thread::sleep_for(500ms);
  master = start_node({"master", "--config", master_config, "--listen", master.address, "--data-dir", dir});
  await_status(*c, [](const sluice::cluster_status& s) { return count_up(s) == 3 && settled(s); });

  // 3. B goes; its copies are made again on C and D.
  stop_b = true;
  owner_b.proc->signal(SIGKILL);
  owner_b.proc->wait(5s);
  // The restarted master counts its repair copies from 0.
  repaired(2, 0);
  stop = true;
  for (auto& w : workers) w.join();

  for (auto& p : t.problems) FAIL_CHECK(p);
  std::string errors;
  for (auto& [code, n] : t.errors) errors += " " + code + " " + std::to_string(n);
  MESSAGE("chaos: " << t.ok.load() << " calls succeeded, " << t.failed.load() << " failed with a typed error:" << errors);
  CHECK(t.ok > 0);

  // Every key written with two copies reads back whole, through C and D.
  auto d = connect(owner_d.address);
  for (int i = 0; i < durable; ++i) {
    auto key = "durable/" + std::to_string(i);
    for (auto* via : {c.get(), d.get()}) {
      auto got = via->get(key);
      REQUIRE_MESSAGE(got.ok(), key << ": " << got.error().to_string());
      CHECK(got->str() == value_for(key, 0, 20000));
    }
  }
  // Liveness, and deletes that stay deleted now that no fault is active.
  for (auto* via : {c.get(), d.get()}) {
    REQUIRE(via->put("after/k", "v").ok());
    CHECK(via->get("after/k").value().str() == "v");
    REQUIRE(via->remove("after/k").ok());
    CHECK(via->get("after/k").code() == sluice::errc::not_found);
  }
  for (int k = 0; k < 16; ++k) {
    auto key = "churn/0/" + std::to_string(k);
    REQUIRE(c->remove(key).ok());
    CHECK(d->get(key).code() == sluice::errc::not_found);
  }
  std::filesystem::remove_all(dir);
}
