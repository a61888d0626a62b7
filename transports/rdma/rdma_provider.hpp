// rdma_provider: the verbs calls an owner's RDMA path needs, behind a
// small interface, so that the data path can run on a real device
// (libibverbs) or on the software provider (a testing aid that emulates
// one-sided reads between processes of one host).
//
// Thread safety: register_memory and create_pair before any traffic, from
// one thread; a pair's posts from any thread; poll from one thread (the
// engine's poller) at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "transports/rdma/rdma.hpp"

namespace sluice::transport::rdma {

/// One reliable-connected queue pair of a provider.
class provider_pair {
 public:
  virtual ~provider_pair() = default;
  virtual queue_pair_endpoint local() const = 0;
  virtual result<void> connect(const queue_pair_endpoint& peer) = 0;
  /// One-sided read of `into.size()` bytes at the peer's `remote_address`
  /// into `into` (registered as `local_key`).
  virtual result<void> post_read(std::span<std::byte> into, const memory_key& local_key,
                                 std::uint64_t remote_address, std::uint32_t remote_rkey, std::uint64_t work_id) = 0;
};

class provider {
 public:
  virtual ~provider() = default;
  /// "verbs" or "soft".
  virtual std::string name() const = 0;
  /// What it runs on, for the log ("mlx5_0 port 1").
  virtual std::string describe() const = 0;
  virtual result<memory_key> register_memory(std::span<std::byte> memory) = 0;
  virtual result<std::unique_ptr<provider_pair>> create_pair() = 0;
  /// Reaps up to `max` completions; waits little or not at all.
  virtual result<std::vector<completion>> poll(std::size_t max) = 0;
};

/// The first device with an active port, on libibverbs. unavailable with
/// probe()'s reason when there is none.
result<std::unique_ptr<provider>> open_verbs_provider();

/// Faults and delays the software provider may add, for tests.
struct soft_options {
  /// The n-th read posted (from 1) fails and puts its pair in the error
  /// state (later reads on it are flushed); 0: none.
  std::uint64_t fail_read = 0;
  /// Each read completes this much later.
  std::chrono::microseconds read_delay{0};
};

/// The software provider: emulates one-sided reads between processes of
/// one host with process_vm_readv(2); the endpoint carries the process
/// id. A testing aid: it needs no device, and is used only when named.
std::unique_ptr<provider> make_soft_provider(soft_options options);

}  // namespace sluice::transport::rdma
