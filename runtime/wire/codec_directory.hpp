// The object directory part of the decode boundary (codec.cpp dispatches to
// it): placements, commits, locations, removals, slots, evictions, extra
// copies and inventories. Internal to runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

/// Writes `x` as the body's member of its kind.
void write_member(schema::Envelope::Body::Builder b, const place& x);
void write_member(schema::Envelope::Body::Builder b, const place_reply& x);
void write_member(schema::Envelope::Body::Builder b, const commit& x);
void write_member(schema::Envelope::Body::Builder b, const abort_put& x);
void write_member(schema::Envelope::Body::Builder b, const locate& x);
void write_member(schema::Envelope::Body::Builder b, const locate_reply& x);
void write_member(schema::Envelope::Body::Builder b, const remove_key& x);
void write_member(schema::Envelope::Body::Builder b, const remove_key_reply& x);
void write_member(schema::Envelope::Body::Builder b, const drop& x);
void write_member(schema::Envelope::Body::Builder b, const invalidate& x);
void write_member(schema::Envelope::Body::Builder b, const commit_reply& x);
void write_member(schema::Envelope::Body::Builder b, const evict& x);
void write_member(schema::Envelope::Body::Builder b, const evict_reply& x);
void write_member(schema::Envelope::Body::Builder b, const add_replica& x);
void write_member(schema::Envelope::Body::Builder b, const add_replica_reply& x);
void write_member(schema::Envelope::Body::Builder b, const inventory& x);
void write_member(schema::Envelope::Body::Builder b, const inventory_reply& x);
void write_member(schema::Envelope::Body::Builder b, const claim& x);
void write_member(schema::Envelope::Body::Builder b, const claim_reply& x);
void write_member(schema::Envelope::Body::Builder b, const owner_commits& x);
void write_member(schema::Envelope::Body::Builder b, const owner_commits_reply& x);
void write_member(schema::Envelope::Body::Builder b, const barrier& x);
void write_member(schema::Envelope::Body::Builder b, const flushed& x);
void write_member(schema::Envelope::Body::Builder b, const repair_copy& x);
/// REQUIRES: `b` holds one of the members written above (read_body
/// in codec.cpp sends it no other).
result<body> read_directory(schema::Envelope::Body::Reader b);

}  // namespace sluice::wire
