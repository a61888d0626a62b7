// Extra copies of a version on other owners (a put with replicas > 1).
// The owner that placed the put makes them once the holder committed:
// each copy is stored like any value and then registered with the master
// as one more holder, which makes it readable (and failure-proof) only
// while that version is still the key's current one. Repair makes copies
// the same way, except that the new holder reads the value itself, from
// the holders the master names (serve_repair_copy).
//
// Invariants (asserted):
//   1. copy_to_replicas is asked for at least one copy, and its `done`
//      runs once, after every copy answered: the count of answers to come
//      never goes below 0, and the copies made never outnumber the owners
//      asked.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {

void copy_to_replicas(self_ptr self, const std::string& key, std::uint64_t version, shared_bytes value,
                      std::uint64_t ttl_ms, const std::vector<wire::replica>& owners, clock_time deadline,
                      std::function<void(std::size_t)> done) {
  auto& st = self->state;
  // With none to make, `done` would never run.
  SLUICE_ASSERT(!owners.empty());
  auto left = std::make_shared<std::size_t>(owners.size());
  auto made = std::make_shared<std::size_t>(0);
  auto one = [left, made, done, asked = owners.size()](bool ok) {
    SLUICE_ASSERT(*left > 0);
    if (ok) ++*made;
    SLUICE_ASSERT(*made <= asked);
    if (--*left == 0) done(*made);
  };
  for (auto& r : owners) {
    if (r.owner == st.ep->me().id) {
      store_replica(self, key, version, value, deadline, [one](result<void> ok) { one(ok.ok()); });
      continue;
    }
    peer_request(self, r, wire::store{key, version, ttl_ms, true}, value, deadline, std::nullopt,
                 [one](result<wire::message> reply) { one(reply_body<wire::ok_reply>(reply).ok()); });
  }
}

void store_replica(self_ptr self, const std::string& key, std::uint64_t version, shared_bytes value,
                   clock_time deadline, std::function<void(result<void>)> done, bool made_room) {
  auto& st = self->state;
  auto size = value.size();
  auto stored = st.store->put(key, version, value);
  if (!stored && stored.code() == errc::no_capacity && !made_room) {
    return make_room(self, size, [self, key, version, value, deadline, done] {
      store_replica(self, key, version, value, deadline, done, true);
    });
  }
  if (!stored) return done(stored.error());
  register_replica(self, key, version, size, deadline, std::move(done));
}

void register_replica(self_ptr self, const std::string& key, std::uint64_t version, std::uint64_t size,
                      clock_time deadline, std::function<void(result<void>)> done) {
  if (self->state.evicts_asked.contains({key, version})) {
    // Its eviction is asked for: the master may grant it after listing
    // this copy, and the copy would be listed but gone. The bytes stay
    // until the answer; whoever wanted the copy asks again.
    return done(error{errc::aborted, "the copy here is being evicted"});
  }
  ask_master(self, wire::add_replica{key, version}, deadline,
             [self, key, version, size, done](result<wire::message> reply) {
               auto& st = self->state;
               auto added = reply_body<wire::add_replica_reply>(reply);
               if (added && added->added) {
                 evictable(self, key, version, size);
                 return done(result<void>{});
               }
               // Refused: the key moved on, free the copy. An answer that was
               // lost may hide a registration: keep the bytes, the master
               // tells this owner to drop them when the version goes.
               if (added || (added.code() != errc::timeout && added.code() != errc::unavailable)) {
                 st.store->drop(key, version);
               }
               if (added) return done(error{errc::aborted, "the key changed before the copy was registered"});
               done(std::move(added).error());
             });
}

void serve_repair_copy(self_ptr self, const request_context& ctx, const wire::repair_copy& r) {
  auto& st = self->state;
  if (!st.registered || ctx.source != st.master_id) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "repair copies are the master's to ask for"});
  }
  auto done = [self, ctx](result<void> ok) {
    if (!ok) return self->state.ep->reply_error(ctx, ok.error());
    self->state.ep->reply(ctx, wire::ok_reply{});
  };
  if (auto held = st.store->get(r.key, r.version)) {
    // A copy the master does not list yet (its registration was lost).
    return register_replica(self, r.key, r.version, held->size(), ctx.deadline, done);
  }
  fetch_from_holders(self, r.holders, r.key, r.version, r.size, ctx.deadline,
                     [self, key = r.key, version = r.version, deadline = ctx.deadline, done](result<fetched_value> got) {
                       if (!got) return done(std::move(got).error());
                       store_replica(self, key, version, std::move(got->bytes), deadline, done);
                     });
}

}  // namespace sluice::owner_detail
