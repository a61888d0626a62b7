#include "actors/common/actor_sink.hpp"

#include <caf/message.hpp>
#include <caf/send.hpp>

#include "actors/common/atoms.hpp"
#include "runtime/assert.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {

void actor_sink::bind(caf::actor target) {
  SLUICE_ASSERT(target);
  std::lock_guard guard{mutex_};
  SLUICE_ASSERT(!target_);
  target_ = std::move(target);
  for (auto& msg : early_) caf::anon_send(target_, std::move(msg));
  early_.clear();
}

result<void> actor_sink::deliver(caf::message msg) {
  std::lock_guard guard{mutex_};
  release_held_locked();
  return deliver_locked(std::move(msg));
}

result<void> actor_sink::deliver_locked(caf::message msg) {
  if (target_) {
    SLUICE_ASSERT(early_.empty());
    caf::anon_send(target_, std::move(msg));
    return {};
  }
  if (early_.size() >= early_messages_max) {
    log_->warn("an event for the node's actor was dropped: {} arrived before the actor was bound",
               early_messages_max);
    return fail(errc::overloaded, "the node is starting and holds too many events already");
  }
  early_.push_back(std::move(msg));
  SLUICE_ASSERT(early_.size() <= early_messages_max);
  return {};
}

// One message for every frame held: the actor takes a wake-up's frames in
// one go, and the transport's thread enqueues once instead of per frame.
void actor_sink::release_held_locked() {
  if (held_.empty()) return;
  if (held_.size() == 1) {
    auto& item = held_.front();
    (void)deliver_locked(caf::make_message(inbound_atom::value, item.link, std::move(item.msg)));
  } else {
    (void)deliver_locked(caf::make_message(inbound_batch_atom::value, std::move(held_)));
  }
  held_.clear();
}

void actor_sink::on_link_up(transport::link_id link, const std::string& peer) {
  (void)deliver(caf::make_message(link_up_atom::value, link, peer));
}

result<void> actor_sink::on_frame(transport::link_id link, wire::inbound_frame frame) {
  auto msg = wire::decode(std::move(frame));
  if (!msg) {
    // The transport logs the close with this reason; one line per bad link.
    log_->debug("link {:#x}: undecodable frame: {}", link, msg.error().to_string());
    return std::move(msg).error();
  }
  return deliver(caf::make_message(inbound_atom::value, link, std::move(*msg)));
}

result<void> actor_sink::on_frame_held(transport::link_id link, wire::inbound_frame frame) {
  auto msg = wire::decode(std::move(frame));
  if (!msg) {
    log_->debug("link {:#x}: undecodable frame: {}", link, msg.error().to_string());
    return std::move(msg).error();
  }
  std::lock_guard guard{mutex_};
  held_.push_back(inbound_item{link, std::move(*msg)});
  return {};
}

result<void> actor_sink::on_message(transport::link_id link, wire::message msg) {
  return deliver(caf::make_message(inbound_atom::value, link, std::move(msg)));
}

result<void> actor_sink::on_message_held(transport::link_id link, wire::message msg) {
  std::lock_guard guard{mutex_};
  held_.push_back(inbound_item{link, std::move(msg)});
  return {};
}

void actor_sink::end_of_frames() {
  std::lock_guard guard{mutex_};
  release_held_locked();
}

void actor_sink::on_link_down(transport::link_id link, const error& reason) {
  (void)deliver(caf::make_message(link_down_atom::value, link, reason));
}

}  // namespace sluice
