// The messages every role actor understands: link events from its
// transports, request timeouts, and a clean stop. Roles extend it.
#pragma once

#include <string>
#include <vector>

#include <caf/typed_actor.hpp>

#include "actors/common/atoms.hpp"
#include "transports/transport.hpp"

namespace sluice {

using node_actor = caf::typed_actor<
    caf::reacts_to<link_up_atom, transport::link_id, std::string>,
    caf::reacts_to<inbound_atom, transport::link_id, wire::message>,
    caf::reacts_to<inbound_batch_atom, std::vector<inbound_item>>,
    caf::reacts_to<link_down_atom, transport::link_id, error>,
    caf::reacts_to<sweep_atom>,
    caf::reacts_to<flush_atom>,
    caf::replies_to<stop_atom>::with<bool>>;

}  // namespace sluice
