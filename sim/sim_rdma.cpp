#include "sim/sim_rdma.hpp"

#include <caf/message.hpp>

#include <cstring>

namespace sluice::sim {
namespace {

// Virtual addresses: node + 1 in the top 20 bits, then the segment (10
// bits), then the offset (34 bits: segments of up to 16 GiB).
constexpr int node_shift = 44;
constexpr int segment_shift = 34;
constexpr std::uint64_t offset_mask = (std::uint64_t{1} << segment_shift) - 1;

std::uint64_t address_of(int node, std::uint32_t segment) {
  return (static_cast<std::uint64_t>(node + 1) << node_shift) | (std::uint64_t{segment} << segment_shift);
}

}  // namespace

class sim_rdma final : public transport::rdma_path {
 public:
  sim_rdma(rdma_fabric& fabric, int node, std::uint64_t incarnation, actor_sink* sink)
      : fabric_(fabric), node_(node), incarnation_(incarnation), sink_(sink) {}

  std::string provider() const override { return "sim"; }

  std::vector<wire::rdma_segment> segments() const override {
    std::vector<wire::rdma_segment> out;
    auto& me = fabric_.nodes_.at(node_);
    for (std::uint32_t i = 0; i < me.segments.size(); ++i) {
      out.push_back(wire::rdma_segment{i, address_of(node_, i), me.segments[i].size(), static_cast<std::uint32_t>(node_ + 1)});
    }
    return out;
  }

  result<std::pair<std::uint64_t, wire::rdma_endpoint>> open_pair() override {
    auto id = next_pair_++;
    pairs_[id] = pair{};
    // The endpoint names the node and its incarnation.
    wire::rdma_endpoint e{static_cast<std::uint32_t>(node_), static_cast<std::uint32_t>(incarnation_), 0,
                          std::string(16, '\0')};
    return std::pair{id, std::move(e)};
  }

  result<void> connect_pair(std::uint64_t id, const wire::rdma_endpoint& peer) override {
    auto it = pairs_.find(id);
    if (it == pairs_.end()) return fail(errc::invalid_argument, "no such queue pair");
    it->second.peer = static_cast<int>(peer.qp_number);
    it->second.peer_incarnation = peer.packet_sequence;
    it->second.connected = true;
    return {};
  }

  void close_pair(std::uint64_t id) override { pairs_.erase(id); }

  result<void> post_read(std::uint64_t id, const wire::pool_region& into, std::uint64_t remote_address,
                         std::uint32_t rkey, std::uint64_t work_id) override {
    auto it = pairs_.find(id);
    if (it == pairs_.end() || !it->second.connected) return fail(errc::invalid_argument, "no such queue pair");
    auto& me = fabric_.nodes_.at(node_);
    if (into.segment >= me.segments.size() || into.offset > me.segments[into.segment].size() ||
        into.length > me.segments[into.segment].size() - into.offset) {
      return fail(errc::invalid_argument, "the region lies outside its pool segment");
    }
    auto local = me.segments[into.segment].subspan(into.offset, into.length);
    auto why = perform(it->second, local, remote_address, rkey);
    if (why.empty()) {
      fabric_.reads_ok_ += 1;
    } else {
      fabric_.reads_failed_ += 1;
      it->second.failed = true;
    }
    sink_->post(caf::make_message(sluice::rdma_atom::value, work_id, why.empty(), std::move(why)));
    return {};
  }

 private:
  struct pair {
    int peer = -1;
    std::uint64_t peer_incarnation = 0;
    bool connected = false;
    bool failed = false;
  };

  /// Copies the bytes; "" when it worked, else the completion's error.
  std::string perform(const pair& p, std::span<std::byte> local, std::uint64_t remote_address, std::uint32_t rkey) {
    if (p.failed) return "Work Request Flushed Error";
    auto peer = fabric_.nodes_.find(p.peer);
    if (peer == fabric_.nodes_.end() || !peer->second.alive ||
        peer->second.incarnation != p.peer_incarnation) {
      return "Transport Retry Counter Exceeded";
    }
    if (fabric_.fail_pm_ > 0 && fabric_.random_.chance(fabric_.fail_pm_, 1000)) {
      return "remote access error (simulated)";
    }
    auto node = static_cast<int>(remote_address >> node_shift) - 1;
    auto segment = static_cast<std::uint32_t>((remote_address >> segment_shift) & 0x3ff);
    auto offset = remote_address & offset_mask;
    auto& segs = peer->second.segments;
    if (node != p.peer || rkey != static_cast<std::uint32_t>(p.peer + 1) || segment >= segs.size() ||
        offset > segs[segment].size() || local.size() > segs[segment].size() - offset) {
      return "Remote Access Error";
    }
    std::memcpy(local.data(), segs[segment].data() + offset, local.size());
    return {};
  }

  rdma_fabric& fabric_;
  int node_;
  std::uint64_t incarnation_;
  actor_sink* sink_;
  std::map<std::uint64_t, pair> pairs_;
  std::uint64_t next_pair_ = 1;
};

std::unique_ptr<transport::rdma_path> rdma_fabric::attach(int node, std::uint64_t incarnation,
                                                          std::vector<std::span<std::byte>> segments,
                                                          actor_sink* sink) {
  nodes_[node] = node_state{incarnation, true, std::move(segments)};
  return std::make_unique<sim_rdma>(*this, node, incarnation, sink);
}

void rdma_fabric::detach(int node) {
  auto it = nodes_.find(node);
  if (it == nodes_.end()) return;
  it->second.alive = false;
  it->second.segments.clear();
}

}  // namespace sluice::sim
