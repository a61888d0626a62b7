// The owner actor's part of RPC (docs/rpc.md): the instances its clients
// serve, calls it routes to them or to other owners, pool buffers for
// large arguments and results, and what it tells the master. Calls
// between two of its shared-memory clients usually bypass all this (the
// poller relays them, rpc_relay.hpp); this is the path for everything
// else, and the same routing table decides for both.
#pragma once

#include "actors/owner/owner_state.hpp"

namespace sluice::owner_detail {

/// An RPC message from a client or another owner.
void serve_rpc(self_ptr self, const request_context& ctx, wire::rpc& msg, shared_bytes payload);
/// `link` went down: its instances go, calls relayed to it fail with
/// `unavailable`, calls from it are cancelled at their handlers.
void rpc_link_down(self_ptr self, transport::link_id link, const error& reason);
/// This owner (re)registered with the master: the master hears every
/// instance again.
void rpc_registered(self_ptr self);
/// Periodic work: sessions of serving clients, relays past their
/// deadline, lookups of names in use before what is known expires.
void rpc_tick(self_ptr self);

}  // namespace sluice::owner_detail
