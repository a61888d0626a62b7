// workload: clients putting, getting, removing and overwriting keys of a
// small key space (so operations collide), with values from empty to
// 100 KiB, each result judged by the checker. Operations go to the real
// client actors as the embedding API sends them. Each client also puts one
// key with two copies at the start (retrying until it is acknowledged) and
// never changes it: what crashes one at a time must not take (read now and
// then, and at the end).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "sim/checker.hpp"
#include "sim/world.hpp"

namespace sluice::sim {

struct workload_options {
  int keys = 16;
  /// Keys each client writes alone (and everyone reads).
  int own_keys = 4;
  /// Mean pause between two operations of one client.
  sim_duration think = 50ms;
  /// Operations one client keeps in flight at most.
  int outstanding_max = 2;
  /// Deadline of each operation.
  sim_duration timeout = 2s;
};

class kv_workload {
 public:
  kv_workload(world& w, checker& c, workload_options options = {});

  /// Starts every client issuing operations until `stop`.
  void run_until(sim_time stop);

  /// After the faults: every client must complete a put and a get of a
  /// fresh key before `deadline`, retrying as needed. Returns the clients
  /// that did not (by index).
  std::vector<int> check_liveness(sim_duration settle, sim_duration window);

  /// After the liveness check: every key the checker says must read back
  /// (checker::durable_keys) is read until a get answers, through the
  /// clients in turn, before `window` runs out; a key no get could read
  /// is a violation. (A not_found answer is judged by the checker.)
  void check_durable(sim_duration window);

  std::uint64_t operations() const noexcept { return issued_; }
  /// Keys check_durable read back.
  std::uint64_t durable_checked() const noexcept { return durable_checked_; }

 private:
  struct client_state {
    std::uint64_t incarnation = 0;
    int outstanding = 0;
    std::uint64_t next_seq = 1;
  };

  void schedule_next(int client);
  void issue(int client);
  bool current(int client, std::uint64_t incarnation) const;
  void send(int client, wire::body request, shared_bytes payload,
            std::function<void(result<wire::message>)> done);
  void live_attempt(int client, sim_time deadline, std::vector<int>& done);
  /// The key client `client` keeps, and its put (again until acknowledged).
  static std::string kept_key(int client);
  void keep(int client);
  /// Keys a get answered (found, or not_found with a reason), and the
  /// last error of each key not answered yet.
  struct durable_reads {
    std::set<std::string> answered;
    std::map<std::string, std::string> last_error;
  };
  void durable_attempt(const std::string& key, int client, sim_time deadline, durable_reads& reads);

  world& world_;
  checker& checker_;
  workload_options options_;
  std::vector<client_state> clients_;
  sim_time stop_{};
  std::uint64_t issued_ = 0;
  std::uint64_t durable_checked_ = 0;
};

}  // namespace sluice::sim
