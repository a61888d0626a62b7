// The KV part of the decode boundary (codec.cpp dispatches to it): what a
// client asks its owner (puts, gets, reservations, listing, pins) and the
// answers. Internal to runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

/// Writes `x` as the body's member of its kind.
void write_member(schema::Envelope::Body::Builder b, const kv_put& x);
void write_member(schema::Envelope::Body::Builder b, const kv_put_reply& x);
void write_member(schema::Envelope::Body::Builder b, const kv_get& x);
void write_member(schema::Envelope::Body::Builder b, const kv_get_reply& x);
void write_member(schema::Envelope::Body::Builder b, const kv_remove& x);
void write_member(schema::Envelope::Body::Builder b, const kv_remove_reply& x);
void write_member(schema::Envelope::Body::Builder b, const kv_exists& x);
void write_member(schema::Envelope::Body::Builder b, const kv_exists_reply& x);
void write_member(schema::Envelope::Body::Builder b, const kv_reserve& x);
void write_member(schema::Envelope::Body::Builder b, const kv_reserve_reply& x);
void write_member(schema::Envelope::Body::Builder b, const kv_commit& x);
void write_member(schema::Envelope::Body::Builder b, const kv_abort& x);
void write_member(schema::Envelope::Body::Builder b, const list_keys& x);
void write_member(schema::Envelope::Body::Builder b, const list_keys_reply& x);
void write_member(schema::Envelope::Body::Builder b, const count_keys& x);
void write_member(schema::Envelope::Body::Builder b, const count_keys_reply& x);
void write_member(schema::Envelope::Body::Builder b, const pin& x);
void write_member(schema::Envelope::Body::Builder b, const pin_reply& x);
void write_member(schema::Envelope::Body::Builder b, const unpin& x);
void write_member(schema::Envelope::Body::Builder b, const unpin_reply& x);
/// REQUIRES: `b` holds one of the members written above (read_body
/// in codec.cpp sends it no other).
result<body> read_kv(schema::Envelope::Body::Reader b);

}  // namespace sluice::wire
