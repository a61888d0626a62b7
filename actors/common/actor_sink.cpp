#include "actors/common/actor_sink.hpp"

#include <caf/message.hpp>
#include <caf/send.hpp>

#include "actors/common/atoms.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {

void actor_sink::bind(caf::actor target) {
  std::lock_guard guard{mutex_};
  target_ = std::move(target);
  for (auto& msg : early_) caf::anon_send(target_, std::move(msg));
  early_.clear();
}

void actor_sink::deliver(caf::message msg) {
  std::lock_guard guard{mutex_};
  if (!target_) {
    early_.push_back(std::move(msg));
    return;
  }
  caf::anon_send(target_, std::move(msg));
}

void actor_sink::on_link_up(transport::link_id link, const std::string& peer) {
  deliver(caf::make_message(link_up_atom::value, link, peer));
}

result<void> actor_sink::on_frame(transport::link_id link, wire::inbound_frame frame) {
  auto msg = wire::decode(std::move(frame));
  if (!msg) {
    // The transport logs the close with this reason; one line per bad link.
    log_->debug("link {:#x}: undecodable frame: {}", link, msg.error().to_string());
    return std::move(msg).error();
  }
  deliver(caf::make_message(inbound_atom::value, link, std::move(*msg)));
  return {};
}

void actor_sink::on_link_down(transport::link_id link, const error& reason) {
  deliver(caf::make_message(link_down_atom::value, link, reason));
}

}  // namespace sluice
