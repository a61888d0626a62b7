// actor_sink: the link_sink that turns transport events into messages for
// a node's role actor. Decoding happens here, on the transport's thread,
// so the actor receives checked wire::message values; a malformed frame is
// logged and refused, and the transport closes that link.
//
// Invariants (asserted):
//   1. the sink is bound once, to an actor;
//   2. events that arrive before bind wait in early_, at most
//      early_messages_max of them, and early_ is empty from bind on.
#pragma once

#include <mutex>
#include <variant>
#include <vector>

#include <caf/actor.hpp>
#include <caf/message.hpp>

#include "actors/common/atoms.hpp"
#include "runtime/log.hpp"
#include "transports/transport.hpp"

namespace sluice {

class actor_sink final : public transport::link_sink {
 public:
  explicit actor_sink(logger_ptr log) : log_(std::move(log)) {}

  /// Sets the actor that receives events. Events that arrive earlier (a
  /// role may open links from its init, which can run before whoever
  /// spawned it calls bind) are held and delivered in order on bind.
  /// REQUIRES: called once.
  void bind(caf::actor target);

  void on_link_up(transport::link_id link, const std::string& peer) override;
  result<void> on_frame(transport::link_id link, wire::inbound_frame frame) override;
  result<void> on_frame_held(transport::link_id link, wire::inbound_frame frame) override;
  result<void> on_message(transport::link_id link, wire::message msg) override;
  result<void> on_message_held(transport::link_id link, wire::message msg) override;
  void end_of_frames() override;
  void on_link_down(transport::link_id link, const error& reason) override;

  /// Sends `msg` to the actor (held until bind, like link events). Any
  /// thread.
  void post(caf::message msg) { (void)deliver(std::move(msg)); }

  /// Events held before bind(): a node binds its actor right after it
  /// spawns it, so only what its init set off arrives earlier. Beyond
  /// this a frame is refused with `overloaded` (its link closes) and any
  /// other event is dropped with a log line.
  static constexpr std::size_t early_messages_max = 1 << 14;

 private:
  result<void> deliver(caf::message msg);
  result<void> deliver_locked(caf::message msg);
  void release_held_locked();

  logger_ptr log_;
  std::mutex mutex_;
  caf::actor target_;                 // guarded by mutex_
  std::vector<caf::message> early_;   // guarded by mutex_; empty once bound; early_messages_max at most
  std::vector<inbound_item> held_;    // guarded by mutex_: decoded, not yet sent
};

}  // namespace sluice
