// The message-queue part of the decode boundary (codec.cpp does the rest):
// the members of the schema's Mq union to and from wire::mq. Internal to
// runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

void write_mq(schema::Mq::Builder b, const mq& msg);
/// Fails with `protocol` for a member this build does not know and for an
/// enum value (full policy, start, settle kind) out of its pinned range.
result<mq> read_mq(schema::Mq::Reader r);

}  // namespace sluice::wire
