// endpoint: one role actor's view of its links. It greets peers (hello),
// remembers who is at the other end of each link, sends requests with
// deadlines and routes replies back to the code that asked, and fails
// what is pending on a link the moment the link goes down.
//
// Single-threaded: it lives in an actor's state and is used only from that
// actor's handlers. Time comes from the actor clock; timeouts are driven
// by one sweep message scheduled for the earliest deadline.
//
// Invariants (asserted):
//   1. a request that waits for its reply has an id other than 0 and goes
//      out with a deadline other than 0 (0 on the wire means "none"), at
//      most max_request_timeout away; a request's handler runs once, after
//      the request left the table;
//   2. while requests wait, a sweep is armed no later than the earliest
//      of their deadlines;
//   3. frames are held only while a flush_atom is queued: held_links_ is
//      empty unless flush_queued_; a flush never runs inside an inbound
//      batch, and batches never nest;
//   4. a link's repeat windows go with the link: after link_down none is
//      left for it;
//   5. requests and notifications reach the role, replies never do; a
//      request's context gives the handler more than 0 and at most
//      max_request_timeout to answer;
//   6. a reply received into a slot carries exactly the slot's bytes.
#pragma once

#include <caf/actor_clock.hpp>
#include <caf/local_actor.hpp>
#include <caf/fwd.hpp>

#include <bitset>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "actors/client/request_table.hpp"
#include "actors/common/atoms.hpp"
#include "actors/common/replay_window.hpp"
#include "runtime/assert.hpp"
#include "runtime/buggify.hpp"
#include "runtime/log.hpp"
#include "runtime/wire/messages.hpp"
#include "transports/transport.hpp"

namespace sluice {

using clock_time = caf::actor_clock::time_point;
using clock_duration = caf::actor_clock::duration_type;
static_assert(std::is_same_v<clock_time, request_time>, "requests are timed by the actor clock");

/// Bound on the deadline of any request, including one whose sender gave
/// none: nothing waits forever.
inline constexpr std::chrono::seconds max_request_timeout{300};

struct peer_info {
  node_id id;
  role peer_role = role::unknown;
  std::string name;
  std::string listen_address;  ///< where the peer accepts links ("" if none)
  std::string link_address;    ///< the other end of this link, as the transport saw it
  bool greeted = false;        ///< its hello arrived
  clock_time last_heard{};     ///< when the last frame arrived from it
};

/// What a handler needs to answer a request.
struct request_context {
  transport::link_id link = 0;
  std::uint64_t request_id = 0;  ///< 0: a notification, nothing to answer
  node_id source;
  clock_time deadline;           ///< when the requester stops waiting
};

/// Receives the reply to a request: the message, or the error it carried,
/// or `timeout` / `unavailable` when none came.
using reply_handler = std::function<void(result<wire::message>)>;

/// Like reply_handler, and also told whether the failure (if any) was the
/// path's rather than the addressee's: no reply before the deadline, the
/// link lost or unusable, or a relay that could not forward the request.
/// A link manager demotes a path on those, never on an error the
/// addressee itself answered.
using path_reply_handler = std::function<void(result<wire::message>, bool path_failed)>;

/// How a request travels, beyond the link it goes on.
struct request_options {
  /// The node the request is for when it is not the link's peer: the peer
  /// is a relay and forwards it (0: the peer itself).
  node_id target;
  /// Where the reply's payload goes: straight from the socket when the
  /// transport can (transport::expect_payload), else copied there on
  /// arrival. A reply whose payload has another size fails with
  /// `protocol`; the reply then carries the slot's bytes as its payload.
  std::optional<transport::receive_slot> into;
};

class endpoint {
 public:
  struct identity {
    node_id id;
    role node_role = role::unknown;
    std::string name;
    std::string listen_address;
  };
  /// Asks the owning actor to send itself a sweep_atom after `delay`.
  using sweep_scheduler = std::function<void(clock_duration delay)>;

  /// `self`, `net` and `faults` (when not null) must outlive the endpoint
  /// (the node that owns the actor owns them).
  endpoint(caf::local_actor* self, transport::transport& net, identity me, logger_ptr log,
           sweep_scheduler schedule_sweep, fault_sites* faults = nullptr);

  // --- link events, forwarded by the actor's handlers ----------------------

  /// Records the link and greets the peer (unless connect() did).
  void link_up(transport::link_id link, const std::string& peer_address);
  /// Consumes hellos, pings and replies. Returns the message when it is a request
  /// or notification for the role to handle.
  std::optional<wire::message> inbound(transport::link_id link, wire::message msg);
  /// Forgets the link and fails its pending requests with `unavailable`.
  /// Returns what was known about the peer, if anything.
  std::optional<peer_info> link_down(transport::link_id link, const error& reason);
  /// Fails every request whose deadline has passed with `timeout`.
  void sweep();

  // --- sending ------------------------------------------------------------

  /// Opens a link and queues our hello on it; requests may follow at once.
  result<transport::link_id> connect(std::string_view address);
  void close(transport::link_id link);
  /// Sends a request; `on_reply` runs exactly once, from this actor.
  /// Both forms return the request's id while it waits for its reply, 0
  /// when it already finished (on_reply ran: the deadline had passed, or
  /// it could not be sent).
  std::uint64_t request(transport::link_id link, wire::body body, shared_bytes payload,
                        clock_time deadline, reply_handler on_reply);
  std::uint64_t request(transport::link_id link, wire::body body, shared_bytes payload,
                        clock_time deadline, const request_options& options, path_reply_handler on_reply);
  /// Sends a frame of another node on (a relay's forwarding): its
  /// envelope as it is, but for the hops it is given.
  void forward(transport::link_id link, const wire::envelope& env, shared_bytes payload);
  /// Frames that arrive for another node (a target that is neither 0 nor
  /// this node) go to `forwarder` instead of the role; without one they
  /// are handled as if they were for this node.
  using forwarder = std::function<void(transport::link_id, wire::message)>;
  void set_forwarder(forwarder f) { forwarder_ = std::move(f); }
  /// Sends a notification; `target` as in request_options (0: the link's peer).
  void notify(transport::link_id link, wire::body body, shared_bytes payload = {}, node_id target = {});
  void reply(const request_context& ctx, wire::body body, shared_bytes payload = {});
  void reply_error(const request_context& ctx, const error& err);
  /// Writes the frames held while the actor was busy (on flush_atom).
  void flush();
  /// Takes a batch of frames (inbound_batch_atom) as inbound() takes each,
  /// in order, and hands each request or notification to `serve(link,
  /// message)`. What is sent meanwhile is held as when the mailbox is not
  /// empty: the replies to a batch go out together.
  template <class Serve>
  void inbound_batch(std::vector<inbound_item>& batch, Serve&& serve) {
    SLUICE_ASSERT(!in_batch_);
    in_batch_ = true;
    for (auto& item : batch) {
      if (auto request = inbound(item.link, std::move(item.msg))) serve(item.link, std::move(*request));
    }
    in_batch_ = false;
  }
  /// Every request and notification sent from now on carries `stamp()`
  /// as its envelope's `after` (an owner names its own commits so far).
  void set_stamp(std::function<std::uint64_t()> stamp) { stamp_ = std::move(stamp); }

  // --- queries --------------------------------------------------------------

  request_context context_of(transport::link_id link, const wire::message& msg) const;
  const peer_info* peer(transport::link_id link) const;
  /// Node ids of the greeted peers in `r` heard from since `heard_since`,
  /// sorted, each once.
  std::vector<std::uint64_t> peers_in_role(role r, clock_time heard_since = clock_time::min()) const;
  /// The link to a greeted peer with this id, if there is one.
  std::optional<transport::link_id> link_to(node_id id) const;
  clock_time now() const { return self_->clock().now(); }
  const identity& me() const { return me_; }
  const logger_ptr& log() const { return log_; }
  fault_sites* faults() const { return faults_; }
  std::size_t pending_count() const { return requests_.size(); }

 private:
  struct pending_request {
    transport::link_id link;
    path_reply_handler on_reply;
    node_id target;  ///< 0: the link's peer
    std::optional<transport::receive_slot> into;
  };

  void greet(transport::link_id link);
  /// Sends a frame; while more messages wait in the actor's mailbox the
  /// transport may hold it, and a flush_atom queued behind them writes
  /// everything held at once.
  result<void> send_frame(transport::link_id link, wire::outbound_frame frame);
  void send_envelope(transport::link_id link, wire::envelope env, shared_bytes payload);
  void deliver_reply(wire::message msg);
  /// The reply's payload in the slot the request gave, or why not.
  static result<void> place_payload(wire::message& msg, const transport::receive_slot& into);
  void finish(std::uint64_t id, result<wire::message> outcome, bool path_failed = false);
  void arm_sweep(clock_time deadline);

  caf::local_actor* self_;
  caf::scheduled_actor* scheduled_;  // self_, when it has a mailbox to look at
  transport::transport& net_;
  identity me_;
  logger_ptr log_;
  sweep_scheduler schedule_sweep_;
  fault_sites* faults_;
  std::map<transport::link_id, peer_info> peers_;
  // Per link and sender: a relay's link carries requests of many senders;
  // and per the top bit of the id: an owner's RPC relay passes calls of
  // other clients on under ids of its own with that bit set, on the same
  // link (rpc_routes.hpp). Each sender's ids grow, not the two together.
  std::map<std::tuple<transport::link_id, std::uint64_t, bool>, replay_window> requests_seen_;
  forwarder forwarder_;
  request_table<pending_request> requests_{max_pending_requests};
  std::optional<clock_time> sweep_at_;
  std::set<transport::link_id> held_links_;
  bool flush_queued_ = false;
  bool in_batch_ = false;
  std::function<std::uint64_t()> stamp_;
};

/// `delay`, or (at a fault site) a good deal more: timers in the real world
/// fire late when a machine is loaded.
clock_duration timer_delay(fault_sites* faults, clock_duration delay);

/// The reply's body as T; the error the reply carried; or `protocol` when
/// the peer answered with another kind of message.
template <class T>
result<T> reply_body(result<wire::message>& reply) {
  if (!reply) return reply.error();
  if (auto* body = std::get_if<T>(&reply->env.body)) return std::move(*body);
  return error{errc::protocol, "unexpected reply: " + std::string{wire::body_name(reply->env.body)}};
}

/// Microseconds from `now` until `deadline`, at least 1 when not yet past
/// (a deadline of 0 on the wire means "none").
std::uint64_t remaining_us(clock_time now, clock_time deadline);

}  // namespace sluice
