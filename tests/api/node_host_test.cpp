// How nodes are built: their scheduler threads, and the master and owner
// of one process sharing an actor system.

#include <doctest/doctest.h>

#include <sched.h>

#include <algorithm>
#include <string>

#include "api/src/node_host.hpp"
#include "sluice/client.hpp"
#include "sluice/node.hpp"

namespace {

/// Pins the calling thread to some CPUs for the scope, then puts its
/// affinity back.
class pinned {
 public:
  explicit pinned(const cpu_set_t& cpus) {
    REQUIRE(::sched_getaffinity(0, sizeof saved_, &saved_) == 0);
    REQUIRE(::sched_setaffinity(0, sizeof cpus, &cpus) == 0);
  }
  ~pinned() { ::sched_setaffinity(0, sizeof saved_, &saved_); }
  pinned(const pinned&) = delete;
  pinned& operator=(const pinned&) = delete;

 private:
  cpu_set_t saved_;
};

cpu_set_t allowed() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  REQUIRE(::sched_getaffinity(0, sizeof cpus, &cpus) == 0);
  return cpus;
}

cpu_set_t first_of(const cpu_set_t& cpus) {
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &cpus)) {
      CPU_SET(i, &one);
      break;
    }
  }
  return one;
}

}  // namespace

TEST_CASE("node: threads = 0 runs as many scheduler threads as the CPUs it may run on, at most 2") {
  auto cpus = allowed();
  CHECK(sluice::scheduler_threads(0) == static_cast<std::uint32_t>(std::clamp(CPU_COUNT(&cpus), 1, 2)));
  {
    pinned one{first_of(cpus)};
    CHECK(sluice::scheduler_threads(0) == 1);
    CHECK(sluice::scheduler_threads(3) == 3);  // a number given is kept
  }
  CHECK(sluice::scheduler_threads(1) == 1);
  CHECK(sluice::scheduler_threads(64) == 64);
}

TEST_CASE("node: a local cluster's master and owner share one actor system, and start and stop again and again") {
  // Pinned to one CPU: one worker runs both roles and the answers to the
  // owner's requests of the master (a placement for a put with a time to
  // live) come back through the same scheduler.
  pinned one{first_of(allowed())};
  for (int round = 0; round < 3; ++round) {
    CAPTURE(round);
    auto cluster = sluice::local_cluster::start();
    REQUIRE_MESSAGE(cluster.ok(), (cluster ? "" : cluster.error().to_string()));
    auto c = (*cluster)->connect();
    REQUIRE_MESSAGE(c.ok(), (c ? "" : c.error().to_string()));
    sluice::put_options o;
    o.ttl = std::chrono::milliseconds{60000};
    auto value = "round " + std::to_string(round);
    REQUIRE((*c)->put("k", value, o).ok());
    auto got = (*c)->get("k");
    REQUIRE(got.ok());
    CHECK(got->str() == value);
    auto status = (*c)->status();
    REQUIRE(status.ok());
  }
}
