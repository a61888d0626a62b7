#include "actors/common/endpoint.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include <caf/actor_cast.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/send.hpp>

#include "actors/common/atoms.hpp"
#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {

namespace {

/// max_request_timeout in microseconds, the unit of deadlines on the wire.
constexpr std::uint64_t max_request_timeout_us =
    std::chrono::duration_cast<std::chrono::microseconds>(max_request_timeout).count();

}  // namespace

std::uint64_t remaining_us(clock_time now, clock_time deadline) {
  if (deadline <= now) return 0;
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
  return us < 1 ? 1 : static_cast<std::uint64_t>(us);
}

clock_duration timer_delay(fault_sites* faults, clock_duration delay) {
  if (SLUICE_BUGGIFY(faults)) return delay * 3 + std::chrono::milliseconds{250};
  return delay;
}

endpoint::endpoint(caf::local_actor* self, transport::transport& net, identity me,
                   logger_ptr log, sweep_scheduler schedule_sweep, fault_sites* faults)
    : self_(self),
      scheduled_(dynamic_cast<caf::scheduled_actor*>(self)),
      net_(net),
      me_(std::move(me)),
      log_(std::move(log)),
      schedule_sweep_(std::move(schedule_sweep)),
      faults_(faults) {}

void endpoint::link_up(transport::link_id link, const std::string& peer_address) {
  auto [it, inserted] = peers_.try_emplace(link);
  it->second.link_address = peer_address;
  // Links this node opened were greeted in connect(), ahead of any request.
  if (inserted) greet(link);
}

std::optional<wire::message> endpoint::inbound(transport::link_id link, wire::message msg) {
  auto it = peers_.find(link);
  if (it == peers_.end()) return std::nullopt;  // link already forgotten
  auto& peer = it->second;
  peer.last_heard = now();
  if (auto* h = std::get_if<wire::hello>(&msg.env.body)) {
    if (h->version != wire::protocol_version) {
      log_->warn("link {:#x} to {}: closing it: peer speaks protocol {} (this node speaks {})",
                 link, peer.link_address, h->version, wire::protocol_version);
      net_.close(link);
      return std::nullopt;
    }
    peer.id = msg.env.source;
    peer.peer_role = h->sender_role;
    peer.name = h->name;
    peer.listen_address = h->listen_address;
    peer.greeted = true;
    return std::nullopt;
  }
  if (!peer.greeted) {
    log_->warn("link {:#x} to {}: closing it: {} arrived before hello", link,
               peer.link_address, wire::body_name(msg.env.body));
    net_.close(link);
    return std::nullopt;
  }
  if (forwarder_ && msg.env.target.value != 0 && msg.env.target != me_.id) {
    forwarder_(link, std::move(msg));
    return std::nullopt;
  }
  if (msg.env.reply_to != 0) {
    deliver_reply(std::move(msg));
    return std::nullopt;
  }
  // Request ids grow per sender. An owner's link may carry requests it
  // relays for other owners; anyone else's carries only its own, whatever
  // source it claims (so a client cannot make the table grow). An owner's
  // RPC relay passes calls of other clients on under ids of its own with
  // the top bit set, on the same link (rpc_routes.hpp): those grow apart.
  auto sender = peer.peer_role == role::owner ? msg.env.source.value : peer.id.value;
  bool relayed = (msg.env.request_id >> 63) != 0;
  if (msg.env.request_id != 0 && !requests_seen_[{link, sender, relayed}].first_time(msg.env.request_id)) {
    log_->debug("link {:#x}: request {} arrived twice; served once", link, msg.env.request_id);
    return std::nullopt;
  }
  if (std::holds_alternative<wire::ping>(msg.env.body)) {
    // A one-way ping is a keepalive: hearing it was the point.
    if (msg.env.request_id != 0) reply(context_of(link, msg), wire::ok_reply{});
    return std::nullopt;
  }
  SLUICE_ASSERT(msg.env.reply_to == 0);
  return msg;
}

std::optional<peer_info> endpoint::link_down(transport::link_id link, const error& reason) {
  std::optional<peer_info> gone;
  if (auto it = peers_.find(link); it != peers_.end()) {
    gone = std::move(it->second);
    peers_.erase(it);
  }
  requests_seen_.erase(requests_seen_.lower_bound({link, 0, false}),
                       requests_seen_.upper_bound({link, std::numeric_limits<std::uint64_t>::max(), true}));
  auto left = requests_seen_.lower_bound({link, 0, false});
  SLUICE_ASSERT(left == requests_seen_.end() || std::get<0>(left->first) != link);
  for (auto id : requests_.ids_where([link](const pending_request& p) { return p.link == link; })) {
    finish(id, error{errc::unavailable, "link lost before the reply came: " + reason.to_string()}, true);
  }
  return gone;
}

void endpoint::sweep() {
  sweep_at_.reset();
  auto now_ = now();
  while (auto id = requests_.first_expired(now_)) {
    finish(*id, error{errc::timeout, "no reply before the deadline"}, true);
  }
  if (auto next = requests_.next_deadline()) {
    arm_sweep(*next);
    SLUICE_ASSERT(sweep_at_.has_value());
    SLUICE_ASSERT(*sweep_at_ <= *next);
  }
}

result<transport::link_id> endpoint::connect(std::string_view address) {
  auto link = net_.connect(address);
  if (!link) return link;
  // Greet at once: the hello is queued ahead of whatever the caller sends
  // next, so the peer always learns who we are first.
  peers_[*link].link_address = std::string{address};
  greet(*link);
  return link;
}

void endpoint::greet(transport::link_id link) {
  notify(link, wire::hello{me_.node_role, wire::protocol_version, me_.name, me_.listen_address});
}

void endpoint::close(transport::link_id link) { net_.close(link); }

std::uint64_t endpoint::request(transport::link_id link, wire::body body, shared_bytes payload,
                                clock_time deadline, reply_handler on_reply) {
  return request(link, std::move(body), std::move(payload), deadline, request_options{},
                 [on_reply = std::move(on_reply)](result<wire::message> reply, bool) { on_reply(std::move(reply)); });
}

std::uint64_t endpoint::request(transport::link_id link, wire::body body, shared_bytes payload,
                                clock_time deadline, const request_options& options, path_reply_handler on_reply) {
  auto now_ = now();
  auto cap = now_ + std::chrono::duration_cast<clock_duration>(max_request_timeout);
  if (deadline > cap) deadline = cap;
  if (deadline <= now_) {
    on_reply(error{errc::timeout, "the deadline passed before the request was sent"}, false);
    return 0;
  }
  if (requests_.full()) {
    on_reply(error{errc::overloaded, "too many requests in flight on this node"}, false);
    return 0;
  }
  auto opened = requests_.open(deadline, pending_request{link, std::move(on_reply), options.target, options.into});
  SLUICE_ASSERT(opened.ok());
  auto id = *opened;
  SLUICE_ASSERT(id != 0);
  wire::envelope env;
  env.request_id = id;
  env.source = me_.id;
  env.target = options.target;
  env.deadline_us = remaining_us(now_, deadline);
  SLUICE_ASSERT(env.deadline_us != 0);
  SLUICE_ASSERT(env.deadline_us <= max_request_timeout_us);
  if (stamp_) env.after = stamp_();
  env.body = std::move(body);
  arm_sweep(deadline);
  SLUICE_ASSERT(sweep_at_.has_value());
  SLUICE_ASSERT(*sweep_at_ <= deadline);
  // Posted before the request leaves, so the reply can never come first.
  if (options.into) net_.expect_payload(link, id, *options.into);
  // Fault site: the request is lost on the way; the deadline catches it.
  if (SLUICE_BUGGIFY(faults_)) return id;
  auto sent = send_frame(link, wire::encode(env, std::move(payload)));
  if (!sent) {
    finish(id, std::move(sent).error(), sent.code() == errc::unavailable);
    return 0;
  }
  return id;
}

void endpoint::forward(transport::link_id link, const wire::envelope& env, shared_bytes payload) {
  send_envelope(link, env, std::move(payload));
}

void endpoint::notify(transport::link_id link, wire::body body, shared_bytes payload, node_id target) {
  wire::envelope env;
  env.source = me_.id;
  env.target = target;
  if (stamp_) env.after = stamp_();
  env.body = std::move(body);
  send_envelope(link, std::move(env), std::move(payload));
}

void endpoint::reply(const request_context& ctx, wire::body body, shared_bytes payload) {
  if (ctx.request_id == 0) return;  // a notification: nobody waits
  wire::envelope env;
  env.reply_to = ctx.request_id;
  env.source = me_.id;
  env.target = ctx.source;
  env.body = std::move(body);
  send_envelope(ctx.link, std::move(env), std::move(payload));
}

void endpoint::reply_error(const request_context& ctx, const error& err) {
  reply(ctx, wire::error_reply{err.code(), err.message()});
}

request_context endpoint::context_of(transport::link_id link, const wire::message& msg) const {
  request_context ctx;
  ctx.link = link;
  ctx.request_id = msg.env.request_id;
  ctx.source = msg.env.source;
  auto budget = msg.env.deadline_us == 0
                    ? std::chrono::duration_cast<std::chrono::microseconds>(max_request_timeout)
                    : std::chrono::microseconds{msg.env.deadline_us};
  if (budget > max_request_timeout) budget = max_request_timeout;
  SLUICE_ASSERT(budget.count() > 0);
  SLUICE_ASSERT(budget <= max_request_timeout);
  ctx.deadline = now() + std::chrono::duration_cast<clock_duration>(budget);
  return ctx;
}

const peer_info* endpoint::peer(transport::link_id link) const {
  auto it = peers_.find(link);
  return it == peers_.end() ? nullptr : &it->second;
}

std::optional<transport::link_id> endpoint::link_to(node_id id) const {
  for (auto& [link, info] : peers_) {
    if (info.greeted && info.id == id) return link;
  }
  return std::nullopt;
}

void endpoint::send_envelope(transport::link_id link, wire::envelope env, shared_bytes payload) {
  // Fault site: a reply or notification is lost on the way. Hellos always
  // go out: a link whose greeting is lost is simply broken, and breaking
  // links is the network's job in the simulator.
  if (!std::holds_alternative<wire::hello>(env.body) && SLUICE_BUGGIFY(faults_)) return;
  auto sent = send_frame(link, wire::encode(env, std::move(payload)));
  if (!sent) {
    log_->debug("link {:#x}: {} not sent: {}", link, wire::body_name(env.body),
                sent.error().to_string());
  }
}

result<void> endpoint::send_frame(transport::link_id link, wire::outbound_frame frame) {
  if (!in_batch_ && (scheduled_ == nullptr || scheduled_->mailbox().empty())) return net_.send(link, std::move(frame));
  auto held = net_.send_held(link, std::move(frame));
  if (!held) return std::move(held).error();
  if (!*held) return {};
  held_links_.insert(link);
  if (!flush_queued_) {
    flush_queued_ = true;
    caf::anon_send(caf::actor_cast<caf::actor>(self_), flush_atom::value);
  }
  SLUICE_ASSERT(flush_queued_);
  return {};
}

void endpoint::flush() {
  // A flush_atom is a message of its own: it never runs inside a batch,
  // whose replies go out together after it.
  SLUICE_ASSERT(!in_batch_);
  SLUICE_ASSERT(flush_queued_ || held_links_.empty());
  flush_queued_ = false;
  for (auto link : held_links_) net_.flush(link);
  held_links_.clear();
}

std::vector<std::uint64_t> endpoint::peers_in_role(role r, clock_time heard_since) const {
  std::vector<std::uint64_t> out;
  for (auto& [link, p] : peers_) {
    if (p.greeted && p.peer_role == r && p.last_heard >= heard_since) out.push_back(p.id.value);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void endpoint::deliver_reply(wire::message msg) {
  auto id = msg.env.reply_to;
  SLUICE_ASSERT(id != 0);
  auto* found = requests_.find(id);
  if (found == nullptr) {
    log_->debug("reply to request {} came after it finished; dropped", id);
    return;
  }
  auto& p = *found;
  if (auto* e = std::get_if<wire::error_reply>(&msg.env.body)) {
    // An answer from someone else than the addressee is a relay's: it
    // could not pass the request on, so the path failed, not the request.
    bool from_relay = p.target.value != 0 && msg.env.source != p.target;
    finish(id, error{e->code, e->message}, from_relay);
    return;
  }
  if (p.into) {
    if (auto placed = place_payload(msg, *p.into); !placed) {
      finish(id, std::move(placed).error());
      return;
    }
  }
  finish(id, std::move(msg));
}

result<void> endpoint::place_payload(wire::message& msg, const transport::receive_slot& into) {
  if (msg.payload.size() != into.bytes.size()) {
    return fail(errc::protocol, "the reply carries " + std::to_string(msg.payload.size()) +
                                    " payload bytes where " + std::to_string(into.bytes.size()) +
                                    " were asked for");
  }
  // The transport received it in place, or could not: then it moves here.
  if (msg.payload.data() != into.bytes.data() && !into.bytes.empty()) {
    std::memcpy(into.bytes.data(), msg.payload.data(), into.bytes.size());
  }
  msg.payload = into.frozen();
  SLUICE_ASSERT(msg.payload.size() == into.bytes.size());
  return {};
}

void endpoint::finish(std::uint64_t id, result<wire::message> outcome, bool path_failed) {
  auto p = requests_.close(id);
  if (!p) return;
  // Closed before its handler runs: whatever the handler does, nothing
  // can finish this request a second time.
  SLUICE_ASSERT(requests_.find(id) == nullptr);
  // The transport no longer needs to keep the slot for a reply that may
  // still come: whoever waited has stopped waiting.
  if (p->into) net_.forget_payload(p->link, id);
  p->on_reply(std::move(outcome), path_failed);
}

void endpoint::arm_sweep(clock_time deadline) {
  if (sweep_at_ && *sweep_at_ <= deadline) return;
  sweep_at_ = deadline;
  auto delay = deadline - now();
  schedule_sweep_(delay < clock_duration::zero() ? clock_duration::zero() : delay);
}

}  // namespace sluice
