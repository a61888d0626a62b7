// rdma: RDMA on libibverbs — what an owner needs to move pool regions with
// one-sided reads and writes: finding a device, registering pool segments
// with it, reliable-connected (RC) queue pairs set up over a TCP
// connection, and posting reads and writes and reaping their completions.
//
// Detected at run time: probe() says whether this machine has a usable
// device, and why not when it has none (no device, no active port, or a
// build without libibverbs). Owners reach this layer through the verbs
// provider (rdma_provider.hpp) and rdma_engine; docs/rdma.md says what
// they do with it and how to try it on real hardware.
//
// Thread safety: a context and its queue pairs are used by one thread at
// a time (the transport's own), except where a method says otherwise.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "sluice/result.hpp"

namespace sluice::transport::rdma {

struct device_info {
  std::string name;          ///< e.g. "mlx5_0", "rxe0"
  std::uint8_t port = 1;     ///< the first active port
  bool port_active = false;
  std::uint16_t lid = 0;     ///< InfiniBand local id (0 on RoCE)
};

struct probe_result {
  std::vector<device_info> devices;
  /// Why no device is usable ("" when one is).
  std::string why_not;
  bool usable() const noexcept { return why_not.empty(); }
};

/// Lists the RDMA devices and their first active port. Never fails: a
/// machine without RDMA (or a build without libibverbs) answers with no
/// usable device and the reason.
probe_result probe();

/// A region registered with a context's protection domain: what a peer
/// needs to read or write it (`address`, `rkey`), and what local work
/// requests name it with (`lkey`).
struct memory_key {
  std::uint64_t address = 0;
  std::uint64_t length = 0;
  std::uint32_t lkey = 0;
  std::uint32_t rkey = 0;
};

/// Where a queue pair's other end is: exchanged over TCP before the pair
/// can carry anything.
struct queue_pair_endpoint {
  std::uint32_t qp_number = 0;
  std::uint32_t packet_sequence = 0;
  std::uint16_t lid = 0;
  std::array<std::uint8_t, 16> gid{};
};

struct completion {
  std::uint64_t work_id = 0;
  bool ok = false;
  std::string error;  ///< the verbs status, when not ok
  std::uint32_t bytes = 0;
};

class context;
class queue_pair;

/// An opened device: its protection domain and one completion queue.
class context {
 public:
  /// Opens the first usable device. Errors: unavailable (none usable,
  /// with probe()'s reason), internal (the verbs library failed).
  static result<std::unique_ptr<context>> open(std::uint32_t completion_entries = 4096);
  ~context();
  context(const context&) = delete;
  context& operator=(const context&) = delete;

  /// Registers `memory` (a pool segment) for local use and for peers'
  /// reads and writes. Deregistered when the context goes.
  result<memory_key> register_memory(std::span<std::byte> memory);

  /// A new RC queue pair, not yet connected.
  result<std::unique_ptr<queue_pair>> create_queue_pair(std::uint32_t outstanding_max = 256);

  /// Reaps up to `max` completions without waiting.
  result<std::vector<completion>> poll(std::size_t max = 64);

  const device_info& device() const noexcept { return device_; }

  struct handles;  // the verbs objects, private to rdma_device.cpp

 private:
  friend class queue_pair;
  context(device_info device, std::unique_ptr<handles> h);
  device_info device_;
  std::unique_ptr<handles> handles_;
};

/// One reliable-connected queue pair.
class queue_pair {
 public:
  ~queue_pair();
  queue_pair(const queue_pair&) = delete;
  queue_pair& operator=(const queue_pair&) = delete;

  /// This end, to send to the peer.
  queue_pair_endpoint local() const;
  /// Moves the pair to ready-to-send towards `peer`.
  result<void> connect(const queue_pair_endpoint& peer);

  /// One-sided: reads `into.size()` bytes at the peer's `remote` address
  /// into `into` (registered as `local_key`); `work_id` comes back in its
  /// completion.
  result<void> post_read(std::span<std::byte> into, const memory_key& local_key, std::uint64_t remote_address,
                         std::uint32_t remote_rkey, std::uint64_t work_id);
  /// One-sided: writes `from` to the peer's `remote` address.
  result<void> post_write(std::span<const std::byte> from, const memory_key& local_key,
                          std::uint64_t remote_address, std::uint32_t remote_rkey, std::uint64_t work_id);

  struct handles;

 private:
  friend class context;
  queue_pair(context& owner, std::unique_ptr<handles> h);
  context& owner_;
  std::unique_ptr<handles> handles_;
};

/// Sets a queue pair up over TCP: sends this end's endpoint on the
/// connected socket `fd`, reads the peer's, and connects the pair. Blocks
/// on the socket (the transport's own thread only), at most `timeout_ms`.
result<queue_pair_endpoint> exchange_endpoints(int fd, const queue_pair_endpoint& mine, int timeout_ms);

}  // namespace sluice::transport::rdma
