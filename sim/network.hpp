// network: the simulated network of a world. It carries the real encoded
// frames between the nodes' transports with seeded latency, and injects
// the faults of the run's plan: lost, duplicated and reordered frames,
// clogged links (traffic held for a while), symmetric and asymmetric
// partitions, connection resets, and node crashes.
//
// Links behave as the real transports promise — ordered, reliable until
// they break, each end told once when they break — except where a fault
// deliberately breaks that promise (drop, duplicate, reorder), which role
// code must survive too.
//
// Single-threaded: driven by the world's loop.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/rng.hpp"
#include "sim/fault_plan.hpp"
#include "sim/trace.hpp"
#include "transports/transport.hpp"

namespace sluice::sim {

using transport::link_id;

/// How long a connect across a partition waits before it fails.
inline constexpr sim_duration connect_timeout = 2s;

class network {
 public:
  network(rng random, fault_plan plan, trace& events);

  /// Where "now" comes from: the world's virtual clock.
  void set_clock(std::function<sim_time()> now) { now_ = std::move(now); }

  // --- nodes ---------------------------------------------------------------

  /// Node `node` (re)starts; its link events go to `sink` from now on.
  void attach(int node, transport::link_sink* sink);
  /// Requests to `node` that `fast` answers never reach its actors, as in
  /// a real owner's shm poller. Cleared by detach().
  void set_fast_path(int node, transport::fast_path_fn fast);
  /// Frames to `node` that `relay` passes on go straight to another of
  /// its links, as an owner's poller relays RPC calls between its clients.
  void set_relay(int node, transport::relay_fn relay);
  /// Node `node` crashes: its listeners vanish, its links break (peers hear
  /// of it after a latency), and nothing more is delivered to it.
  void detach(int node);
  bool attached(int node) const;

  // --- what a node's transport does -----------------------------------------

  result<std::string> listen(int node, std::string_view name);
  result<link_id> connect(int node, std::string_view name);
  result<void> send(int node, link_id link, wire::outbound_frame frame);
  void close(int node, link_id link);

  // --- driving --------------------------------------------------------------

  std::optional<sim_time> next_event() const;
  /// Delivers every event due at or before `now`.
  void deliver_due(sim_time now);

  // --- faults -----------------------------------------------------------------

  void reset_random_link();
  void clog_random_link(sim_duration how_long);
  /// Cuts `side` off from every other node (one way only when
  /// `symmetric` is false: `side` can still send). Returns a handle.
  std::uint64_t partition(const std::set<int>& side, bool symmetric);
  /// Cuts the path between `a` and `b` both ways; each still reaches
  /// every other node (so a third can relay). Returns a handle for heal().
  std::uint64_t cut_pair(int a, int b);
  void heal(std::uint64_t partition);
  /// Frames between `a` and `b`, both ways, take `extra` longer. Returns
  /// a handle for heal_pair().
  std::uint64_t slow_pair(int a, int b, sim_duration extra);
  /// Frames between `a` and `b`, both ways, are each lost with `loss_pm` ‰
  /// and sent again after a retransmission timeout, as TCP recovers lost
  /// segments: they arrive late, in order, once. Returns a handle.
  std::uint64_t lossy_pair(int a, int b, std::uint32_t loss_pm);
  /// Ends the slow_pair() or lossy_pair() of `handle`, unless a newer one
  /// on the same pair replaced it.
  void heal_pair(std::uint64_t handle);
  /// Ends every partition and clog and stops frame-level faults.
  void heal_all();

  std::size_t open_links() const noexcept { return links_.size(); }
  /// Frames a lossy pair delayed by a retransmission since the start.
  std::uint64_t retransmitted() const noexcept { return retransmitted_; }

 private:
  enum class event_kind : std::uint8_t { up, frame, down };
  struct end_ref {
    int node = -1;
    link_id id = 0;
  };
  struct sim_link {
    end_ref ends[2];            // [0] connected, [1] accepted
    sim_duration latency[2];    // one way, from end i to end 1-i
    sim_time next_free[2];      // FIFO: earliest next delivery towards end 1-i
    sim_time clogged_until[2];
    std::deque<wire::outbound_frame> held[2];  // frames waiting out a partition
    bool delivered[2] = {false, false};        // end i passed a frame to its sink
    bool fast_offered[2] = {false, false};     // end i's frames go to its fast path first (a client's link)
  };
  struct event {
    event_kind kind;
    int node;                   // receiving node
    std::uint64_t incarnation;  // of the receiving node when scheduled
    link_id link;               // the receiver's id for the link
    std::uint64_t serial;       // the link (frames only)
    std::string peer;           // up
    wire::outbound_frame frame; // frame
    error reason{errc::unavailable, ""};  // down
  };
  struct node_state {
    transport::link_sink* sink = nullptr;
    transport::fast_path_fn fast;
    transport::relay_fn relay;
    std::uint64_t incarnation = 0;
    std::uint64_t next_link = 1;
    bool alive = false;
  };

  sim_time now() const { return now_(); }
  sim_duration draw_latency();
  link_id new_link_id(int node);
  void schedule(sim_time at, event ev);
  void schedule_frame(std::uint64_t serial, int from_end, wire::outbound_frame frame, bool faults);
  void break_link(std::uint64_t serial, int closer_end, const error& closer_reason,
                  const error& peer_reason);
  bool blocked(int from, int to) const;
  std::uint64_t cut(std::vector<std::pair<int, int>> pairs);
  /// The extra delay of a frame from `from` to `to` (pair faults).
  sim_duration pair_delay(int from, int to);
  void hold_in_flight(std::uint64_t serial, int from_end);
  void release_held();
  void deliver(event& ev);
  std::optional<std::uint64_t> find_link(int node, link_id id) const;

  rng random_;
  fault_plan plan_;
  trace& trace_;
  std::function<sim_time()> now_;
  bool frame_faults_ = true;

  std::vector<node_state> nodes_;
  std::map<std::string, int, std::less<>> listeners_;
  std::map<std::uint64_t, sim_link> links_;             // by serial
  std::map<std::pair<int, link_id>, std::uint64_t> ends_;
  std::map<std::pair<sim_time, std::uint64_t>, event> events_;  // by (time, sequence)
  std::uint64_t next_serial_ = 1;
  std::uint64_t next_sequence_ = 1;
  std::map<std::uint64_t, std::vector<std::pair<int, int>>> partitions_;  // handle → cut pairs
  std::map<std::pair<int, int>, int> cut_;  // (from, to) → partitions cutting it
  std::uint64_t next_partition_ = 1;
  struct pair_fault {
    std::uint64_t handle = 0;
    sim_duration extra{0};
    std::uint32_t loss_pm = 0;
  };
  std::map<std::pair<int, int>, pair_fault> pair_faults_;  // (lower node, higher node)
  std::uint64_t retransmitted_ = 0;
};

}  // namespace sluice::sim
