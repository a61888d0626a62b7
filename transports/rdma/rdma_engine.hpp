// rdma_engine: an rdma_path on a provider (a device, or the software
// provider). It registers the pool's segments, keeps the queue pairs by
// id, posts reads into the pool, and runs one poller thread that reaps
// completions and hands each to `on_completion` — so the role actor
// that posted a read hears of it as a message and never waits on the
// device.
//
// Thread safety: every rdma_path method from any thread; add_segment
// before traffic; on_completion runs on the poller thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "transports/rdma/rdma_provider.hpp"
#include "transports/rdma_path.hpp"

namespace sluice::transport::rdma {

class rdma_engine final : public rdma_path {
 public:
  using completion_handler = std::function<void(rdma_completion)>;

  rdma_engine(std::unique_ptr<rdma::provider> p, completion_handler on_completion);
  /// Stops the poller; completions not reaped by then are not delivered.
  ~rdma_engine() override;
  rdma_engine(const rdma_engine&) = delete;
  rdma_engine& operator=(const rdma_engine&) = delete;

  /// Registers pool segment `index` (its memory stays mapped while the
  /// engine lives). Errors: those of the provider (no_capacity when the
  /// locked-memory limit is too low).
  result<void> add_segment(std::uint32_t index, std::span<std::byte> memory);
  /// Stops the poller thread now (the node is stopping); later posts fail.
  void stop();
  std::string describe() const { return provider_->describe(); }

  std::string provider() const override { return provider_->name(); }
  std::vector<wire::rdma_segment> segments() const override;
  result<std::pair<std::uint64_t, wire::rdma_endpoint>> open_pair() override;
  result<void> connect_pair(std::uint64_t pair, const wire::rdma_endpoint& peer) override;
  void close_pair(std::uint64_t pair) override;
  result<void> post_read(std::uint64_t pair, const wire::pool_region& into, std::uint64_t remote_address,
                         std::uint32_t rkey, std::uint64_t work_id) override;

 private:
  struct segment {
    std::span<std::byte> memory;
    memory_key key;
  };
  struct pair_entry {
    std::shared_ptr<provider_pair> pair;
    std::uint64_t outstanding = 0;
    bool closed = false;
  };
  void run();
  void reaped(const completion& c);

  std::unique_ptr<rdma::provider> provider_;
  completion_handler on_completion_;
  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable wake_;
  std::map<std::uint32_t, segment> segments_;
  std::map<std::uint64_t, pair_entry> pairs_;
  std::map<std::uint64_t, std::uint64_t> work_pairs_;  // work id → pair id, while posted
  std::uint64_t next_pair_ = 1;
  std::uint64_t outstanding_ = 0;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace sluice::transport::rdma
