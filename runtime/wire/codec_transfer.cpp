// The codec's part for values moving between owners (fetch, fetch_range,
// store) and for the RDMA queue pairs and leases of one-sided reads.
#include "runtime/wire/codec_transfer.hpp"

#include "runtime/assert.hpp"
#include "runtime/wire/codec_detail.hpp"

namespace sluice::wire {
namespace {

using namespace codec_detail;

void set_rdma_endpoint(s::RdmaEndpoint::Builder b, const rdma_endpoint& e) {
  b.setQpNumber(e.qp_number);
  b.setPacketSequence(e.packet_sequence);
  b.setLid(e.lid);
  b.setGid(as_data(e.gid));
}

rdma_endpoint read_rdma_endpoint(s::RdmaEndpoint::Reader r) {
  return rdma_endpoint{r.getQpNumber(), r.getPacketSequence(), r.getLid(), from_data(r.getGid())};
}

}  // namespace

// --- encoding ---------------------------------------------------------------

void write_member(s::Envelope::Body::Builder b, const fetch& x) {
  set_key_version(b.initFetch(), x.key, x.version);
}

void write_member(s::Envelope::Body::Builder b, const fetch_reply& x) { b.setFetchReply(x.version); }

void write_member(s::Envelope::Body::Builder b, const store& x) {
  auto st = b.initStore();
  st.setKey(as_data(x.key));
  st.setVersion(x.version);
  st.setTtlMs(x.ttl_ms);
  st.setReplica(x.replica);
}

void write_member(s::Envelope::Body::Builder b, const fetch_range& x) {
  auto f = b.initFetchRange();
  set_key_version(f, x.key, x.version);
  f.setOffset(x.offset);
  f.setLength(x.length);
  f.setRdma(x.rdma);
}

void write_member(s::Envelope::Body::Builder b, const rdma_connect& x) {
  auto c = b.initRdmaConnect();
  c.setProvider(x.provider);
  set_rdma_endpoint(c.initEndpoint(), x.endpoint);
}

void write_member(s::Envelope::Body::Builder b, const rdma_connect_reply& x) {
  auto c = b.initRdmaConnectReply();
  c.setProvider(x.provider);
  set_rdma_endpoint(c.initEndpoint(), x.endpoint);
  auto list = c.initSegments(static_cast<unsigned>(x.segments.size()));
  for (unsigned i = 0; i < x.segments.size(); ++i) {
    list[i].setSegment(x.segments[i].segment);
    list[i].setAddress(x.segments[i].address);
    list[i].setLength(x.segments[i].length);
    list[i].setRkey(x.segments[i].rkey);
  }
}

void write_member(s::Envelope::Body::Builder b, const rdma_lease& x) {
  auto l = b.initRdmaLease();
  l.setLease(x.lease);
  l.setVersion(x.version);
  l.setSegment(x.where.segment);
  l.setOffset(x.where.offset);
  l.setLength(x.where.length);
  l.setAddress(x.address);
  l.setRkey(x.rkey);
  l.setLeaseUs(x.lease_us);
}

void write_member(s::Envelope::Body::Builder b, const rdma_release& x) { b.setRdmaRelease(x.lease); }

// --- decoding ---------------------------------------------------------------

result<body> read_transfer(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::FETCH: {
      auto f = b.getFetch();
      return body{fetch{from_data(f.getKey()), f.getVersion()}};
    }
    case W::FETCH_REPLY: return body{fetch_reply{b.getFetchReply()}};
    case W::STORE: {
      auto x = b.getStore();
      return body{store{from_data(x.getKey()), x.getVersion(), x.getTtlMs(), x.getReplica()}};
    }
    case W::FETCH_RANGE: {
      auto f = b.getFetchRange();
      return body{fetch_range{from_data(f.getKey()), f.getVersion(), f.getOffset(), f.getLength(), f.getRdma()}};
    }
    case W::RDMA_CONNECT: {
      auto c = b.getRdmaConnect();
      return body{rdma_connect{from_text(c.getProvider()), read_rdma_endpoint(c.getEndpoint())}};
    }
    case W::RDMA_CONNECT_REPLY: {
      auto c = b.getRdmaConnectReply();
      rdma_connect_reply out{from_text(c.getProvider()), read_rdma_endpoint(c.getEndpoint()), {}};
      for (auto g : c.getSegments()) {
        out.segments.push_back(rdma_segment{g.getSegment(), g.getAddress(), g.getLength(), g.getRkey()});
      }
      return body{std::move(out)};
    }
    case W::RDMA_LEASE: {
      auto l = b.getRdmaLease();
      return body{rdma_lease{l.getLease(), l.getVersion(), pool_region{l.getSegment(), l.getOffset(), l.getLength()},
                             l.getAddress(), l.getRkey(), l.getLeaseUs()}};
    }
    case W::RDMA_RELEASE: return body{rdma_release{b.getRdmaRelease()}};
    default: break;
  }
  // read_body hands this function its own members only.
  SLUICE_ASSERT(false);
}

}  // namespace sluice::wire
