// The membership part of the decode boundary (codec.cpp dispatches to it):
// hello, ping and the plain replies, and an owner's registration, heartbeats
// and leave. Internal to runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

/// Writes `x` as the body's member of its kind.
void write_member(schema::Envelope::Body::Builder b, const hello& x);
void write_member(schema::Envelope::Body::Builder b, const error_reply& x);
void write_member(schema::Envelope::Body::Builder b, const ok_reply& x);
void write_member(schema::Envelope::Body::Builder b, const register_owner& x);
void write_member(schema::Envelope::Body::Builder b, const register_owner_reply& x);
void write_member(schema::Envelope::Body::Builder b, const heartbeat& x);
void write_member(schema::Envelope::Body::Builder b, const heartbeat_reply& x);
void write_member(schema::Envelope::Body::Builder b, const ping& x);
void write_member(schema::Envelope::Body::Builder b, const leave& x);
/// REQUIRES: `b` holds one of the members written above (read_body
/// in codec.cpp sends it no other).
result<body> read_membership(schema::Envelope::Body::Reader b);

}  // namespace sluice::wire
