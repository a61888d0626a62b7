// The codec's part for the object directory (owner <-> master): placements,
// commits, locations, removals, slots and the owners' own commits, evictions,
// extra copies and inventories.
#include "runtime/wire/codec_directory.hpp"

#include <algorithm>

#include "runtime/assert.hpp"
#include "runtime/wire/codec_detail.hpp"

namespace sluice::wire {
namespace {

using namespace codec_detail;

}  // namespace

// --- encoding ---------------------------------------------------------------

void write_member(s::Envelope::Body::Builder b, const repair_copy& x) {
  auto r = b.initRepairCopy();
  r.setKey(as_data(x.key));
  r.setVersion(x.version);
  r.setSize(x.size);
  auto holders = r.initHolders(static_cast<unsigned>(x.holders.size()));
  for (unsigned i = 0; i < x.holders.size(); ++i) set_replica(holders[i], x.holders[i]);
}

void write_member(s::Envelope::Body::Builder b, const place& x) {
  auto p = b.initPlace();
  p.setKey(as_data(x.key));
  p.setSize(x.size);
  p.setPreferred(x.preferred.value);
  p.setIfAbsent(x.condition.if_absent);
  p.setIfVersion(x.condition.if_version);
  p.setTtlMs(x.ttl_ms);
  p.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
  p.setPreferOwner(x.prefer_owner);
  p.setMinReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.min_replicas, 255)));
}

void write_member(s::Envelope::Body::Builder b, const place_reply& x) {
  auto p = b.initPlaceReply();
  p.setVersion(x.version);
  set_replica(p.initTarget(), x.target);
  auto list = p.initExtra(static_cast<unsigned>(x.extra.size()));
  for (unsigned i = 0; i < x.extra.size(); ++i) set_replica(list[i], x.extra[i]);
}

void write_member(s::Envelope::Body::Builder b, const commit& x) {
  auto c = b.initCommit();
  c.setKey(as_data(x.key));
  c.setVersion(x.version);
  c.setSize(x.size);
}

void write_member(s::Envelope::Body::Builder b, const abort_put& x) {
  set_key_version(b.initAbortPut(), x.key, x.version);
}

void write_member(s::Envelope::Body::Builder b, const locate& x) { b.initLocate().setKey(as_data(x.key)); }

void write_member(s::Envelope::Body::Builder b, const locate_reply& x) {
  auto l = b.initLocateReply();
  l.setVersion(x.version);
  l.setSize(x.size);
  auto list = l.initReplicas(static_cast<unsigned>(x.replicas.size()));
  for (unsigned i = 0; i < x.replicas.size(); ++i) set_replica(list[i], x.replicas[i]);
}

void write_member(s::Envelope::Body::Builder b, const remove_key& x) {
  auto r = b.initRemoveKey();
  r.setKey(as_data(x.key));
  r.setIfVersion(x.if_version);
}

void write_member(s::Envelope::Body::Builder b, const remove_key_reply& x) { b.setRemoveKeyReply(x.existed); }

void write_member(s::Envelope::Body::Builder b, const drop& x) {
  set_key_version(b.initDrop(), x.key, x.version);
}

void write_member(s::Envelope::Body::Builder b, const invalidate& x) {
  auto i = b.initInvalidate();
  i.setKey(as_data(x.key));
  i.setGeneration(x.generation);
}

void write_member(s::Envelope::Body::Builder b, const commit_reply& x) { b.setCommitReply(x.current); }

void write_member(s::Envelope::Body::Builder b, const evict& x) {
  set_key_version(b.initEvict(), x.key, x.version);
}

void write_member(s::Envelope::Body::Builder b, const evict_reply& x) { b.setEvictReply(x.evicted); }

void write_member(s::Envelope::Body::Builder b, const add_replica& x) {
  set_key_version(b.initAddReplica(), x.key, x.version);
}

void write_member(s::Envelope::Body::Builder b, const add_replica_reply& x) { b.setAddReplicaReply(x.added); }

void write_member(s::Envelope::Body::Builder b, const inventory& x) {
  auto i = b.initInventory();
  i.setAfter(as_data(x.after));
  auto list = i.initEntries(static_cast<unsigned>(x.entries.size()));
  for (unsigned n = 0; n < x.entries.size(); ++n) set_key_version(list[n], x.entries[n].key, x.entries[n].version);
  i.setFinal(x.final);
}

void write_member(s::Envelope::Body::Builder b, const inventory_reply& x) {
  auto list = b.initInventoryReply(static_cast<unsigned>(x.unknown.size()));
  for (unsigned n = 0; n < x.unknown.size(); ++n) set_key_version(list[n], x.unknown[n].key, x.unknown[n].version);
}

void write_member(s::Envelope::Body::Builder b, const claim& x) {
  auto c = b.initClaim();
  auto list = c.initSlots(static_cast<unsigned>(x.slots.size()));
  for (unsigned n = 0; n < x.slots.size(); ++n) list.set(n, x.slots[n]);
  c.setVersions(x.versions);
}

void write_member(s::Envelope::Body::Builder b, const claim_reply& x) {
  auto c = b.initClaimReply();
  auto list = c.initGranted(static_cast<unsigned>(x.granted.size()));
  for (unsigned n = 0; n < x.granted.size(); ++n) list.set(n, x.granted[n]);
  c.setBlockFirst(x.block_first);
  c.setBlockCount(x.block_count);
  c.setGeneration(x.generation);
}

void write_member(s::Envelope::Body::Builder b, const owner_commits& x) {
  auto c = b.initOwnerCommits();
  c.setFirstSeq(x.first_seq);
  auto entries = c.initEntries(static_cast<unsigned>(x.entries.size()));
  for (unsigned i = 0; i < x.entries.size(); ++i) {
    entries[i].setKey(as_data(x.entries[i].key));
    entries[i].setVersion(x.entries[i].version);
    entries[i].setSize(x.entries[i].size);
    entries[i].setReplaced(x.entries[i].replaced);
  }
}

void write_member(s::Envelope::Body::Builder b, const owner_commits_reply& x) {
  auto list = b.initOwnerCommitsReply(static_cast<unsigned>(x.refused.size()));
  for (unsigned n = 0; n < x.refused.size(); ++n) set_key_version(list[n], x.refused[n].key, x.refused[n].version);
}

void write_member(s::Envelope::Body::Builder b, const barrier&) { b.setBarrier(); }

void write_member(s::Envelope::Body::Builder b, const flushed& x) { b.setFlushed(x.seq); }

// --- decoding ---------------------------------------------------------------

result<body> read_directory(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::PLACE: {
      auto p = b.getPlace();
      return body{place{from_data(p.getKey()), p.getSize(), node_id{p.getPreferred()},
                        put_condition{p.getIfAbsent(), p.getIfVersion()}, p.getTtlMs(),
                        std::max<std::uint32_t>(p.getReplicas(), 1), from_text(p.getPreferOwner()),
                        p.getMinReplicas()}};
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
    case W::INVALIDATE: {
      auto i = b.getInvalidate();
      return body{invalidate{from_data(i.getKey()), i.getGeneration()}};
    }
    case W::COMMIT_REPLY: return body{commit_reply{b.getCommitReply()}};
    case W::EVICT: {
      auto e = b.getEvict();
      return body{evict{from_data(e.getKey()), e.getVersion()}};
    }
    case W::EVICT_REPLY: return body{evict_reply{b.getEvictReply()}};
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
      for (auto e : c.getEntries()) out.entries.push_back(owner_commit{from_data(e.getKey()), e.getVersion(), e.getSize(), e.getReplaced()});
      return body{std::move(out)};
    }
    case W::OWNER_COMMITS_REPLY: {
      owner_commits_reply out;
      for (auto e : b.getOwnerCommitsReply()) out.refused.push_back(key_version{from_data(e.getKey()), e.getVersion()});
      return body{std::move(out)};
    }
    case W::BARRIER: return body{barrier{}};
    case W::FLUSHED: return body{flushed{b.getFlushed()}};
    case W::REPAIR_COPY: {
      auto r = b.getRepairCopy();
      repair_copy out{from_data(r.getKey()), r.getVersion(), r.getSize(), {}};
      for (auto h : r.getHolders()) out.holders.push_back(read_replica(h));
      return body{std::move(out)};
    }
    default: break;
  }
  // read_body hands this function its own members only.
  SLUICE_ASSERT(false);
}

}  // namespace sluice::wire
