// The owner's RPC relay: a call from one client of this owner to another
// passes from the caller's ring to the handler's ring on the shm poller's
// thread, and its answer passes back, without the owner actor (design.md,
// "Hot path"; docs/rpc.md, "How a call travels"). Everything the relay
// cannot do alone — a name it does not know well enough, an instance on
// another owner, a cancel of a call it did not relay — goes to the owner
// actor as usual, which routes by the same table (rpc_routes).
//
// Plain code with no I/O and no clock of its own, like fast_path.hpp.
//
// Invariants (asserted):
//   1. a call goes on to its handler under a relay id, which has
//      rpc_relay_bit set: the handler's answer comes back through the
//      relay, never into the owner actor's request table;
//   2. whatever goes back to a caller answers its own request, whose id
//      is never 0 (a frame with reply_to 0 would read as a request).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>

#include "actors/owner/rpc_routes.hpp"
#include "runtime/node_id.hpp"
#include "transports/transport.hpp"

namespace sluice {

/// What to do with `frame`, which arrived on `from` (a greeted client
/// link of the owner `self`): relay it (or drop it), or nothing to pass
/// it on to the owner actor.
std::optional<transport::relayed_frame> relay_rpc(rpc_routes& routes, node_id self, transport::link_id from,
                                                  const wire::inbound_frame& frame,
                                                  std::chrono::steady_clock::time_point now);

/// relay_rpc as its transports run it, on the routes of `self` with the
/// owner actor's clock. REQUIRES: routes and now set.
transport::relay_fn make_relay_hook(std::shared_ptr<rpc_routes> routes, node_id self,
                                    std::function<std::chrono::steady_clock::time_point()> now);

}  // namespace sluice
