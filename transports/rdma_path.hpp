// rdma_path: what a role uses to move pool bytes between nodes with
// one-sided RDMA reads — the seam between the owner and transports/rdma.
// The owner sets queue pairs up over its TCP links (the endpoints and
// segment registrations travel as wire messages), asks a holder where a
// value lies, and posts reads of it straight into its own pool; the
// completions come back to the owner actor as messages, from the
// implementation's own thread, so the actor never waits on the device.
//
// Role code depends on this interface only; whoever builds a node picks
// the implementation (rdma_engine over libibverbs or the software
// provider) or passes none.
//
// Thread safety: every method from any thread; none blocks on the
// network.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice::transport {

/// A posted read finished: `ok`, or the reason it did not.
struct rdma_completion {
  std::uint64_t work_id = 0;
  bool ok = false;
  std::string error;
};

class rdma_path {
 public:
  virtual ~rdma_path() = default;

  /// "verbs" or "soft": both ends of a pair must use the same.
  virtual std::string provider() const = 0;
  /// This node's pool segments as registered with the device: what a
  /// peer may read.
  virtual std::vector<wire::rdma_segment> segments() const = 0;

  /// A new queue pair, not yet connected: its id and this end's endpoint.
  virtual result<std::pair<std::uint64_t, wire::rdma_endpoint>> open_pair() = 0;
  /// Connects the pair to the peer's end.
  virtual result<void> connect_pair(std::uint64_t pair, const wire::rdma_endpoint& peer) = 0;
  /// Forgets the pair. Reads still posted on it complete (or are
  /// flushed) as usual; the pair goes once they have.
  virtual void close_pair(std::uint64_t pair) = 0;

  /// Posts a one-sided read of `into.length` bytes at the peer's
  /// `remote_address` (registered under `rkey`) into this node's pool
  /// region `into`. Its completion names `work_id`. Errors at once:
  /// unknown pair or segment, or the device refused the request.
  /// REQUIRES: `into` stays allocated until the completion arrives.
  virtual result<void> post_read(std::uint64_t pair, const wire::pool_region& into, std::uint64_t remote_address,
                                 std::uint32_t rkey, std::uint64_t work_id) = 0;
};

}  // namespace sluice::transport
