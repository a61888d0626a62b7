#include "sim/network.hpp"

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice::sim {
namespace {

// Trace event kinds folded by the network.
constexpr std::uint64_t trace_up = 1;
constexpr std::uint64_t trace_frame = 2;
constexpr std::uint64_t trace_down = 3;
constexpr std::uint64_t trace_dropped = 4;

std::string address_of(std::string_view name) { return "sim://" + std::string{name}; }

}  // namespace

network::network(rng random, fault_plan plan, trace& events)
    : random_(random), plan_(std::move(plan)), trace_(events) {}

// --- nodes -------------------------------------------------------------------

void network::attach(int node, transport::link_sink* sink) {
  if (node >= static_cast<int>(nodes_.size())) nodes_.resize(static_cast<std::size_t>(node) + 1);
  auto& n = nodes_[static_cast<std::size_t>(node)];
  n.sink = sink;
  n.incarnation += 1;
  n.next_link = 1;
  n.alive = true;
}

void network::detach(int node) {
  auto& n = nodes_.at(static_cast<std::size_t>(node));
  n.alive = false;
  n.sink = nullptr;
  n.fast = nullptr;
  n.relay = nullptr;
  std::erase_if(listeners_, [node](const auto& entry) { return entry.second == node; });
  std::vector<std::uint64_t> broken;
  for (auto& [serial, link] : links_) {
    if (link.ends[0].node == node || link.ends[1].node == node) broken.push_back(serial);
  }
  error gone{errc::unavailable, "the peer's process died"};
  for (auto serial : broken) {
    int end = links_.at(serial).ends[0].node == node ? 0 : 1;
    break_link(serial, end, gone, gone);
  }
}

void network::set_fast_path(int node, transport::fast_path_fn fast) {
  nodes_.at(static_cast<std::size_t>(node)).fast = std::move(fast);
}

void network::set_relay(int node, transport::relay_fn relay) {
  nodes_.at(static_cast<std::size_t>(node)).relay = std::move(relay);
}

bool network::attached(int node) const {
  return node < static_cast<int>(nodes_.size()) && nodes_[static_cast<std::size_t>(node)].alive;
}

// --- transport operations ----------------------------------------------------

result<std::string> network::listen(int node, std::string_view name) {
  if (!attached(node)) return fail(errc::unavailable, "this node is down");
  if (listeners_.contains(name)) {
    return fail(errc::conflict, "sim address '" + std::string{name} + "' is taken");
  }
  listeners_.emplace(std::string{name}, node);
  return std::string{name};
}

link_id network::new_link_id(int node) {
  auto& n = nodes_.at(static_cast<std::size_t>(node));
  return transport::make_link_id(1, n.next_link++);
}

result<link_id> network::connect(int node, std::string_view name) {
  if (!attached(node)) return fail(errc::unavailable, "this node is down");
  auto id = new_link_id(node);
  auto& from = nodes_.at(static_cast<std::size_t>(node));
  auto target = listeners_.find(name);
  if (target == listeners_.end() || blocked(node, target->second) || blocked(target->second, node)) {
    // Refused at once when nobody listens; silence until a timeout when a
    // partition swallows the handshake.
    bool refused = target == listeners_.end();
    auto at = now() + (refused ? draw_latency() * 2 : connect_timeout);
    std::string why = refused ? "connection to " + address_of(name) + " refused"
                              : "connection to " + address_of(name) + " timed out";
    schedule(at, event{event_kind::down, node, from.incarnation, id, 0, {}, {},
                       error{refused ? errc::unavailable : errc::timeout, why}});
    return id;
  }
  int peer = target->second;
  auto peer_id = new_link_id(peer);
  auto serial = next_serial_++;
  sim_link link;
  link.ends[0] = {node, id};
  link.ends[1] = {peer, peer_id};
  link.latency[0] = draw_latency();
  link.latency[1] = draw_latency();
  // The acceptor hears of the link after one trip, the connector after two.
  auto accepted_at = now() + link.latency[0];
  auto connected_at = accepted_at + link.latency[1];
  link.next_free[0] = accepted_at;
  link.next_free[1] = connected_at;
  link.clogged_until[0] = link.clogged_until[1] = sim_time{};
  links_.emplace(serial, std::move(link));
  ends_[{node, id}] = serial;
  ends_[{peer, peer_id}] = serial;
  auto& to = nodes_.at(static_cast<std::size_t>(peer));
  schedule(accepted_at, event{event_kind::up, peer, to.incarnation, peer_id, serial,
                              fmt::format("sim:node-{}", node), {}, {errc::unavailable, ""}});
  schedule(connected_at, event{event_kind::up, node, from.incarnation, id, serial,
                               address_of(name), {}, {errc::unavailable, ""}});
  return id;
}

result<void> network::send(int node, link_id link, wire::outbound_frame frame) {
  auto serial = find_link(node, link);
  if (!serial) return fail(errc::unavailable, fmt::format("sim link {:#x} is not open", link));
  auto& l = links_.at(*serial);
  int from_end = l.ends[0].node == node && l.ends[0].id == link ? 0 : 1;
  if (blocked(node, l.ends[1 - from_end].node)) {
    l.held[from_end].push_back(std::move(frame));
    return {};
  }
  schedule_frame(*serial, from_end, std::move(frame), frame_faults_);
  return {};
}

void network::close(int node, link_id link) {
  auto serial = find_link(node, link);
  if (!serial) return;
  auto& l = links_.at(*serial);
  int end = l.ends[0].node == node && l.ends[0].id == link ? 0 : 1;
  break_link(*serial, end, error{errc::aborted, "closed locally"},
             error{errc::unavailable, "peer closed the link"});
}

// --- driving ------------------------------------------------------------------

std::optional<sim_time> network::next_event() const {
  if (events_.empty()) return std::nullopt;
  return events_.begin()->first.first;
}

void network::deliver_due(sim_time now) {
  while (!events_.empty() && events_.begin()->first.first <= now) {
    auto ev = std::move(events_.begin()->second);
    events_.erase(events_.begin());
    deliver(ev);
  }
}

void network::deliver(event& ev) {
  auto& n = nodes_.at(static_cast<std::size_t>(ev.node));
  if (!n.alive || n.incarnation != ev.incarnation) return;  // sent to a node that died since
  switch (ev.kind) {
    case event_kind::up:
      if (!links_.contains(ev.serial)) return;  // broke before it came up
      trace_.add(now(), trace_up, static_cast<std::uint64_t>(ev.node), ev.link, 0,
                 [&] { return fmt::format("{} node {} link {:#x} up", format_time(now()), ev.node, ev.link); });
      n.sink->on_link_up(ev.link, ev.peer);
      return;
    case event_kind::down:
      trace_.add(now(), trace_down, static_cast<std::uint64_t>(ev.node), ev.link,
                 static_cast<std::uint64_t>(ev.reason.code()), [&] {
                   return fmt::format("{} node {} link {:#x} down: {}", format_time(now()), ev.node,
                                      ev.link, ev.reason.to_string());
                 });
      n.sink->on_link_down(ev.link, ev.reason);
      return;
    case event_kind::frame: break;
  }
  if (!links_.contains(ev.serial)) {
    trace_.add(now(), trace_dropped, static_cast<std::uint64_t>(ev.node), ev.link, 0, [&] {
      return fmt::format("{} frame to node {} lost with its link", format_time(now()), ev.node);
    });
    return;
  }
  auto& head = ev.frame.head;
  auto digest = hash_bytes(head.data(), head.size(), hash_bytes(ev.frame.payload.data(), ev.frame.payload.size()));
  trace_.add(now(), trace_frame, static_cast<std::uint64_t>(ev.node), ev.link, digest, [&] {
    return fmt::format("{} frame of {} bytes to node {} on link {:#x} (digest {:016x})",
                       format_time(now()), ev.frame.size(), ev.node, ev.link, digest);
  });
  // What a receiving transport does: check the header against the limits,
  // then hand over the envelope (a slice of the head) and the payload —
  // to the node's fast path first, when it has one, as an owner's poller.
  auto header = wire::parse_frame_header(head.span().first<wire::frame_header_bytes>(), wire::frame_limits{});
  wire::inbound_frame inbound{head.slice(wire::frame_header_bytes, head.size() - wire::frame_header_bytes),
                              ev.frame.payload};
  auto& link = links_.at(ev.serial);
  int end = link.ends[0].node == ev.node && link.ends[0].id == ev.link ? 0 : 1;
  if (header && n.relay && link.delivered[end]) {
    if (auto routed = n.relay(ev.link, inbound)) {
      // Passed on from this node over its link `to`, as if the node sent
      // it (a link that is gone loses it, as the real poller does).
      if (routed->to != 0) (void)send(ev.node, routed->to, std::move(routed->frame));
      return;
    }
  }
  std::optional<wire::message> decoded;
  if (header && n.fast && !link.delivered[end]) {
    // The hello, decoded once to learn whether the link is a client's
    // (transport::offers_fast_path), as a real transport does.
    if (auto hello = wire::decode(inbound); hello) {
      link.fast_offered[end] = transport::offers_fast_path(*hello);
      decoded = std::move(*hello);
    }
  } else if (header && n.fast && link.fast_offered[end]) {
    if (auto taken = n.fast(ev.link, inbound, decoded)) {
      if (taken->reply) schedule_frame(ev.serial, end, std::move(*taken->reply), frame_faults_);
      return;
    }
  }
  link.delivered[end] = true;
  result<void> taken = !header   ? result<void>{header.error()}
                       : decoded ? n.sink->on_message(ev.link, std::move(*decoded))
                                 : n.sink->on_frame(ev.link, std::move(inbound));
  if (!taken) {
    auto serial = ev.serial;
    auto& l = links_.at(serial);
    int end = l.ends[0].node == ev.node && l.ends[0].id == ev.link ? 0 : 1;
    break_link(serial, end, taken.error(), error{errc::unavailable, "peer closed the link"});
  }
}

// --- internals -------------------------------------------------------------------

sim_duration network::draw_latency() {
  auto span = static_cast<std::uint64_t>((plan_.latency_max - plan_.latency_min).count());
  return plan_.latency_min + sim_duration{static_cast<sim_duration::rep>(random_.uniform(span + 1))};
}

void network::schedule(sim_time at, event ev) {
  events_.emplace(std::make_pair(at, next_sequence_++), std::move(ev));
}

void network::schedule_frame(std::uint64_t serial, int from_end, wire::outbound_frame frame, bool faults) {
  auto& l = links_.at(serial);
  auto to = l.ends[1 - from_end];
  auto& target = nodes_.at(static_cast<std::size_t>(to.node));
  if (faults && random_.chance(plan_.drop_pm, 1000)) return;
  auto jitter_span = static_cast<std::uint64_t>(plan_.jitter_max.count());
  auto at = now() + l.latency[from_end] +
            sim_duration{static_cast<sim_duration::rep>(random_.uniform(jitter_span + 1))} +
            pair_delay(l.ends[from_end].node, to.node);
  bool overtake = faults && random_.chance(plan_.reorder_pm, 1000);
  if (!overtake) at = std::max(at, l.next_free[from_end]);
  at = std::max(at, l.clogged_until[from_end]);
  if (!overtake) l.next_free[from_end] = at;
  if (faults && random_.chance(plan_.duplicate_pm, 1000)) {
    auto later = at + l.latency[from_end];
    schedule(later, event{event_kind::frame, to.node, target.incarnation, to.id, serial, {}, frame,
                          {errc::unavailable, ""}});
  }
  schedule(at, event{event_kind::frame, to.node, target.incarnation, to.id, serial, {},
                     std::move(frame), {errc::unavailable, ""}});
}

void network::break_link(std::uint64_t serial, int closer_end, const error& closer_reason,
                         const error& peer_reason) {
  auto it = links_.find(serial);
  if (it == links_.end()) return;
  auto ends = it->second;  // copy: the link goes now
  auto latency = it->second.latency[closer_end];
  links_.erase(it);
  for (auto& e : ends.ends) ends_.erase({e.node, e.id});
  auto& closer = nodes_.at(static_cast<std::size_t>(ends.ends[closer_end].node));
  auto& peer = nodes_.at(static_cast<std::size_t>(ends.ends[1 - closer_end].node));
  if (closer.alive) {
    schedule(now(), event{event_kind::down, ends.ends[closer_end].node, closer.incarnation,
                          ends.ends[closer_end].id, 0, {}, {}, closer_reason});
  }
  if (peer.alive) {
    schedule(now() + latency, event{event_kind::down, ends.ends[1 - closer_end].node,
                                    peer.incarnation, ends.ends[1 - closer_end].id, 0, {}, {},
                                    peer_reason});
  }
}

std::optional<std::uint64_t> network::find_link(int node, link_id id) const {
  auto it = ends_.find({node, id});
  if (it == ends_.end()) return std::nullopt;
  return it->second;
}

bool network::blocked(int from, int to) const { return cut_.contains({from, to}); }

sim_duration network::pair_delay(int from, int to) {
  if (pair_faults_.empty()) return sim_duration{0};
  auto it = pair_faults_.find({std::min(from, to), std::max(from, to)});
  if (it == pair_faults_.end()) return sim_duration{0};
  auto delay = it->second.extra;
  // A lost segment costs a retransmission timeout (TCP's minimum is
  // 200 ms); the frame and those behind it (FIFO) arrive that much later.
  if (it->second.loss_pm != 0 && random_.chance(it->second.loss_pm, 1000)) {
    retransmitted_ += 1;
    auto spread = static_cast<std::uint64_t>(sim_duration{800ms}.count());
    delay += 200ms + sim_duration{static_cast<sim_duration::rep>(random_.uniform(spread))};
  }
  return delay;
}

// --- faults ------------------------------------------------------------------------

void network::reset_random_link() {
  if (links_.empty()) return;
  auto it = links_.begin();
  std::advance(it, static_cast<long>(random_.uniform(links_.size())));
  error reset{errc::unavailable, "connection reset"};
  break_link(it->first, static_cast<int>(random_.uniform(2)), reset, reset);
}

void network::clog_random_link(sim_duration how_long) {
  if (links_.empty()) return;
  auto it = links_.begin();
  std::advance(it, static_cast<long>(random_.uniform(links_.size())));
  auto dir = static_cast<int>(random_.uniform(2));
  it->second.clogged_until[dir] = std::max(it->second.clogged_until[dir], now() + how_long);
}

void network::hold_in_flight(std::uint64_t serial, int from_end) {
  auto& l = links_.at(serial);
  auto to = l.ends[1 - from_end];
  // Frames already on the way stop too, and keep their order ahead of
  // anything sent during the partition.
  std::deque<wire::outbound_frame> stopped;
  for (auto it = events_.begin(); it != events_.end();) {
    auto& ev = it->second;
    if (ev.kind == event_kind::frame && ev.serial == serial && ev.node == to.node && ev.link == to.id) {
      stopped.push_back(std::move(ev.frame));
      it = events_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& f : l.held[from_end]) stopped.push_back(std::move(f));
  l.held[from_end] = std::move(stopped);
  l.next_free[from_end] = now();
}

std::uint64_t network::partition(const std::set<int>& side, bool symmetric) {
  std::vector<std::pair<int, int>> pairs;
  for (int a : side) {
    for (int b = 0; b < static_cast<int>(nodes_.size()); ++b) {
      if (side.contains(b)) continue;
      pairs.emplace_back(b, a);  // others can no longer reach the side
      if (symmetric) pairs.emplace_back(a, b);
    }
  }
  return cut(std::move(pairs));
}

std::uint64_t network::cut_pair(int a, int b) { return cut({{a, b}, {b, a}}); }

std::uint64_t network::slow_pair(int a, int b, sim_duration extra) {
  auto handle = next_partition_++;
  auto& f = pair_faults_[{std::min(a, b), std::max(a, b)}];
  f = pair_fault{handle, extra, 0};
  return handle;
}

std::uint64_t network::lossy_pair(int a, int b, std::uint32_t loss_pm) {
  auto handle = next_partition_++;
  auto& f = pair_faults_[{std::min(a, b), std::max(a, b)}];
  f = pair_fault{handle, sim_duration{0}, loss_pm};
  return handle;
}

void network::heal_pair(std::uint64_t handle) {
  std::erase_if(pair_faults_, [handle](const auto& entry) { return entry.second.handle == handle; });
}

// The pairs (from, to) can no longer reach each other: links across the
// cut break or hold their traffic until heal().
std::uint64_t network::cut(std::vector<std::pair<int, int>> cut_pairs) {
  auto handle = next_partition_++;
  auto& pairs = partitions_[handle];
  pairs = std::move(cut_pairs);
  for (auto& p : pairs) cut_[p] += 1;
  // Links across the cut: half break (the connection times out), the rest
  // hold their traffic until the partition heals.
  std::vector<std::uint64_t> serials;
  for (auto& [serial, l] : links_) serials.push_back(serial);
  error cut{errc::unavailable, "connection timed out (partition)"};
  for (auto serial : serials) {
    auto it = links_.find(serial);
    if (it == links_.end()) continue;
    for (int from_end = 0; from_end < 2 && links_.contains(serial); ++from_end) {
      auto& l = links_.at(serial);
      if (!blocked(l.ends[from_end].node, l.ends[1 - from_end].node)) continue;
      if (random_.chance(1, 2)) {
        break_link(serial, from_end, cut, cut);
      } else {
        hold_in_flight(serial, from_end);
      }
    }
  }
  return handle;
}

void network::heal(std::uint64_t handle) {
  auto it = partitions_.find(handle);
  if (it == partitions_.end()) return;
  for (auto& p : it->second) {
    if (--cut_[p] == 0) cut_.erase(p);
  }
  partitions_.erase(it);
  release_held();
}

void network::release_held() {
  for (auto& [serial, l] : links_) {
    for (int from_end = 0; from_end < 2; ++from_end) {
      if (l.held[from_end].empty() || blocked(l.ends[from_end].node, l.ends[1 - from_end].node)) continue;
      auto held = std::move(l.held[from_end]);
      l.held[from_end].clear();
      for (auto& f : held) schedule_frame(serial, from_end, std::move(f), false);
    }
  }
}

void network::heal_all() {
  partitions_.clear();
  cut_.clear();
  pair_faults_.clear();
  frame_faults_ = false;
  for (auto& [serial, l] : links_) l.clogged_until[0] = l.clogged_until[1] = sim_time{};
  release_held();
}

}  // namespace sluice::sim
