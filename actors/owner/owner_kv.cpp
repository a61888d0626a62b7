// KV requests an owner serves its clients: puts (committed here, or placed
// by the master), removes, exists and reservations a local client writes in
// place; and the stores other owners send it.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"
#include "runtime/keys.hpp"
#include "runtime/units.hpp"

namespace sluice::owner_detail {
namespace {

/// Stores a version locally and commits it with the master; `done` gets
/// the version or the reason it is not visible.
void store_and_commit(self_ptr self, std::string key, std::uint64_t version, shared_bytes value,
                      std::uint64_t ttl_ms, clock_time deadline,
                      std::function<void(result<std::uint64_t>)> done, bool made_room = false) {
  auto& st = self->state;
  auto size = value.size();
  // Fault site: the write to the store fails.
  auto stored = SLUICE_BUGGIFY(st.ep->faults())
                    ? result<void>{error{errc::unavailable, "the owner's store failed the write"}}
                    : st.store->put(key, version, value);
  if (!stored && stored.code() == errc::no_capacity && !made_room) {
    // Evict, then try once more; no room after that is no_capacity.
    return make_room(self, size, [self, key, version, value, ttl_ms, deadline, done] {
      store_and_commit(self, key, version, value, ttl_ms, deadline, done, true);
    });
  }
  if (!stored) {
    tell_master(self, wire::abort_put{key, version});
    done(stored.error());
    return;
  }
  // Until the master answers, gets of this key go the slow way: the new
  // version may become current at the master at any moment.
  auto change = st.index->begin_change(key);
  // The master counts the TTL from when it commits, later than now: the
  // fast index stops serving the value a little before it expires.
  auto expires = ttl_ms == 0 ? clock_time::max() : st.ep->now() + std::chrono::milliseconds{ttl_ms};
  ask_master(self, wire::commit{key, version, size}, deadline,
             [self, key, version, size, done, change, expires](result<wire::message> reply) {
               auto& st = self->state;
               auto ok = reply_body<wire::commit_reply>(reply);
               std::optional<fast_index::entry> publish;
               if (ok && ok->current) {
                 if (auto bytes = st.store->get(key, version)) publish = fast_index::entry{version, std::move(*bytes), expires};
               }
               st.index->end_change(key, change, std::move(publish));
               if (!ok) {
                 // A refused commit will never be visible: free it now. A
                 // commit whose answer was lost may have happened; keep the
                 // bytes, and the master tells us to drop them if not.
                 auto code = ok.code();
                 if (code != errc::timeout && code != errc::unavailable) {
                   self->state.store->drop(key, version);
                 }
                 done(std::move(ok).error());
                 return;
               }
               if (ok->current) evictable(self, key, version, size);
               done(version);
             });
}

/// How many copies a put asked for, and how many it must have to succeed.
struct copy_goal {
  std::uint32_t asked = 1;
  std::uint32_t needed = 1;  ///< 1 to asked
};

/// Answers a put whose version is committed with `copies` copies: success
/// with at least goal.needed of them, else unavailable. Either way the
/// version stays, readable from the copies it has; one with fewer than it
/// asked for is counted (and left to repair) as under-replicated.
void answer_copies(self_ptr self, const request_context& ctx, const std::string& key, std::uint64_t version,
                   std::uint32_t copies, copy_goal goal) {
  auto& st = self->state;
  SLUICE_ASSERT(copies >= 1);
  SLUICE_ASSERT(copies <= goal.asked);
  if (copies < goal.asked) {
    ++st.under_replicated_puts;
    st.ep->log()->warn("put of '{}' (version {}) has {} of {} copies", key, version, copies, goal.asked);
  }
  if (copies < goal.needed) {
    return st.ep->reply_error(
        ctx, error{errc::unavailable, std::to_string(copies) + " of " + std::to_string(goal.asked) +
                                          " copies committed (version " + std::to_string(version) + " of '" + key +
                                          "' is readable from them, under-replicated); at least " +
                                          std::to_string(goal.needed) + " were needed"});
  }
  st.ep->reply(ctx, wire::kv_put_reply{version, copies});
}

}  // namespace

// --- kv, served to clients ------------------------------------------------

void serve_put(self_ptr self, const request_context& ctx, std::string key, shared_bytes value,
               wire::put_condition condition, std::uint64_t ttl_ms, std::uint32_t replicas,
               std::string prefer_owner, std::uint32_t min_replicas, bool waited) {
  auto& st = self->state;
  if (auto ok = check_key(key); !ok) return st.ep->reply_error(ctx, ok.error());
  if (value.size() > st.cfg.max_value_bytes) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "the value is " + format_size(value.size()) +
                                             "; this owner accepts at most " +
                                             format_size(st.cfg.max_value_bytes)});
  }
  replicas = std::max<std::uint32_t>(replicas, 1);
  if (min_replicas > replicas) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "min_replicas (" + std::to_string(min_replicas) +
                                                                   ") must be from 1 to replicas (" +
                                                                   std::to_string(replicas) + ")"});
  }
  // A plain put this owner holds lets it ask for the key's slot, so the
  // next ones need no master (see fast_path.hpp).
  bool plain = !condition.any() && ttl_ms == 0 && replicas <= 1 && prefer_owner.empty();
  if (plain && commit_here(self, ctx, key, value)) return;
  if (plain && !waited && claiming(self, key)) {
    // The key's slot is being asked for: once the answer is in, this put
    // may need no master either.
    return after_claim(self, [self, ctx, key, value, condition, ttl_ms, replicas] {
      serve_put(self, ctx, key, value, condition, ttl_ms, replicas, {}, 0, true);
    });
  }
  leave_slot(self, key);
  wire::place p{key, value.size(), st.ep->me().id, condition, ttl_ms, replicas, std::move(prefer_owner), min_replicas};
  ask_master(self, std::move(p), ctx.deadline,
             [self, ctx, key, value, ttl_ms, plain, replicas, min_replicas](result<wire::message> reply) {
    auto& st = self->state;
    auto placed = reply_body<wire::place_reply>(reply);
    if (!placed) return st.ep->reply_error(ctx, placed.error());
    auto version = placed->version;
    bool mine = placed->target.owner == st.ep->me().id;
    copy_goal goal{replicas, min_replicas == 0 ? replicas : min_replicas};
    // Once the holder committed, further copies are made and registered;
    // the put answers when they are done (see answer_copies).
    auto committed = [self, ctx, key, value, ttl_ms, version, extra = placed->extra, plain, mine,
                      goal](result<std::uint64_t> v) {
      if (!v) return self->state.ep->reply_error(ctx, v.error());
      if (plain && mine) want_slot(self, key);
      if (extra.empty()) return answer_copies(self, ctx, key, version, 1, goal);
      copy_to_replicas(self, key, version, value, ttl_ms, extra, ctx.deadline,
                       [self, ctx, key, version, goal](std::size_t made) {
                         answer_copies(self, ctx, key, version, static_cast<std::uint32_t>(made) + 1, goal);
                       });
    };
    if (placed->target.owner == st.ep->me().id) {
      store_and_commit(self, key, version, value, ttl_ms, ctx.deadline, std::move(committed));
      return;
    }
    peer_request(self, placed->target, wire::store{key, version, ttl_ms, false}, value, ctx.deadline, std::nullopt,
                 [committed, version](result<wire::message> r) {
                   if (!r) return committed(std::move(r).error());
                   committed(version);
                 });
  });
}

void serve_remove(self_ptr self, const request_context& ctx, std::string key, std::uint64_t if_version) {
  auto& st = self->state;
  auto change = st.index->begin_change(key);  // no earlier commit may publish now
  ask_master(self, wire::remove_key{key, if_version}, ctx.deadline, [self, ctx, key, change](result<wire::message> reply) {
    auto& st = self->state;
    st.index->end_change(key, change);
    auto removed = reply_body<wire::remove_key_reply>(reply);
    if (!removed) return self->state.ep->reply_error(ctx, removed.error());
    self->state.ep->reply(ctx, wire::kv_remove_reply{removed->existed});
  });
}

void serve_exists(self_ptr self, const request_context& ctx, std::string key) {
  ask_master(self, wire::locate{std::move(key)}, ctx.deadline, [self, ctx](result<wire::message> reply) {
    if (!reply && reply.code() == errc::not_found) {
      return self->state.ep->reply(ctx, wire::kv_exists_reply{false});
    }
    if (!reply) return self->state.ep->reply_error(ctx, reply.error());
    self->state.ep->reply(ctx, wire::kv_exists_reply{true});
  });
}

void serve_reserve(self_ptr self, const request_context& ctx, const wire::kv_reserve& r, bool made_room) {
  auto& st = self->state;
  if (auto ok = check_key(r.key); !ok) return st.ep->reply_error(ctx, ok.error());
  if (r.size > st.cfg.max_value_bytes) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "the value is " + format_size(r.size) +
                                                                   "; this owner accepts at most " +
                                                                   format_size(st.cfg.max_value_bytes)});
  }
  auto held = std::count_if(st.reservations.begin(), st.reservations.end(),
                            [&ctx](const auto& e) { return e.second.link == ctx.link; });
  if (static_cast<std::size_t>(held) >= reservations_per_link_max) {
    return st.ep->reply_error(ctx, error{errc::overloaded, "too many uncommitted reservations on this link"});
  }
  auto bytes = st.store->reserve(r.size);
  if (made_room && st.ep->peer(ctx.link) == nullptr) return;  // the client went away meanwhile
  if (!bytes && bytes.code() == errc::no_capacity && !made_room) {
    // Evict, then try once more; no room after that is no_capacity.
    return make_room(self, r.size, [self, ctx, r] { serve_reserve(self, ctx, r, true); });
  }
  if (!bytes) return st.ep->reply_error(ctx, bytes.error());
  auto where = st.store->locate(*bytes);
  if (!where) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "this owner has no shared-memory pool; send the value with a put"});
  }
  auto id = st.next_reservation++;
  auto* client = st.ep->peer(ctx.link);
  if (client == nullptr) return;  // the link went down: nobody to answer
  st.reservations.emplace(id, reservation{ctx.link, client->id, r.key, std::move(*bytes), r.condition, r.ttl_ms,
                                          r.replicas, r.prefer_owner, r.min_replicas});
  st.ep->reply(ctx, wire::kv_reserve_reply{id, *where});
}

bool made_by(const owner_state& st, const reservation& r, transport::link_id link) {
  if (r.link == link) return true;
  auto* peer = st.ep->peer(link);
  return peer != nullptr && peer->id == r.client;
}

void serve_commit_reservation(self_ptr self, const request_context& ctx, std::uint64_t id) {
  auto& st = self->state;
  auto it = st.reservations.find(id);
  if (it == st.reservations.end() || !made_by(st, it->second, ctx.link)) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "no reservation " + std::to_string(id) + " of this client"});
  }
  auto r = std::move(it->second);
  st.reservations.erase(it);
  serve_put(self, ctx, std::move(r.key), std::move(r.bytes), r.condition, r.ttl_ms, r.replicas,
            std::move(r.prefer_owner), r.min_replicas);
}

void serve_store(self_ptr self, const request_context& ctx, const wire::store& s, shared_bytes value) {
  if (s.replica) {
    return store_replica(self, s.key, s.version, std::move(value), ctx.deadline, [self, ctx](result<void> ok) {
      if (!ok) return self->state.ep->reply_error(ctx, ok.error());
      self->state.ep->reply(ctx, wire::ok_reply{});
    });
  }
  store_and_commit(self, s.key, s.version, std::move(value), s.ttl_ms, ctx.deadline,
                   [self, ctx](result<std::uint64_t> v) {
                     if (!v) return self->state.ep->reply_error(ctx, v.error());
                     self->state.ep->reply(ctx, wire::ok_reply{});
                   });
}

}  // namespace sluice::owner_detail
