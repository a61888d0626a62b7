// The codec's part for what a client asks its owner: puts, gets, removes,
// reservations for in-place writes, listing and pins, and their answers.
#include "runtime/wire/codec_kv.hpp"

#include <algorithm>

#include "runtime/assert.hpp"
#include "runtime/wire/codec_detail.hpp"
#include "runtime/wire/codec_rpc.hpp"

namespace sluice::wire {

using namespace codec_detail;

// --- encoding ---------------------------------------------------------------

void write_member(s::Envelope::Body::Builder b, const kv_put& x) {
  auto p = b.initKvPut();
  p.setKey(as_data(x.key));
  p.setIfAbsent(x.condition.if_absent);
  p.setIfVersion(x.condition.if_version);
  p.setTtlMs(x.ttl_ms);
  p.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
  p.setPreferOwner(x.prefer_owner);
  p.setMinReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.min_replicas, 255)));
}

void write_member(s::Envelope::Body::Builder b, const kv_put_reply& x) {
  // One copy keeps the reply every client understands.
  if (x.copies <= 1) return b.setKvPutReply(x.version);
  auto r = b.initKvPutCopies();
  r.setVersion(x.version);
  r.setCopies(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.copies, 255)));
}

void write_member(s::Envelope::Body::Builder b, const kv_get& x) { b.initKvGet().setKey(as_data(x.key)); }

void write_member(s::Envelope::Body::Builder b, const kv_get_reply& x) { b.setKvGetReply(x.version); }

void write_member(s::Envelope::Body::Builder b, const kv_remove& x) {
  auto r = b.initKvRemove();
  r.setKey(as_data(x.key));
  r.setIfVersion(x.if_version);
}

void write_member(s::Envelope::Body::Builder b, const kv_remove_reply& x) { b.setKvRemoveReply(x.existed); }

void write_member(s::Envelope::Body::Builder b, const kv_exists& x) {
  b.initKvExists().setKey(as_data(x.key));
}

void write_member(s::Envelope::Body::Builder b, const kv_exists_reply& x) { b.setKvExistsReply(x.exists); }

void write_member(s::Envelope::Body::Builder b, const kv_reserve& x) {
  auto r = b.initKvReserve();
  r.setKey(as_data(x.key));
  r.setSize(x.size);
  r.setIfAbsent(x.condition.if_absent);
  r.setIfVersion(x.condition.if_version);
  r.setTtlMs(x.ttl_ms);
  r.setReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.replicas, 255)));
  r.setPreferOwner(x.prefer_owner);
  r.setMinReplicas(static_cast<std::uint8_t>(std::min<std::uint32_t>(x.min_replicas, 255)));
}

void write_member(s::Envelope::Body::Builder b, const kv_reserve_reply& x) {
  auto r = b.initKvReserveReply();
  r.setReservation(x.reservation);
  set_pool_region(r.initWhere(), x.where);
}

void write_member(s::Envelope::Body::Builder b, const kv_commit& x) { b.setKvCommit(x.reservation); }

void write_member(s::Envelope::Body::Builder b, const kv_abort& x) { b.setKvAbort(x.reservation); }

void write_member(s::Envelope::Body::Builder b, const list_keys& x) {
  auto l = b.initListKeys();
  l.setPrefix(as_data(x.prefix));
  l.setStartAfter(as_data(x.start_after));
  l.setLimit(x.limit);
}

void write_member(s::Envelope::Body::Builder b, const list_keys_reply& x) {
  auto l = b.initListKeysReply();
  auto list = l.initKeys(static_cast<unsigned>(x.keys.size()));
  for (unsigned i = 0; i < x.keys.size(); ++i) {
    list[i].setKey(as_data(x.keys[i].key));
    list[i].setVersion(x.keys[i].version);
    list[i].setSize(x.keys[i].size);
  }
  l.setMore(x.more);
}

void write_member(s::Envelope::Body::Builder b, const count_keys& x) {
  b.initCountKeys().setKey(as_data(x.prefix));
}

void write_member(s::Envelope::Body::Builder b, const count_keys_reply& x) { b.setCountKeysReply(x.count); }

void write_member(s::Envelope::Body::Builder b, const pin& x) {
  auto p = b.initPin();
  p.setKey(as_data(x.key));
  p.setTtlMs(x.ttl_ms);
  p.setSession(x.session);
}

void write_member(s::Envelope::Body::Builder b, const pin_reply& x) { b.setPinReply(x.version); }

void write_member(s::Envelope::Body::Builder b, const unpin& x) {
  auto u = b.initUnpin();
  u.setKey(as_data(x.key));
  u.setSession(x.session);
}

void write_member(s::Envelope::Body::Builder b, const unpin_reply& x) { b.setUnpinReply(x.was_pinned); }

// --- decoding ---------------------------------------------------------------

result<body> read_kv(s::Envelope::Body::Reader b) {
  using W = s::Envelope::Body::Which;
  switch (b.which()) {
    case W::KV_PUT: {
      auto p = b.getKvPut();
      return body{kv_put{from_data(p.getKey()), put_condition{p.getIfAbsent(), p.getIfVersion()}, p.getTtlMs(),
                         std::max<std::uint32_t>(p.getReplicas(), 1), from_text(p.getPreferOwner()),
                         p.getMinReplicas()}};
    }
    case W::KV_PUT_REPLY: return body{kv_put_reply{b.getKvPutReply(), 1}};
    case W::KV_PUT_COPIES: {
      auto r = b.getKvPutCopies();
      return body{kv_put_reply{r.getVersion(), std::max<std::uint32_t>(r.getCopies(), 1)}};
    }
    case W::KV_GET: return body{kv_get{from_data(b.getKvGet().getKey())}};
    case W::KV_GET_REPLY: return body{kv_get_reply{b.getKvGetReply()}};
    case W::KV_REMOVE: {
      auto r = b.getKvRemove();
      return body{kv_remove{from_data(r.getKey()), r.getIfVersion()}};
    }
    case W::KV_REMOVE_REPLY: return body{kv_remove_reply{b.getKvRemoveReply()}};
    case W::KV_EXISTS: return body{kv_exists{from_data(b.getKvExists().getKey())}};
    case W::KV_EXISTS_REPLY: return body{kv_exists_reply{b.getKvExistsReply()}};
    case W::KV_RESERVE: {
      auto r = b.getKvReserve();
      return body{kv_reserve{from_data(r.getKey()), r.getSize(),
                             put_condition{r.getIfAbsent(), r.getIfVersion()}, r.getTtlMs(),
                             std::max<std::uint32_t>(r.getReplicas(), 1), from_text(r.getPreferOwner()),
                             r.getMinReplicas()}};
    }
    case W::KV_RESERVE_REPLY: {
      auto r = b.getKvReserveReply();
      auto w = r.getWhere();
      return body{kv_reserve_reply{r.getReservation(), pool_region{w.getSegment(), w.getOffset(), w.getLength()}}};
    }
    case W::KV_COMMIT: return body{kv_commit{b.getKvCommit()}};
    case W::KV_ABORT: return body{kv_abort{b.getKvAbort()}};
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
    default: break;
  }
  // read_body hands this function its own members only.
  SLUICE_ASSERT(false);
}

}  // namespace sluice::wire
