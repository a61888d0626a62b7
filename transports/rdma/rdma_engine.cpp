#include "transports/rdma/rdma_engine.hpp"

#include <algorithm>
#include <cstring>

namespace sluice::transport::rdma {
namespace {

/// Completions reaped per poll.
constexpr std::size_t poll_batch = 64;
/// Reads posted and not completed, at most, over all pairs: a bound on
/// what the completion queue must hold (the device's is 4096 entries).
constexpr std::uint64_t outstanding_max = 2048;
/// While reads are out and none completed, the poller looks again after
/// this long: short against a read of a piece (~100 us for 1 MiB), and it
/// keeps a core free on small machines.
constexpr std::chrono::microseconds idle_poll_wait{20};

queue_pair_endpoint to_endpoint(const wire::rdma_endpoint& e) {
  queue_pair_endpoint out;
  out.qp_number = e.qp_number;
  out.packet_sequence = e.packet_sequence;
  out.lid = e.lid;
  std::memcpy(out.gid.data(), e.gid.data(), std::min(e.gid.size(), out.gid.size()));
  return out;
}

wire::rdma_endpoint from_endpoint(const queue_pair_endpoint& e) {
  wire::rdma_endpoint out{e.qp_number, e.packet_sequence, e.lid, {}};
  out.gid.assign(reinterpret_cast<const char*>(e.gid.data()), e.gid.size());
  return out;
}

}  // namespace

rdma_engine::rdma_engine(std::unique_ptr<rdma::provider> p, completion_handler on_completion)
    : provider_(std::move(p)), on_completion_(std::move(on_completion)) {
  poller_ = std::thread{[this] { run(); }};
}

rdma_engine::~rdma_engine() {
  stop();
  // Pairs go before the provider that made them.
  pairs_.clear();
}

void rdma_engine::stop() {
  {
    std::lock_guard lock{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (poller_.joinable()) poller_.join();
}

result<void> rdma_engine::add_segment(std::uint32_t index, std::span<std::byte> memory) {
  auto key = provider_->register_memory(memory);
  if (!key) return key.error();
  std::lock_guard lock{mutex_};
  segments_[index] = segment{memory, *key};
  return {};
}

std::vector<wire::rdma_segment> rdma_engine::segments() const {
  std::lock_guard lock{mutex_};
  std::vector<wire::rdma_segment> out;
  for (auto& [index, s] : segments_) out.push_back(wire::rdma_segment{index, s.key.address, s.key.length, s.key.rkey});
  return out;
}

result<std::pair<std::uint64_t, wire::rdma_endpoint>> rdma_engine::open_pair() {
  auto created = provider_->create_pair();
  if (!created) return created.error();
  std::shared_ptr<provider_pair> pair{std::move(*created)};
  auto endpoint = from_endpoint(pair->local());
  std::lock_guard lock{mutex_};
  if (stopping_) return fail(errc::unavailable, "the node is stopping");
  auto id = next_pair_++;
  pairs_.emplace(id, pair_entry{std::move(pair), 0, false});
  return std::pair{id, std::move(endpoint)};
}

result<void> rdma_engine::connect_pair(std::uint64_t pair, const wire::rdma_endpoint& peer) {
  if (peer.gid.size() != 16) return fail(errc::protocol, "an RDMA endpoint's gid has 16 bytes");
  std::shared_ptr<provider_pair> p;
  {
    std::lock_guard lock{mutex_};
    auto it = pairs_.find(pair);
    if (it == pairs_.end() || it->second.closed) return fail(errc::invalid_argument, "no such queue pair");
    p = it->second.pair;
  }
  return p->connect(to_endpoint(peer));
}

void rdma_engine::close_pair(std::uint64_t pair) {
  std::lock_guard lock{mutex_};
  auto it = pairs_.find(pair);
  if (it == pairs_.end()) return;
  // Reads still out on it complete first (the poller drops it then).
  if (it->second.outstanding == 0) {
    pairs_.erase(it);
  } else {
    it->second.closed = true;
  }
}

result<void> rdma_engine::post_read(std::uint64_t pair, const wire::pool_region& into, std::uint64_t remote_address,
                                    std::uint32_t rkey, std::uint64_t work_id) {
  std::shared_ptr<provider_pair> p;
  std::span<std::byte> local;
  memory_key key;
  {
    std::lock_guard lock{mutex_};
    if (stopping_) return fail(errc::unavailable, "the node is stopping");
    if (outstanding_ >= outstanding_max) return fail(errc::overloaded, "too many RDMA reads in flight");
    auto it = pairs_.find(pair);
    if (it == pairs_.end() || it->second.closed) return fail(errc::invalid_argument, "no such queue pair");
    auto seg = segments_.find(into.segment);
    if (seg == segments_.end()) return fail(errc::invalid_argument, "pool segment " + std::to_string(into.segment) + " is not registered");
    auto& memory = seg->second.memory;
    if (into.offset > memory.size() || into.length > memory.size() - into.offset) {
      return fail(errc::invalid_argument, "the region lies outside its pool segment");
    }
    local = memory.subspan(into.offset, into.length);
    key = seg->second.key;
    p = it->second.pair;
    // Counted before the post: its completion may come before post returns.
    it->second.outstanding += 1;
    outstanding_ += 1;
    work_pairs_[work_id] = pair;
  }
  auto posted = p->post_read(local, key, remote_address, rkey, work_id);
  if (!posted) {
    std::lock_guard lock{mutex_};
    reaped(completion{work_id, true, {}, 0});  // undoes the counts; nothing to deliver
    return posted.error();
  }
  wake_.notify_one();
  return {};
}

/// REQUIRES: mutex_ held.
void rdma_engine::reaped(const completion& c) {
  auto w = work_pairs_.find(c.work_id);
  if (w == work_pairs_.end()) return;
  auto it = pairs_.find(w->second);
  work_pairs_.erase(w);
  outstanding_ -= 1;
  if (it == pairs_.end()) return;
  it->second.outstanding -= 1;
  if (it->second.closed && it->second.outstanding == 0) pairs_.erase(it);
}

void rdma_engine::run() {
  for (;;) {
    {
      std::unique_lock lock{mutex_};
      wake_.wait(lock, [this] { return stopping_ || outstanding_ > 0; });
      if (stopping_) return;
    }
    auto got = provider_->poll(poll_batch);
    if (!got || got->empty()) {
      std::unique_lock lock{mutex_};
      wake_.wait_for(lock, idle_poll_wait, [this] { return stopping_; });
      continue;
    }
    for (auto& c : *got) {
      {
        std::lock_guard lock{mutex_};
        if (!work_pairs_.contains(c.work_id)) continue;  // not one of ours (a failed post's)
        reaped(c);
      }
      on_completion_(rdma_completion{c.work_id, c.ok, c.error});
    }
  }
}

}  // namespace sluice::transport::rdma
