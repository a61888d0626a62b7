// The data part of the decode boundary (codec.cpp dispatches to it): values
// moving between owners and the RDMA queue pairs and leases their one-sided
// reads use. Internal to runtime/wire: it names Cap'n Proto types.
#pragma once

#include "runtime/wire/messages.hpp"
#include "sluice.capnp.h"
#include "sluice/result.hpp"

namespace sluice::wire {

/// Writes `x` as the body's member of its kind.
void write_member(schema::Envelope::Body::Builder b, const fetch& x);
void write_member(schema::Envelope::Body::Builder b, const fetch_reply& x);
void write_member(schema::Envelope::Body::Builder b, const store& x);
void write_member(schema::Envelope::Body::Builder b, const fetch_range& x);
void write_member(schema::Envelope::Body::Builder b, const rdma_connect& x);
void write_member(schema::Envelope::Body::Builder b, const rdma_connect_reply& x);
void write_member(schema::Envelope::Body::Builder b, const rdma_lease& x);
void write_member(schema::Envelope::Body::Builder b, const rdma_release& x);
/// REQUIRES: `b` holds one of the members written above (read_body
/// in codec.cpp sends it no other).
result<body> read_transfer(schema::Envelope::Body::Reader b);

}  // namespace sluice::wire
