// sim_rdma: the simulator's rdma path. Owners of a world register their
// pools with one fabric; a read copies straight out of the holder's pool
// (both live in the one process) and its completion reaches the reader's
// actor as the next message in its mailbox, exactly like a device's
// through the poller thread — but on the world's one thread, in order.
// Faults, drawn from the world's seeded rng: a read fails with a remote
// access error (the pair goes to the error state: later reads on it are
// flushed), and a holder that crashed or restarted answers every read on
// an old pair with a retry-exceeded error.
//
// Addresses handed to peers are virtual — node, segment and offset packed
// into 64 bits — so frames, and the trace hash, do not depend on where the
// pools happen to be mapped.
//
// Single-threaded: driven by the world's loop.
#pragma once

#include <map>
#include <memory>
#include <span>
#include <vector>

#include "actors/common/actor_sink.hpp"
#include "actors/common/atoms.hpp"
#include "runtime/rng.hpp"
#include "transports/rdma_path.hpp"

namespace sluice::sim {

class rdma_fabric {
 public:
  /// Each read fails with `fail_pm` per mille.
  rdma_fabric(rng random, std::uint32_t fail_pm) : random_(random), fail_pm_(fail_pm) {}

  /// Incarnation `incarnation` of node `node` starts with `segments` (its
  /// pool) registered; completions of its reads go to `sink`.
  /// REQUIRES: the segments and the sink outlive the path or detach().
  std::unique_ptr<transport::rdma_path> attach(int node, std::uint64_t incarnation,
                                               std::vector<std::span<std::byte>> segments, actor_sink* sink);
  /// The node crashed: its memory is gone, reads of it fail.
  void detach(int node);

  /// Reads that completed, and that failed (for the run's report).
  std::uint64_t reads_ok() const noexcept { return reads_ok_; }
  std::uint64_t reads_failed() const noexcept { return reads_failed_; }

 private:
  friend class sim_rdma;
  struct node_state {
    std::uint64_t incarnation = 0;
    bool alive = false;
    std::vector<std::span<std::byte>> segments;
  };
  rng random_;
  std::uint32_t fail_pm_ = 0;
  std::map<int, node_state> nodes_;
  std::uint64_t reads_ok_ = 0;
  std::uint64_t reads_failed_ = 0;
};

}  // namespace sluice::sim
