// The owner's RDMA state: queue pairs to the owners it reads from, the
// pairs others read it through, the regions it holds for their reads, and
// the reads it has posted. Internal to actors/owner (owner_rdma.cpp).
//
// Invariants (asserted in owner_rdma.cpp):
//   1. each map stays within its bound below;
//   2. a pair of `out` is either being set up (not ready, with someone
//      waiting for it) or ready (nobody waiting); it is set up once, and
//      its id is never 0;
//   3. lease, job and work ids are never 0 and never reused;
//   4. a job's reads add up: arrived <= next <= size, at most
//      transfer_window of them in flight, never fewer than 0; each
//      posted read is in `reads` until its completion arrives;
//   5. a job ends once (`over` goes from false to true, never back),
//      with every byte arrived when it ends well; it leaves `jobs` then,
//      and `done` runs then and only then.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "actors/common/endpoint.hpp"
#include "transports/rdma_path.hpp"

namespace sluice::owner_detail {

struct rdma_job;

/// A queue pair this owner reads another owner's pool through.
struct rdma_out_pair {
  std::uint64_t pair = 0;
  bool ready = false;
  std::vector<wire::rdma_segment> segments;  ///< the peer's: where reads may go
  std::vector<std::function<void(result<void>)>> waiters;  ///< while it is set up
};

/// A region held for another owner's reads until it releases it.
struct rdma_held {
  shared_bytes bytes;
  node_id reader;
  clock_time until;
};

/// Bounds of the maps below; each is checked where the map grows.
/// Leases held for other owners at once; more answer overloaded (the
/// reader then reads over tcp).
inline constexpr std::size_t rdma_leases_max = 4096;
/// Readers with a pair into this owner; more answer overloaded.
inline constexpr std::size_t rdma_in_pairs_max = 4096;
/// Owners this one reads through pairs of its own; reads from others go
/// over tcp.
inline constexpr std::size_t rdma_out_pairs_max = 4096;
/// Values being read over rdma at once; more go over tcp. The posted
/// reads are at most this many times [links] transfer_window.
inline constexpr std::size_t rdma_jobs_max = 1024;

struct rdma_state {
  /// Null: this owner has no RDMA path.
  transport::rdma_path* path = nullptr;
  std::map<node_id, rdma_out_pair> out;
  /// The pair each reader reads this owner through (the latest it set up).
  std::map<node_id, std::uint64_t> in;
  std::map<std::uint64_t, rdma_held> leases;
  std::uint64_t next_lease = 1;
  /// Posted reads by work id: their job and length. An entry keeps its
  /// job — and so the pool region the read lands in — alive until its
  /// completion arrives, even after the job ended.
  std::map<std::uint64_t, std::pair<std::shared_ptr<rdma_job>, std::uint64_t>> reads;
  std::map<std::uint64_t, std::shared_ptr<rdma_job>> jobs;  ///< not over yet, by id
  std::uint64_t next_work = 1;
  std::uint64_t next_job = 1;
};

}  // namespace sluice::owner_detail
