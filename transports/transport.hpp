// The transport interface: how a node opens links to peers, sends frames
// on them and learns what arrives. Implementations: tcp (any to any),
// inproc (roles sharing a process), and later shm, rdma, relay, and the
// simulator's network. Role code depends on this interface only; whoever
// builds a node picks the implementations.
//
// Threading: a transport may run its own I/O thread (tcp does). Every
// method here is thread-safe and never blocks on the network. Events reach
// the node through its link_sink, possibly from the transport's thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/wire/frame.hpp"
#include "runtime/wire/messages.hpp"
#include "sluice/result.hpp"

namespace sluice::transport {

/// Names one link of one node. Unique within the node for its lifetime
/// (never reused): the top 16 bits say which transport made it.
using link_id = std::uint64_t;

inline constexpr int link_tag_shift = 48;

/// The link id `sequence` of the transport tagged `tag`.
constexpr link_id make_link_id(std::uint16_t tag, std::uint64_t sequence) noexcept {
  return (std::uint64_t{tag} << link_tag_shift) | (sequence & ((std::uint64_t{1} << link_tag_shift) - 1));
}
constexpr std::uint16_t link_tag(link_id id) noexcept {
  return static_cast<std::uint16_t>(id >> link_tag_shift);
}

/// Memory a payload is received into: a region the receiver owns (a pool
/// region, usually), writable for `bytes.size()` bytes and kept alive by
/// `owner` for as long as a transport may still write into it.
struct receive_slot {
  std::shared_ptr<const void> owner;
  std::span<std::byte> bytes;
  /// The slot as the immutable bytes a frame's payload is.
  shared_bytes frozen() const { return shared_bytes{owner, bytes}; }
};

/// Where a node receives link events. Implemented by whoever builds the
/// node (it forwards to the node's actors).
///
/// REQUIRES of implementations: thread-safe, non-blocking; events of one
/// link arrive in order (up, frames..., down) and nothing follows down.
class link_sink {
 public:
  virtual ~link_sink() = default;

  /// A link is ready to carry frames: an outbound connect completed, or a
  /// peer connected to a listener. `peer` is the peer's address.
  virtual void on_link_up(link_id link, const std::string& peer) = 0;

  /// A frame arrived whose header passed the frame limits. Returns an
  /// error when the frame's envelope is malformed; the transport then
  /// closes the link (with that error in on_link_down).
  virtual result<void> on_frame(link_id link, wire::inbound_frame frame) = 0;

  /// Like on_frame, but the sink may hold the frame and hand it on with
  /// the others of the same wake-up, at end_of_frames (the transport
  /// calls that before it waits again). A sink delivers what it holds
  /// before any later event, so each link's order stays as it was.
  virtual result<void> on_frame_held(link_id link, wire::inbound_frame frame) {
    return on_frame(link, std::move(frame));
  }
  /// Like on_frame and on_frame_held, for a frame that a fast path
  /// decoded already and did not take (fast_path_fn): the message is
  /// handed on, so that nothing decodes a frame twice. Only the sinks of
  /// transports that take a fast path receive these.
  virtual result<void> on_message(link_id link, wire::message msg) {
    (void)link;
    (void)msg;
    return fail(errc::internal, "this sink takes frames only, not decoded messages");
  }
  virtual result<void> on_message_held(link_id link, wire::message msg) { return on_message(link, std::move(msg)); }
  virtual void end_of_frames() {}

  /// The link is gone (peer closed, I/O error, malformed frame, or a local
  /// close). `reason` says why. Frames still queued on it are dropped.
  virtual void on_link_down(link_id link, const error& reason) = 0;
};

class transport {
 public:
  virtual ~transport() = default;

  /// The address scheme this transport serves: "tcp", "inproc", ...
  virtual std::string_view scheme() const noexcept = 0;

  /// Starts accepting links at `address` (without the scheme prefix).
  /// Returns the address actually bound (port 0 resolved).
  virtual result<std::string> listen(std::string_view address) = 0;

  /// Opens a link to `address` (without the scheme prefix). Returns at
  /// once; on_link_up or on_link_down follows. Frames sent before the link
  /// is up are queued (within the queue bound) and go out once it is.
  virtual result<link_id> connect(std::string_view address) = 0;

  /// Queues `frame` on `link`. Fails with `unavailable` when the link is
  /// unknown or down, and `overloaded` when the link's send queue is full
  /// (`max_queued_bytes`); the frame is then not sent.
  virtual result<void> send(link_id link, wire::outbound_frame frame) = 0;
  /// Queues `frame` like send(), but may hold it until flush(link) or the
  /// next send() on the link, so that a busy sender writes many frames at
  /// once. Frames keep their order either way. Answers whether the frame
  /// is held (a flush is then due); transports that gain nothing from
  /// holding send at once and answer false.
  virtual result<bool> send_held(link_id link, wire::outbound_frame frame) {
    auto sent = send(link, std::move(frame));
    if (!sent) return std::move(sent).error();
    return false;
  }
  /// Writes the frames send_held() holds on `link`.
  virtual void flush(link_id link) { (void)link; }

  /// Asks that the payload of the reply to request `request_id`, arriving
  /// on `link`, be received straight into `slot` when its size is
  /// exactly `slot.bytes.size()`; the frame is then delivered with
  /// `slot.frozen()` as its payload. Answers whether the transport will
  /// do so; transports that cannot (and payloads of another size) deliver
  /// the payload in memory of their own, and the caller copies it. The
  /// transport keeps `slot.owner` until the reply arrived, the link went
  /// down, or forget_payload(link, request_id).
  virtual bool expect_payload(link_id link, std::uint64_t request_id, receive_slot slot) {
    (void)link;
    (void)request_id;
    (void)slot;
    return false;
  }
  /// Withdraws an expect_payload() whose reply will not be waited for. A
  /// payload already being received into the slot still lands there.
  virtual void forget_payload(link_id link, std::uint64_t request_id) {
    (void)link;
    (void)request_id;
  }

  /// Closes `link`; on_link_down(aborted) follows unless it was down
  /// already. Unknown links are ignored.
  virtual void close(link_id link) = 0;

  /// Stops all I/O and closes every link and listener. After shutdown()
  /// returns, the sink receives nothing more. Idempotent.
  virtual void shutdown() = 0;
};

/// What a fast path made of a frame it took: the reply to send, or none
/// (a repeat of a request already seen, dropped like the endpoint drops
/// repeats).
struct fast_taken {
  std::optional<wire::outbound_frame> reply;
};

/// Answers a request without the node's actors when it can (an owner's
/// fast path, see actors/owner/fast_path.hpp): returns what it made of the
/// frame, or nothing to deliver the frame as usual. Called on a
/// transport's thread for every frame after the first (the hello,
/// delivered the usual way) of a link that offers_fast_path(). Must not
/// block.
/// When it does not take the frame it may leave the message it decoded in
/// `decoded`; the transport then hands that to the sink (on_message)
/// instead of the frame.
using fast_path_fn = std::function<std::optional<fast_taken>(link_id link, const wire::inbound_frame&,
                                                             std::optional<wire::message>& decoded)>;

/// Whether a link whose first frame (its hello) decoded to `first` is
/// offered to a fast path: only a client's. Links to owners and the master
/// carry nothing a fast path answers; offering their frames would only
/// decode each of them on the transport's thread to hand it on.
inline bool offers_fast_path(const wire::message& first) {
  auto* h = std::get_if<wire::hello>(&first.env.body);
  return h != nullptr && h->sender_role == role::client;
}

/// Room for an inbound payload of `bytes` bytes that no expect_payload()
/// asked for (a put's value, a copy sent to be stored): an owner hands out
/// pool regions, so a value is received where it will live. Called on a
/// transport's I/O thread; must not block. Nothing: the transport
/// allocates memory of its own.
using payload_allocator = std::function<std::optional<receive_slot>(std::uint64_t bytes)>;

/// What a relay hook does with a frame: sends `frame` on link `to`
/// instead of delivering it; `to` 0 drops it (nothing is sent).
struct relayed_frame {
  link_id to = 0;
  wire::outbound_frame frame;
};

/// Passes a frame that arrived on link `from` straight to another link of
/// the node, without the node's actors (an owner relaying an RPC call
/// between two of its clients, see actors/owner/rpc_relay.hpp); nothing:
/// the frame goes on as usual. Called on a transport's thread, like a
/// fast_path_fn, and must not block.
using relay_fn = std::function<std::optional<relayed_frame>(link_id from, const wire::inbound_frame&)>;

/// Sends a frame that a relay hook routed to a link of another of the
/// node's transports (an RPC call from a client over TCP to a handler on
/// shared memory, and its answer back): the node's network send. Called
/// on a transport's thread; must not block (every send() writes what the
/// kernel or the ring takes and queues the rest).
using relay_onward_fn = std::function<result<void>(link_id to, wire::outbound_frame)>;

/// Bounds shared by transports.
struct transport_limits {
  wire::frame_limits frame;
  /// Bytes a link may hold queued for sending before send() answers
  /// `overloaded`; bounds memory when a peer reads slowly.
  std::uint64_t max_queued_bytes = 2ULL << 30;
};

}  // namespace sluice::transport
