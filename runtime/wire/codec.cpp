#include "runtime/wire/codec.hpp"

#include <cstring>
#include <string>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "runtime/assert.hpp"
#include "runtime/overloaded.hpp"
#include "runtime/wire/codec_detail.hpp"
#include "runtime/wire/codec_rpc.hpp"
#include "sluice.capnp.h"

namespace sluice::wire {
namespace {

using namespace codec_detail;

template <class B>
void set_key_version(B b, const std::string& key, std::uint64_t version) {
  b.setKey(as_data(key));
  b.setVersion(version);
}

void set_replica(s::Replica::Builder b, const replica& r) {
  b.setOwner(r.owner.value);
  b.setAddress(r.address);
}

replica read_replica(s::Replica::Reader r) {
  return {node_id{r.getOwner()}, from_text(r.getAddress())};
}

void set_rdma_endpoint(s::RdmaEndpoint::Builder b, const rdma_endpoint& e) {
  b.setQpNumber(e.qp_number);
  b.setPacketSequence(e.packet_sequence);
  b.setLid(e.lid);
  b.setGid(as_data(e.gid));
}

rdma_endpoint read_rdma_endpoint(s::RdmaEndpoint::Reader r) {
  return rdma_endpoint{r.getQpNumber(), r.getPacketSequence(), r.getLid(), from_data(r.getGid())};
}

// --- encoding ---------------------------------------------------------------

void write_body(s::Envelope::Body::Builder b, const body& msg) {
  std::visit(
      overloaded{
          [&](const hello& x) {
            auto h = b.initHello();
            h.setRole(to_schema(x.sender_role));
            h.setVersion(x.version);
            h.setName(x.name);
            h.setListenAddress(x.listen_address);
          },
          [&](const error_reply& x) {
            auto e = b.initError();
            e.setCode(static_cast<std::uint16_t>(x.code));
            e.setMessage(x.message);
          },
          [&](const ok_reply&) { b.setOk(); },
          [&](const register_owner& x) {
            auto r = b.initRegisterOwner();
            r.setName(x.name);
            r.setAddress(x.address);
            r.setCapacityBytes(x.capacity_bytes);
            r.setIncarnation(x.incarnation);
            r.setEvicts(x.evicts);
            r.setCommitsFrom(x.commits_from);
          },
          [&](const register_owner_reply& x) {
            auto r = b.initRegisterOwnerReply();
            r.setHeartbeatIntervalUs(x.heartbeat_interval_us);
            r.setLeaseUs(x.lease_us);
          },
          [&](const heartbeat& x) {
            auto h = b.initHeartbeat();
            h.setUsedBytes(x.used_bytes);
            h.setObjectCount(x.object_count);
            h.setEvictions(x.evictions);
            auto list = h.initSessions(static_cast<unsigned>(x.sessions.size()));
            for (unsigned i = 0; i < x.sessions.size(); ++i) list.set(i, x.sessions[i]);
            write_links(h.initLinks(static_cast<unsigned>(x.links.size())), x.links);
          },
          [&](const heartbeat_reply& x) { b.initHeartbeatReply().setKnown(x.known); },
          [&](const place& x) {
            auto p = b.initPlace();
            p.setKey(as_data(x.key));
            p.setSize(x.size);
            p.setPreferred(x.preferred.value);
            p.setIfAbsent(x.condition.if_absent);
            p.setIfVersion(x.condition.if_version);
            p.setTtlMs(x.ttl_ms);
            p.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
            p.setPreferOwner(x.prefer_owner);
          },
          [&](const place_reply& x) {
            auto p = b.initPlaceReply();
            p.setVersion(x.version);
            set_replica(p.initTarget(), x.target);
            auto list = p.initExtra(static_cast<unsigned>(x.extra.size()));
            for (unsigned i = 0; i < x.extra.size(); ++i) set_replica(list[i], x.extra[i]);
          },
          [&](const commit& x) {
            auto c = b.initCommit();
            c.setKey(as_data(x.key));
            c.setVersion(x.version);
            c.setSize(x.size);
          },
          [&](const abort_put& x) { set_key_version(b.initAbortPut(), x.key, x.version); },
          [&](const locate& x) { b.initLocate().setKey(as_data(x.key)); },
          [&](const locate_reply& x) {
            auto l = b.initLocateReply();
            l.setVersion(x.version);
            l.setSize(x.size);
            auto list = l.initReplicas(static_cast<unsigned>(x.replicas.size()));
            for (unsigned i = 0; i < x.replicas.size(); ++i) set_replica(list[i], x.replicas[i]);
          },
          [&](const remove_key& x) {
            auto r = b.initRemoveKey();
            r.setKey(as_data(x.key));
            r.setIfVersion(x.if_version);
          },
          [&](const remove_key_reply& x) { b.setRemoveKeyReply(x.existed); },
          [&](const drop& x) { set_key_version(b.initDrop(), x.key, x.version); },
          [&](const fetch& x) { set_key_version(b.initFetch(), x.key, x.version); },
          [&](const fetch_reply& x) { b.setFetchReply(x.version); },
          [&](const store& x) {
            auto st = b.initStore();
            st.setKey(as_data(x.key));
            st.setVersion(x.version);
            st.setTtlMs(x.ttl_ms);
            st.setReplica(x.replica);
          },
          [&](const kv_put& x) {
            auto p = b.initKvPut();
            p.setKey(as_data(x.key));
            p.setIfAbsent(x.condition.if_absent);
            p.setIfVersion(x.condition.if_version);
            p.setTtlMs(x.ttl_ms);
            p.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
            p.setPreferOwner(x.prefer_owner);
          },
          [&](const kv_put_reply& x) { b.setKvPutReply(x.version); },
          [&](const kv_get& x) { b.initKvGet().setKey(as_data(x.key)); },
          [&](const kv_get_reply& x) { b.setKvGetReply(x.version); },
          [&](const kv_remove& x) {
            auto r = b.initKvRemove();
            r.setKey(as_data(x.key));
            r.setIfVersion(x.if_version);
          },
          [&](const kv_remove_reply& x) { b.setKvRemoveReply(x.existed); },
          [&](const kv_exists& x) { b.initKvExists().setKey(as_data(x.key)); },
          [&](const kv_exists_reply& x) { b.setKvExistsReply(x.exists); },
          [&](const cluster_status&) { b.setClusterStatus(); },
          [&](const cluster_status_reply& x) { write_status(b.initClusterStatusReply(), x); },
          [&](const ping&) { b.setPing(); },
          [&](const leave&) { b.setLeave(); },
          [&](const kv_reserve& x) {
            auto r = b.initKvReserve();
            r.setKey(as_data(x.key));
            r.setSize(x.size);
            r.setIfAbsent(x.condition.if_absent);
            r.setIfVersion(x.condition.if_version);
            r.setTtlMs(x.ttl_ms);
            r.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
            r.setPreferOwner(x.prefer_owner);
          },
          [&](const kv_reserve_reply& x) {
            auto r = b.initKvReserveReply();
            r.setReservation(x.reservation);
            set_pool_region(r.initWhere(), x.where);
          },
          [&](const kv_commit& x) { b.setKvCommit(x.reservation); },
          [&](const kv_abort& x) { b.setKvAbort(x.reservation); },
          [&](const invalidate& x) {
            auto i = b.initInvalidate();
            i.setKey(as_data(x.key));
            i.setGeneration(x.generation);
          },
          [&](const commit_reply& x) { b.setCommitReply(x.current); },
          [&](const list_keys& x) {
            auto l = b.initListKeys();
            l.setPrefix(as_data(x.prefix));
            l.setStartAfter(as_data(x.start_after));
            l.setLimit(x.limit);
          },
          [&](const list_keys_reply& x) {
            auto l = b.initListKeysReply();
            auto list = l.initKeys(static_cast<unsigned>(x.keys.size()));
            for (unsigned i = 0; i < x.keys.size(); ++i) {
              list[i].setKey(as_data(x.keys[i].key));
              list[i].setVersion(x.keys[i].version);
              list[i].setSize(x.keys[i].size);
            }
            l.setMore(x.more);
          },
          [&](const count_keys& x) { b.initCountKeys().setKey(as_data(x.prefix)); },
          [&](const count_keys_reply& x) { b.setCountKeysReply(x.count); },
          [&](const evict& x) { set_key_version(b.initEvict(), x.key, x.version); },
          [&](const evict_reply& x) { b.setEvictReply(x.evicted); },
          [&](const pin& x) {
            auto p = b.initPin();
            p.setKey(as_data(x.key));
            p.setTtlMs(x.ttl_ms);
            p.setSession(x.session);
          },
          [&](const pin_reply& x) { b.setPinReply(x.version); },
          [&](const unpin& x) {
            auto u = b.initUnpin();
            u.setKey(as_data(x.key));
            u.setSession(x.session);
          },
          [&](const unpin_reply& x) { b.setUnpinReply(x.was_pinned); },
          [&](const add_replica& x) { set_key_version(b.initAddReplica(), x.key, x.version); },
          [&](const add_replica_reply& x) { b.setAddReplicaReply(x.added); },
          [&](const inventory& x) {
            auto i = b.initInventory();
            i.setAfter(as_data(x.after));
            auto list = i.initEntries(static_cast<unsigned>(x.entries.size()));
            for (unsigned n = 0; n < x.entries.size(); ++n) set_key_version(list[n], x.entries[n].key, x.entries[n].version);
            i.setFinal(x.final);
          },
          [&](const inventory_reply& x) {
            auto list = b.initInventoryReply(static_cast<unsigned>(x.unknown.size()));
            for (unsigned n = 0; n < x.unknown.size(); ++n) set_key_version(list[n], x.unknown[n].key, x.unknown[n].version);
          },
          [&](const claim& x) {
            auto c = b.initClaim();
            auto list = c.initSlots(static_cast<unsigned>(x.slots.size()));
            for (unsigned n = 0; n < x.slots.size(); ++n) list.set(n, x.slots[n]);
            c.setVersions(x.versions);
          },
          [&](const claim_reply& x) {
            auto c = b.initClaimReply();
            auto list = c.initGranted(static_cast<unsigned>(x.granted.size()));
            for (unsigned n = 0; n < x.granted.size(); ++n) list.set(n, x.granted[n]);
            c.setBlockFirst(x.block_first);
            c.setBlockCount(x.block_count);
            c.setGeneration(x.generation);
          },
          [&](const owner_commits& x) {
            auto c = b.initOwnerCommits();
            c.setFirstSeq(x.first_seq);
            auto entries = c.initEntries(static_cast<unsigned>(x.entries.size()));
            for (unsigned i = 0; i < x.entries.size(); ++i) {
              entries[i].setKey(as_data(x.entries[i].key));
              entries[i].setVersion(x.entries[i].version);
              entries[i].setSize(x.entries[i].size);
            }
          },
          [&](const owner_commits_reply& x) {
            auto list = b.initOwnerCommitsReply(static_cast<unsigned>(x.refused.size()));
            for (unsigned n = 0; n < x.refused.size(); ++n) set_key_version(list[n], x.refused[n].key, x.refused[n].version);
          },
          [&](const barrier&) { b.setBarrier(); },
          [&](const flushed& x) { b.setFlushed(x.seq); },
          [&](const fetch_range& x) {
            auto f = b.initFetchRange();
            set_key_version(f, x.key, x.version);
            f.setOffset(x.offset);
            f.setLength(x.length);
            f.setRdma(x.rdma);
          },
          [&](const rpc& x) { write_rpc(b.initRpc(), x); },
          [&](const rdma_connect& x) {
            auto c = b.initRdmaConnect();
            c.setProvider(x.provider);
            set_rdma_endpoint(c.initEndpoint(), x.endpoint);
          },
          [&](const rdma_connect_reply& x) {
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
          },
          [&](const rdma_lease& x) {
            auto l = b.initRdmaLease();
            l.setLease(x.lease);
            l.setVersion(x.version);
            l.setSegment(x.where.segment);
            l.setOffset(x.where.offset);
            l.setLength(x.where.length);
            l.setAddress(x.address);
            l.setRkey(x.rkey);
            l.setLeaseUs(x.lease_us);
          },
          [&](const rdma_release& x) { b.setRdmaRelease(x.lease); },
      },
      msg);
}

// --- decoding ---------------------------------------------------------------

result<body> read_body(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::HELLO: {
      auto h = b.getHello();
      return body{hello{from_schema(h.getRole()), h.getVersion(), from_text(h.getName()),
                        from_text(h.getListenAddress())}};
    }
    case W::ERROR: {
      auto e = b.getError();
      auto code = errc_from_wire(e.getCode());
      if (code == errc::ok) return fail(errc::protocol, "error reply with code 0 (ok)");
      return body{error_reply{code, from_text(e.getMessage())}};
    }
    case W::OK: return body{ok_reply{}};
    case W::REGISTER_OWNER: {
      auto r = b.getRegisterOwner();
      return body{register_owner{from_text(r.getName()), from_text(r.getAddress()), r.getCapacityBytes(),
                                 r.getIncarnation(), r.getEvicts(), r.getCommitsFrom()}};
    }
    case W::REGISTER_OWNER_REPLY: {
      auto r = b.getRegisterOwnerReply();
      return body{register_owner_reply{r.getHeartbeatIntervalUs(), r.getLeaseUs()}};
    }
    case W::HEARTBEAT: {
      auto h = b.getHeartbeat();
      heartbeat out{h.getUsedBytes(), h.getObjectCount(), h.getEvictions(), {}, read_links(h.getLinks())};
      for (auto s : h.getSessions()) out.sessions.push_back(s);
      return body{std::move(out)};
    }
    case W::HEARTBEAT_REPLY: return body{heartbeat_reply{b.getHeartbeatReply().getKnown()}};
    case W::PLACE: {
      auto p = b.getPlace();
      return body{place{from_data(p.getKey()), p.getSize(), node_id{p.getPreferred()},
                        put_condition{p.getIfAbsent(), p.getIfVersion()}, p.getTtlMs(),
                        std::max<std::uint32_t>(p.getReplicas(), 1), from_text(p.getPreferOwner())}};
    }
    case W::PLACE_REPLY: {
      auto p = b.getPlaceReply();
      place_reply out{p.getVersion(), read_replica(p.getTarget()), {}};
      for (auto r : p.getExtra()) out.extra.push_back(read_replica(r));
      return body{std::move(out)};
    }
    case W::COMMIT: {
      auto c = b.getCommit();
      return body{commit{from_data(c.getKey()), c.getVersion(), c.getSize()}};
    }
    case W::ABORT_PUT: {
      auto a = b.getAbortPut();
      return body{abort_put{from_data(a.getKey()), a.getVersion()}};
    }
    case W::LOCATE: return body{locate{from_data(b.getLocate().getKey())}};
    case W::LOCATE_REPLY: {
      auto l = b.getLocateReply();
      locate_reply out{l.getVersion(), l.getSize(), {}};
      for (auto r : l.getReplicas()) out.replicas.push_back(read_replica(r));
      return body{std::move(out)};
    }
    case W::REMOVE_KEY: {
      auto r = b.getRemoveKey();
      return body{remove_key{from_data(r.getKey()), r.getIfVersion()}};
    }
    case W::REMOVE_KEY_REPLY: return body{remove_key_reply{b.getRemoveKeyReply()}};
    case W::DROP: {
      auto d = b.getDrop();
      return body{drop{from_data(d.getKey()), d.getVersion()}};
    }
    case W::FETCH: {
      auto f = b.getFetch();
      return body{fetch{from_data(f.getKey()), f.getVersion()}};
    }
    case W::FETCH_REPLY: return body{fetch_reply{b.getFetchReply()}};
    case W::STORE: {
      auto x = b.getStore();
      return body{store{from_data(x.getKey()), x.getVersion(), x.getTtlMs(), x.getReplica()}};
    }
    case W::KV_PUT: {
      auto p = b.getKvPut();
      return body{kv_put{from_data(p.getKey()), put_condition{p.getIfAbsent(), p.getIfVersion()}, p.getTtlMs(),
                         std::max<std::uint32_t>(p.getReplicas(), 1), from_text(p.getPreferOwner())}};
    }
    case W::KV_PUT_REPLY: return body{kv_put_reply{b.getKvPutReply()}};
    case W::KV_GET: return body{kv_get{from_data(b.getKvGet().getKey())}};
    case W::KV_GET_REPLY: return body{kv_get_reply{b.getKvGetReply()}};
    case W::KV_REMOVE: {
      auto r = b.getKvRemove();
      return body{kv_remove{from_data(r.getKey()), r.getIfVersion()}};
    }
    case W::KV_REMOVE_REPLY: return body{kv_remove_reply{b.getKvRemoveReply()}};
    case W::KV_EXISTS: return body{kv_exists{from_data(b.getKvExists().getKey())}};
    case W::KV_EXISTS_REPLY: return body{kv_exists_reply{b.getKvExistsReply()}};
    case W::CLUSTER_STATUS: return body{cluster_status{}};
    case W::CLUSTER_STATUS_REPLY: return body{read_status(b.getClusterStatusReply())};
    case W::PING: return body{ping{}};
    case W::LEAVE: return body{leave{}};
    case W::KV_RESERVE: {
      auto r = b.getKvReserve();
      return body{kv_reserve{from_data(r.getKey()), r.getSize(),
                             put_condition{r.getIfAbsent(), r.getIfVersion()}, r.getTtlMs(),
                             std::max<std::uint32_t>(r.getReplicas(), 1), from_text(r.getPreferOwner())}};
    }
    case W::KV_RESERVE_REPLY: {
      auto r = b.getKvReserveReply();
      auto w = r.getWhere();
      return body{kv_reserve_reply{r.getReservation(), pool_region{w.getSegment(), w.getOffset(), w.getLength()}}};
    }
    case W::KV_COMMIT: return body{kv_commit{b.getKvCommit()}};
    case W::KV_ABORT: return body{kv_abort{b.getKvAbort()}};
    case W::INVALIDATE: {
      auto i = b.getInvalidate();
      return body{invalidate{from_data(i.getKey()), i.getGeneration()}};
    }
    case W::COMMIT_REPLY: return body{commit_reply{b.getCommitReply()}};
    case W::LIST_KEYS: {
      auto l = b.getListKeys();
      return body{list_keys{from_data(l.getPrefix()), from_data(l.getStartAfter()), l.getLimit()}};
    }
    case W::LIST_KEYS_REPLY: {
      auto l = b.getListKeysReply();
      list_keys_reply out;
      out.more = l.getMore();
      for (auto k : l.getKeys()) out.keys.push_back(key_info{from_data(k.getKey()), k.getVersion(), k.getSize()});
      return body{std::move(out)};
    }
    case W::COUNT_KEYS: return body{count_keys{from_data(b.getCountKeys().getKey())}};
    case W::COUNT_KEYS_REPLY: return body{count_keys_reply{b.getCountKeysReply()}};
    case W::EVICT: {
      auto e = b.getEvict();
      return body{evict{from_data(e.getKey()), e.getVersion()}};
    }
    case W::EVICT_REPLY: return body{evict_reply{b.getEvictReply()}};
    case W::PIN: {
      auto p = b.getPin();
      return body{pin{from_data(p.getKey()), p.getTtlMs(), p.getSession()}};
    }
    case W::PIN_REPLY: return body{pin_reply{b.getPinReply()}};
    case W::UNPIN: {
      auto u = b.getUnpin();
      return body{unpin{from_data(u.getKey()), u.getSession()}};
    }
    case W::UNPIN_REPLY: return body{unpin_reply{b.getUnpinReply()}};
    case W::ADD_REPLICA: {
      auto a = b.getAddReplica();
      return body{add_replica{from_data(a.getKey()), a.getVersion()}};
    }
    case W::ADD_REPLICA_REPLY: return body{add_replica_reply{b.getAddReplicaReply()}};
    case W::INVENTORY: {
      auto i = b.getInventory();
      inventory out{from_data(i.getAfter()), {}, i.getFinal()};
      for (auto e : i.getEntries()) out.entries.push_back(key_version{from_data(e.getKey()), e.getVersion()});
      return body{std::move(out)};
    }
    case W::INVENTORY_REPLY: {
      inventory_reply out;
      for (auto e : b.getInventoryReply()) out.unknown.push_back(key_version{from_data(e.getKey()), e.getVersion()});
      return body{std::move(out)};
    }
    case W::CLAIM: {
      auto c = b.getClaim();
      claim out;
      for (auto slot : c.getSlots()) out.slots.push_back(slot);
      out.versions = c.getVersions();
      return body{std::move(out)};
    }
    case W::CLAIM_REPLY: {
      auto c = b.getClaimReply();
      claim_reply out;
      for (auto slot : c.getGranted()) out.granted.push_back(slot);
      out.block_first = c.getBlockFirst();
      out.block_count = c.getBlockCount();
      out.generation = c.getGeneration();
      return body{std::move(out)};
    }
    case W::OWNER_COMMITS: {
      auto c = b.getOwnerCommits();
      owner_commits out;
      out.first_seq = c.getFirstSeq();
      for (auto e : c.getEntries()) out.entries.push_back(owner_commit{from_data(e.getKey()), e.getVersion(), e.getSize()});
      return body{std::move(out)};
    }
    case W::OWNER_COMMITS_REPLY: {
      owner_commits_reply out;
      for (auto e : b.getOwnerCommitsReply()) out.refused.push_back(key_version{from_data(e.getKey()), e.getVersion()});
      return body{std::move(out)};
    }
    case W::BARRIER: return body{barrier{}};
    case W::FLUSHED: return body{flushed{b.getFlushed()}};
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
    case W::RPC: {
      auto r = read_rpc(b.getRpc());
      if (!r) return std::move(r).error();
      return body{std::move(*r)};
    }
  }
  return fail(errc::protocol, "unknown message kind " +
                                  std::to_string(static_cast<unsigned>(b.which())) +
                                  " (the peer speaks a newer protocol?)");
}

// Standard Cap'n Proto stream framing: u32 (segment count - 1), u32 size
// of each segment in words, padding to a word boundary, then the segments.
std::size_t segment_table_words(std::size_t segment_count) {
  return (4 + 4 * segment_count + 7) / 8;
}

}  // namespace

outbound_frame encode(const envelope& env, shared_bytes payload) {
  // Most envelopes fit in a first segment on the stack: no heap for the
  // builder on the hot path (it grows onto the heap when one does not).
  alignas(8) capnp::word scratch[128];
  std::memset(scratch, 0, sizeof scratch);
  capnp::MallocMessageBuilder builder{kj::arrayPtr(scratch, 128)};
  auto root = builder.initRoot<s::Envelope>();
  root.setRequestId(env.request_id);
  root.setReplyTo(env.reply_to);
  root.setSource(env.source.value);
  root.setTarget(env.target.value);
  root.setDeadlineUs(env.deadline_us);
  root.setHops(env.hops);
  root.setAfter(env.after);
  write_body(root.initBody(), env.body);

  auto segments = builder.getSegmentsForOutput();
  std::size_t words = segment_table_words(segments.size());
  for (auto seg : segments) words += seg.size();
  std::size_t envelope_bytes = words * sizeof(capnp::word);

  auto buf = byte_buffer::allocate(frame_header_bytes + envelope_bytes);
  std::memset(buf.data(), 0, buf.size());
  frame_header header{frame_version, 0, static_cast<std::uint32_t>(envelope_bytes), payload.size()};
  auto head = encode_frame_header(header);
  std::memcpy(buf.data(), head.data(), head.size());

  std::byte* out = buf.data() + frame_header_bytes;
  auto put_u32 = [&out](std::uint32_t v) {
    std::memcpy(out, &v, 4);  // x86-64 and aarch64 are little-endian, as the format
    out += 4;
  };
  put_u32(static_cast<std::uint32_t>(segments.size() - 1));
  for (auto seg : segments) put_u32(static_cast<std::uint32_t>(seg.size()));
  out = buf.data() + frame_header_bytes + segment_table_words(segments.size()) * 8;
  for (auto seg : segments) {
    std::memcpy(out, seg.begin(), seg.size() * sizeof(capnp::word));
    out += seg.size() * sizeof(capnp::word);
  }
  SLUICE_ASSERT(out == buf.data() + buf.size());
  return {std::move(buf).freeze(), std::move(payload)};
}

namespace {

kj::ArrayPtr<const capnp::word> words_of(const inbound_frame& frame) {
  SLUICE_ASSERT(reinterpret_cast<std::uintptr_t>(frame.envelope.data()) % 8 == 0);
  SLUICE_ASSERT(frame.envelope.size() % 8 == 0);
  return {reinterpret_cast<const capnp::word*>(frame.envelope.data()), frame.envelope.size() / sizeof(capnp::word)};
}

capnp::ReaderOptions reader_options(kj::ArrayPtr<const capnp::word> words) {
  capnp::ReaderOptions options;
  // A well-formed envelope is read in about one pass over its words; allow
  // some slack, never an amplification a hostile peer could exploit.
  options.traversalLimitInWords = words.size() * 4 + 64;
  options.nestingLimit = 16;
  return options;
}

/// The flat reader computes the segment count (u32 + 1) in 32 bits, so a
/// count field of 0xffffffff wraps to 0 and would be read as one segment.
result<void> check_segment_table(const inbound_frame& frame) {
  std::uint32_t last_segment = 0;
  std::memcpy(&last_segment, frame.envelope.data(), sizeof last_segment);
  if (segment_table_words(std::size_t{last_segment} + 1) > frame.envelope.size() / 8) {
    return fail(errc::protocol, "envelope segment table lists " +
                                    std::to_string(std::uint64_t{last_segment} + 1) +
                                    " segments, more than fit in " +
                                    std::to_string(frame.envelope.size()) + " bytes");
  }
  return {};
}

}  // namespace

std::optional<envelope_peek> peek(const inbound_frame& frame) {
  if (frame.envelope.size() < 8 || !check_segment_table(frame)) return std::nullopt;
  auto words = words_of(frame);
  try {
    capnp::FlatArrayMessageReader reader{words, reader_options(words)};
    auto root = reader.getRoot<s::Envelope>();
    envelope_peek out;
    out.request_id = root.getRequestId();
    out.reply_to = root.getReplyTo();
    out.source = node_id{root.getSource()};
    out.deadline_us = root.getDeadlineUs();
    if (root.getBody().which() != s::Envelope::Body::Which::RPC) return out;
    out.rpc = true;
    auto r = root.getBody().getRpc();
    switch (r.which()) {
      case s::Rpc::Which::REPLY: out.result_buffer = r.getReply(); break;
      case s::Rpc::Which::CANCEL: out.cancel = r.getCancel(); break;
      case s::Rpc::Which::CALL: {
        auto c = r.getCall();
        // A routing this build does not know: decode() says so.
        if (c.getRouting() > static_cast<std::uint8_t>(rpc_routing::least_outstanding)) break;
        auto method = c.getMethod();
        out.call = envelope_peek::call_fields{std::string_view{method.begin(), method.size()}, node_id{c.getTarget()},
                                              static_cast<rpc_routing>(c.getRouting()), c.getArgsBuffer()};
        break;
      }
      default: break;
    }
    return out;
  } catch (const kj::Exception&) {
    return std::nullopt;
  }
}

std::optional<outbound_frame> relabel(const inbound_frame& frame, const envelope_ids& ids, shared_bytes payload) {
  // The root pointer starts segment 0; a struct pointer's low 2 bits are
  // 0, then a signed 30-bit offset in words from the pointer's end, then
  // the data section's size in words. requestId, replyTo, source and
  // target are its first four words (sluice.capnp, @0..@3).
  if (!check_segment_table(frame)) return std::nullopt;
  auto bytes = frame.envelope.span();
  std::uint32_t last_segment = 0;
  std::uint32_t first_words = 0;
  std::memcpy(&last_segment, bytes.data(), 4);
  std::memcpy(&first_words, bytes.data() + 4, 4);
  auto start = segment_table_words(std::size_t{last_segment} + 1);
  if (first_words < 1 || start + first_words > bytes.size() / 8) return std::nullopt;
  std::uint64_t root = 0;
  std::memcpy(&root, bytes.data() + start * 8, 8);
  auto offset = static_cast<std::int32_t>(static_cast<std::uint32_t>(root)) >> 2;
  auto data_words = static_cast<std::uint16_t>(root >> 32);
  if ((root & 3) != 0 || offset < 0 || data_words < 4) return std::nullopt;
  auto data = start + 1 + static_cast<std::size_t>(offset);
  if (data + 4 > start + first_words) return std::nullopt;
  auto buf = byte_buffer::allocate(frame_header_bytes + bytes.size());
  auto head = encode_frame_header(
      frame_header{frame_version, 0, static_cast<std::uint32_t>(bytes.size()), payload.size()});
  std::memcpy(buf.data(), head.data(), head.size());
  auto* env = buf.data() + frame_header_bytes;
  std::memcpy(env, bytes.data(), bytes.size());
  std::memcpy(env + data * 8, &ids.request_id, 8);
  std::memcpy(env + (data + 1) * 8, &ids.reply_to, 8);
  std::memcpy(env + (data + 3) * 8, &ids.target.value, 8);
  return outbound_frame{std::move(buf).freeze(), std::move(payload)};
}

result<message> decode(inbound_frame frame) {
  auto words = words_of(frame);
  auto options = reader_options(words);
  if (auto ok = check_segment_table(frame); !ok) return ok.error();
  try {
    capnp::FlatArrayMessageReader reader{words, options};
    if (reader.getEnd() != words.end()) {
      return fail(errc::protocol, "envelope has trailing bytes after the message");
    }
    auto root = reader.getRoot<s::Envelope>();
    auto parsed_body = read_body(root.getBody());
    if (!parsed_body) return std::move(parsed_body).error();
    message out;
    out.env.request_id = root.getRequestId();
    out.env.reply_to = root.getReplyTo();
    out.env.source = node_id{root.getSource()};
    out.env.target = node_id{root.getTarget()};
    out.env.deadline_us = root.getDeadlineUs();
    out.env.hops = root.getHops();
    out.env.after = root.getAfter();
    out.env.body = std::move(*parsed_body);
    out.payload = std::move(frame.payload);
    return out;
  } catch (const kj::Exception& e) {
    return fail(errc::protocol, "malformed envelope: " + std::string{e.getDescription().cStr()});
  }
}

std::optional<std::uint64_t> peek_reply_to(std::span<const std::byte> envelope) {
  SLUICE_ASSERT(reinterpret_cast<std::uintptr_t>(envelope.data()) % 8 == 0);
  SLUICE_ASSERT(envelope.size() % 8 == 0);
  kj::ArrayPtr<const capnp::word> words{reinterpret_cast<const capnp::word*>(envelope.data()),
                                        envelope.size() / sizeof(capnp::word)};
  if (words.size() == 0) return std::nullopt;
  std::uint32_t last_segment = 0;
  std::memcpy(&last_segment, envelope.data(), sizeof last_segment);
  if (segment_table_words(std::size_t{last_segment} + 1) > words.size()) return std::nullopt;
  capnp::ReaderOptions options;
  // Only the root struct's data section is read.
  options.traversalLimitInWords = words.size() + 64;
  options.nestingLimit = 4;
  try {
    capnp::FlatArrayMessageReader reader{words, options};
    return reader.getRoot<s::Envelope>().getReplyTo();
  } catch (const kj::Exception&) {
    return std::nullopt;
  }
}

result<message> decode_bytes(std::span<const std::byte> bytes, const frame_limits& limits) {
  if (bytes.size() < frame_header_bytes) {
    return fail(errc::protocol, "frame of " + std::to_string(bytes.size()) +
                                    " bytes is shorter than its header");
  }
  auto header = parse_frame_header(bytes.first<frame_header_bytes>(), limits);
  if (!header) return std::move(header).error();
  // Compared without adding the sizes: under a payload limit near 2^64 the
  // sum could wrap and let a short frame through to the copies below.
  std::uint64_t after_header = bytes.size() - frame_header_bytes;
  if (after_header < header->envelope_bytes ||
      after_header - header->envelope_bytes != header->payload_bytes) {
    return fail(errc::protocol, "frame is " + std::to_string(bytes.size()) +
                                    " bytes but its header says " +
                                    std::to_string(frame_header_bytes) + " + " +
                                    std::to_string(header->envelope_bytes) + " + " +
                                    std::to_string(header->payload_bytes));
  }
  auto envelope = byte_buffer::allocate(header->envelope_bytes);
  std::memcpy(envelope.data(), bytes.data() + frame_header_bytes, header->envelope_bytes);
  auto payload = shared_bytes::copy_of(bytes.subspan(frame_header_bytes + header->envelope_bytes));
  return decode(inbound_frame{std::move(envelope).freeze(), std::move(payload)});
}

byte_buffer flatten(const outbound_frame& frame) {
  auto out = byte_buffer::allocate(frame.size());
  if (!frame.head.empty()) std::memcpy(out.data(), frame.head.data(), frame.head.size());
  if (!frame.payload.empty()) {
    std::memcpy(out.data() + frame.head.size(), frame.payload.data(), frame.payload.size());
  }
  return out;
}

std::string_view body_name(const body& b) noexcept {
  static constexpr std::string_view names[] = {
      "hello", "error_reply", "ok_reply",
      "register_owner", "register_owner_reply", "heartbeat", "heartbeat_reply",
      "place", "place_reply", "commit", "abort_put", "locate", "locate_reply",
      "remove_key", "remove_key_reply", "drop",
      "fetch", "fetch_reply", "store",
      "kv_put", "kv_put_reply", "kv_get", "kv_get_reply", "kv_remove",
      "kv_remove_reply", "kv_exists", "kv_exists_reply",
      "cluster_status", "cluster_status_reply", "ping", "leave",
      "kv_reserve", "kv_reserve_reply", "kv_commit", "kv_abort",
      "invalidate", "commit_reply", "list_keys", "list_keys_reply", "count_keys", "count_keys_reply", "evict", "evict_reply", "pin", "pin_reply", "unpin", "unpin_reply", "add_replica", "add_replica_reply", "inventory", "inventory_reply",
      "claim", "claim_reply", "owner_commits", "owner_commits_reply", "barrier", "flushed",
      "fetch_range", "rpc", "rdma_connect", "rdma_connect_reply", "rdma_lease", "rdma_release"};
  static_assert(std::size(names) == std::variant_size_v<body>);
  if (auto* r = std::get_if<rpc>(&b)) return rpc_body_name(r->body);
  return names[b.index()];
}

}  // namespace sluice::wire
