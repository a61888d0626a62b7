// The RPC part of the decode boundary (codec.cpp does the rest): the
// members of the schema's Rpc union to and from wire::rpc. Internal to
// runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

void write_rpc(schema::Rpc::Builder b, const rpc& msg);
void set_pool_region(schema::PoolRegion::Builder b, const pool_region& r);
/// Fails with `protocol` for a member this build does not know.
result<rpc> read_rpc(schema::Rpc::Reader r);

}  // namespace sluice::wire
