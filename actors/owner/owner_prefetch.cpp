// MQ payloads fetched ahead of their reads (docs/mq.md, "Payloads are
// fetched ahead"). The master names to the owner a consumer reads through
// the payloads of the messages it will be handed next that lie on other
// owners (mq_prefetch); the owner fetches each into its pool, as a read
// would, and keeps it for that read. The consumer's get then finds it
// here, or finds it on its way and waits for it: each payload crosses to
// this host once, while the consumer is busy with the messages before it.
//
// Nothing prefetched is registered with the master: it is no copy, only
// bytes waiting for one read, let go after that read or after
// prefetch_keep. Bounded by prefetched_max entries and [owner]
// mq_prefetch bytes, those on their way included.
//
// Invariants (asserted): prefetched_bytes is the sum of the sizes of the
// entries; an entry has readers waiting only while its bytes are not
// here, and bytes only once here.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice::owner_detail {
namespace {

/// Takes the entry out, its bytes with it.
void forget(owner_state& st, decltype(owner_state::prefetched)::iterator it) {
  SLUICE_ASSERT(st.prefetched_bytes >= it->second.size);
  st.prefetched_bytes -= it->second.size;
  st.prefetched.erase(it);
}

/// The fetch of `key` ended: waiting reads get the bytes (the first one
/// takes the entry with it), or the error, and the master its answer.
void landed(self_ptr self, const std::string& key, std::uint64_t version, result<fetched_value> got,
            std::function<void(result<void>)> answer) {
  auto& st = self->state;
  auto it = st.prefetched.find(key);
  if (it == st.prefetched.end() || it->second.version != version || it->second.here) {
    // Let go meanwhile (the key was read another way, or expired): the
    // bytes go with `got`.
    return answer(error{errc::aborted, "the prefetch was let go before it landed"});
  }
  auto& entry = it->second;
  auto readers = std::move(entry.readers);
  entry.readers.clear();
  if (!got) {
    forget(st, it);
    for (auto& r : readers) r(got.error());
    return answer(got.error());
  }
  SLUICE_ASSERT(got->bytes.size() == entry.size);
  if (!readers.empty()) {
    // Read while on its way: handed over, nothing kept.
    auto bytes = got->bytes;
    forget(st, it);
    for (auto& r : readers) r(bytes);
    return answer(result<void>{});
  }
  entry.here = true;
  entry.bytes = std::move(got->bytes);
  entry.until = st.ep->now() + prefetch_keep;
  answer(result<void>{});
}

}  // namespace

void serve_mq_prefetch(self_ptr self, const request_context& ctx, const wire::mq_prefetch& p) {
  auto& st = self->state;
  auto answer = [self, ctx](result<void> ok) {
    if (!ok) return self->state.ep->reply_error(ctx, ok.error());
    self->state.ep->reply(ctx, wire::ok_reply{});
  };
  if (!st.registered || ctx.source != st.master_id) {
    return answer(error{errc::invalid_argument, "prefetches are the master's to ask for"});
  }
  if (st.cfg.mq_prefetch_bytes == 0) return answer(error{errc::unavailable, "this owner prefetches nothing ([owner] mq_prefetch = 0)"});
  if (st.store->get(p.payload, p.version)) return answer(result<void>{});  // a copy is here already
  if (auto it = st.prefetched.find(p.payload); it != st.prefetched.end()) {
    if (it->second.version == p.version) return answer(result<void>{});  // here, or on its way
    if (!it->second.here) return answer(error{errc::aborted, "another version of the payload is on its way here"});
    forget(st, it);  // another version: the key moved on
  }
  if (st.prefetched.size() >= prefetched_max || p.size > st.cfg.mq_prefetch_bytes - st.prefetched_bytes) {
    return answer(error{errc::overloaded, "this owner holds " + format_size(st.prefetched_bytes) +
                                              " of prefetched payloads; [owner] mq_prefetch allows " +
                                              format_size(st.cfg.mq_prefetch_bytes)});
  }
  SLUICE_ASSERT(st.prefetched_bytes + p.size <= st.cfg.mq_prefetch_bytes);
  st.prefetched.emplace(p.payload, prefetched_payload{p.version, p.size, false, {}, {}, {}});
  st.prefetched_bytes += p.size;
  fetch_from_holders(self, p.holders, p.payload, p.version, p.size, ctx.deadline,
                     [self, key = p.payload, version = p.version, answer](result<fetched_value> got) {
                       landed(self, key, version, std::move(got), answer);
                     });
}

bool take_prefetched(self_ptr self, const std::string& key, std::uint64_t version,
                     std::function<void(result<shared_bytes>)> done) {
  auto& st = self->state;
  auto it = st.prefetched.find(key);
  if (it == st.prefetched.end()) return false;
  auto& entry = it->second;
  if (entry.version != version) {
    // The read found another version: this one is of no use to anyone.
    if (entry.here) forget(st, it);
    return false;
  }
  if (entry.here) {
      SLUICE_ASSERT(entry.readers.empty());
    auto bytes = std::move(entry.bytes);
    forget(st, it);
    done(std::move(bytes));
    return true;
  }
  if (entry.readers.size() >= prefetch_readers_max) return false;
  entry.readers.push_back(std::move(done));
  return true;
}

void expire_prefetched(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  std::uint64_t total = 0;
  for (auto it = st.prefetched.begin(); it != st.prefetched.end();) {
    auto next = std::next(it);
    SLUICE_ASSERT(!it->second.here || it->second.readers.empty());
    if (it->second.here && it->second.until <= now) {
      st.ep->log()->debug("mq: prefetched payload '{}' was not read within {} s; let go", it->first,
                          prefetch_keep.count());
      forget(st, it);
    } else {
      total += it->second.size;
    }
    it = next;
  }
  SLUICE_ASSERT(total == st.prefetched_bytes);
}

}  // namespace sluice::owner_detail
