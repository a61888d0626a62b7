// Reads: a client's get, and moving a value's bytes from the owner that
// holds it to the one that serves the reader. The bytes move owner to
// owner in pieces (fetch_range), several in flight at once, each received
// straight into its place in a region of the reader's pool; the holder
// sends them from where they lie in its own pool. So a remote value is
// copied once per hop, by the kernel, and never staged. Where the rdma
// path to the holder is up, the reader reads the holder's pool with
// one-sided reads instead (owner_rdma.cpp) and falls back to the pieces.
//
// Invariants of a transfer (asserted):
//   1. its room is exactly the value's size, and every piece asked for
//      lies inside it and is not empty;
//   2. received <= next <= size: bytes arrive only for pieces asked for,
//      and the pieces asked for never pass the end; at most
//      transfer_window pieces are in flight, never fewer than 0;
//   3. it ends once (`over` goes from false to true, never back), with
//      every byte received when it ends well; `done` runs then and only
//      then;
//   4. pieces start only after the rdma attempt is out of the way: a
//      fallback finds none asked for yet.
//
// A get looks its key up at most max_get_attempts times.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>
#include <memory>
#include <new>
#include <tuple>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {
namespace {

/// One value on its way here.
struct transfer {
  wire::replica from;
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  shared_bytes into;  // written in place until the transfer ends
  bool reserved = false;
  clock_time deadline;
  std::uint64_t next = 0;      // offset of the next piece to ask for
  std::uint64_t received = 0;  // bytes of the pieces that arrived
  std::uint32_t in_flight = 0;
  bool over = false;
  std::function<void(result<fetched_value>)> done;
};
using transfer_ptr = std::shared_ptr<transfer>;

void end(const transfer_ptr& t, result<fetched_value> outcome) {
  if (t->over) return;
  SLUICE_ASSERT(t->done != nullptr);
  SLUICE_ASSERT(!outcome || outcome->bytes.size() == t->size);
  t->over = true;
  // Pieces still in flight land in `into`, which their slots keep alive;
  // their replies find the transfer over and are ignored.
  auto done = std::move(t->done);
  done(std::move(outcome));
}

void pump(self_ptr self, const transfer_ptr& t);

void request_piece(self_ptr self, const transfer_ptr& t, std::uint64_t offset, std::uint64_t length) {
  SLUICE_ASSERT(length > 0);
  SLUICE_ASSERT(offset + length <= t->into.size());
  transport::receive_slot into{t->into.owner(), fill_in_place(t->into).subspan(offset, length)};
  // A holder that stops answering (frozen, or its path gone quiet) fails
  // this piece well before the read's deadline, so the read can go on
  // from another copy (serve_get).
  auto& st = self->state;
  auto deadline = std::min(t->deadline, st.ep->now() + st.cfg.transfer_piece_timeout);
  peer_request(self, t->from, wire::fetch_range{t->key, t->version, offset, length}, {}, deadline, into,
               [self, t, length](result<wire::message> reply) {
                 if (t->over) return;
                 auto got = reply_body<wire::fetch_reply>(reply);
                 if (!got) return end(t, got.error());
                 SLUICE_ASSERT(t->in_flight > 0);
                 t->in_flight -= 1;
                 t->received += length;
                 SLUICE_ASSERT(t->received <= t->next);
                 if (t->received == t->size) {
                   // Every piece asked for came: none is left in flight.
                   SLUICE_ASSERT(t->next == t->size);
                   SLUICE_ASSERT(t->in_flight == 0);
                   return end(t, fetched_value{t->into, t->reserved});
                 }
                 pump(self, t);
               });
}

void pump(self_ptr self, const transfer_ptr& t) {
  auto& cfg = self->state.cfg;
  while (!t->over && t->in_flight < cfg.transfer_window && t->next < t->size) {
    auto offset = t->next;
    auto length = std::min(cfg.transfer_chunk_bytes, t->size - offset);
    t->next += length;
    t->in_flight += 1;
    SLUICE_ASSERT(t->next <= t->size);
    SLUICE_ASSERT(t->in_flight <= cfg.transfer_window);
    request_piece(self, t, offset, length);
  }
}

/// Room for `size` bytes this owner fills: reserved in the store when it
/// has room, else on the heap (served, never kept); no_capacity when
/// neither has it.
result<std::pair<shared_bytes, bool>> room_for(self_ptr self, std::uint64_t size) {
  if (auto reserved = self->state.store->reserve(size)) return std::pair{std::move(*reserved), true};
  try {
    return std::pair{byte_buffer::allocate(size).freeze(), false};
  } catch (const std::bad_alloc&) {
    return fail(errc::no_capacity, "no memory on this owner to read a value of " + std::to_string(size) + " bytes into");
  }
}

/// Keeps a value read from elsewhere as a copy here, when configured and
/// it lies in reserved room; the master registers it (add_replica). Never
/// evicts to make room for it: the copy is a convenience.
void keep_copy(self_ptr self, const std::string& key, std::uint64_t version, const fetched_value& value,
               clock_time deadline) {
  if (!self->state.cfg.cache_remote || !value.reserved || value.bytes.empty()) return;
  store_replica(self, key, version, value.bytes, deadline, [](result<void>) {}, true);
}

}  // namespace

void fetch_value(self_ptr self, const wire::replica& from, const std::string& key, std::uint64_t version,
                 std::uint64_t size, clock_time deadline, std::function<void(result<fetched_value>)> done) {
  if (size == 0) return done(fetched_value{});
  auto room = room_for(self, size);
  if (!room) return done(room.error());
  auto t = std::make_shared<transfer>();
  t->from = from;
  t->key = key;
  t->version = version;
  t->size = size;
  std::tie(t->into, t->reserved) = std::move(*room);
  SLUICE_ASSERT(t->into.size() == size);
  t->deadline = deadline;
  t->done = std::move(done);
  if (!rdma_wanted(self, from, t->into)) return pump(self, t);
  // One-sided reads first; should they fail, the pieces come over the
  // next path (the link manager demoted rdma meanwhile).
  rdma_fetch(self, from, key, version, t->into, deadline, [self, t](result<void> ok, bool into_busy) {
    if (t->over) return;
    if (ok) return end(t, fetched_value{t->into, t->reserved});
    if (ok.code() == errc::not_found) return end(t, ok.error());
    SLUICE_ASSERT(t->next == 0);
    SLUICE_ASSERT(t->in_flight == 0);
    if (into_busy) {
      // Reads may still land in the old room: the pieces go to new room.
      auto room = room_for(self, t->size);
      if (!room) return end(t, room.error());
      std::tie(t->into, t->reserved) = std::move(*room);
      SLUICE_ASSERT(t->into.size() == t->size);
    }
    pump(self, t);
  });
}

void serve_fetch(self_ptr self, const request_context& ctx, const wire::fetch& f) {
  auto& st = self->state;
  auto bytes = st.store->get(f.key, f.version);
  if (!bytes) {
    st.ep->reply_error(ctx, error{errc::not_found, "version " + std::to_string(f.version) +
                                                       " is not held here (dropped or superseded)"});
    return;
  }
  used(self, f.key);
  st.ep->reply(ctx, wire::fetch_reply{f.version}, std::move(*bytes));
}

void serve_fetch_range(self_ptr self, const request_context& ctx, const wire::fetch_range& f) {
  if (f.rdma) return serve_rdma_lease(self, ctx, f);
  auto& st = self->state;
  auto bytes = st.store->get(f.key, f.version);
  if (!bytes) {
    return st.ep->reply_error(ctx, error{errc::not_found, "version " + std::to_string(f.version) +
                                                              " is not held here (dropped or superseded)"});
  }
  if (f.offset > bytes->size() || f.length > bytes->size() - f.offset) {
    return st.ep->reply_error(
        ctx, error{errc::invalid_argument, "asked for " + std::to_string(f.length) + " bytes at offset " +
                                               std::to_string(f.offset) + " of a value of " +
                                               std::to_string(bytes->size()) + " bytes"});
  }
  // One read of a value is one use, however many pieces it takes.
  if (f.offset == 0) used(self, f.key);
  st.ep->reply(ctx, wire::fetch_reply{f.version}, bytes->slice(f.offset, f.length));
}

namespace {

/// Whether a read that failed this way may go on from another holder:
/// the holder or the path to it failed, not the value or this owner.
bool holder_failed(errc code) {
  switch (code) {
    case errc::unavailable:
    case errc::timeout:
    case errc::overloaded:
    case errc::protocol:
    case errc::aborted: return true;
    default: return false;
  }
}

/// A read of a version this owner does not hold, from the holders in
/// turn, each one that fails giving way to the next, all within one
/// deadline.
struct remote_read {
  std::string key;
  std::uint64_t version = 0;
  std::uint64_t size = 0;
  clock_time deadline;
  std::vector<wire::replica> holders;  // not this owner; tried in order
  std::size_t next = 0;                // the holder to try next
  std::function<void(result<fetched_value>)> done;
};

void read_from_next(self_ptr self, std::shared_ptr<remote_read> r) {
  SLUICE_ASSERT(r->next < r->holders.size());
  auto& from = r->holders[r->next++];
  fetch_value(self, from, r->key, r->version, r->size, r->deadline, [self, r](result<fetched_value> fetched) {
    auto& st = self->state;
    // A holder without the version (not_found) gives way too: its copy
    // may be the one lost while the others live; when the version moved
    // on, every holder says so and the caller looks the key up again.
    bool next_may_serve = holder_failed(fetched.code()) || fetched.code() == errc::not_found;
    if (!fetched && next_may_serve && r->next < r->holders.size() && st.ep->now() < r->deadline) {
      st.ep->log()->debug("read of {}: holder {} failed ({}); reading another copy", r->key,
                          r->holders[r->next - 1].owner.to_string(), fetched.error().to_string());
      return read_from_next(self, r);
    }
    auto done = std::move(r->done);
    done(std::move(fetched));
  });
}

}  // namespace

void fetch_from_holders(self_ptr self, std::vector<wire::replica> holders, const std::string& key,
                        std::uint64_t version, std::uint64_t size, clock_time deadline,
                        std::function<void(result<fetched_value>)> done) {
  if (holders.empty()) return done(error{errc::unavailable, "no holder of " + key + " is up"});
  auto r = std::make_shared<remote_read>();
  r->key = key;
  r->version = version;
  r->size = size;
  r->deadline = deadline;
  r->holders = std::move(holders);
  r->done = std::move(done);
  read_from_next(self, std::move(r));
}

void serve_get(self_ptr self, const request_context& ctx, std::string key, int attempt) {
  SLUICE_ASSERT(attempt >= 0);
  SLUICE_ASSERT(attempt < max_get_attempts);
  ask_master(self, wire::locate{key}, ctx.deadline, [self, ctx, key, attempt](result<wire::message> reply) {
    auto& st = self->state;
    auto where = reply_body<wire::locate_reply>(reply);
    if (!where) return st.ep->reply_error(ctx, where.error());
    auto retry_or = [self, ctx, key, attempt](const error&) {
      if (attempt + 1 < max_get_attempts) return serve_get(self, ctx, key, attempt + 1);
      self->state.ep->reply_error(ctx, error{errc::aborted, "the key was overwritten " +
                                                                std::to_string(max_get_attempts) +
                                                                " times while it was read; retry"});
    };
    auto mine = std::find_if(where->replicas.begin(), where->replicas.end(),
                             [&st](const wire::replica& r) { return r.owner == st.ep->me().id; });
    if (mine != where->replicas.end()) {
      if (auto bytes = st.store->get(key, where->version)) {
        used(self, key);
        return st.ep->reply(ctx, wire::kv_get_reply{where->version}, std::move(*bytes));
      }
      // Listed here, not held: the version moved on since the lookup, or
      // this copy was lost; the other copies serve the read (a version
      // that moved on is gone from them too, and the lookup goes again).
      where->replicas.erase(mine);
      if (where->replicas.empty()) return retry_or(error{errc::not_found, "the key changed while it was read"});
    }
    if (where->replicas.empty()) return st.ep->reply_error(ctx, error{errc::unavailable, "no holder is up"});
    auto version = where->version;
    auto read = [self, ctx, key, version, retry_or, holders = std::move(where->replicas), size = where->size]() mutable {
      fetch_from_holders(self, std::move(holders), key, version, size, ctx.deadline,
                         [self, ctx, key, version, retry_or](result<fetched_value> fetched) {
                           auto& st = self->state;
                           if (!fetched && fetched.code() == errc::not_found) return retry_or(fetched.error());
                           if (!fetched) return st.ep->reply_error(ctx, fetched.error());
                           st.ep->reply(ctx, wire::kv_get_reply{version}, fetched->bytes);
                           keep_copy(self, key, version, *fetched, ctx.deadline);
                         });
    };
    // A message payload fetched ahead for a consumer here (or on its
    // way): no second transfer. Should the prefetch fail, the read goes on
    // as if there had been none.
    auto prefetched = [self, ctx, version, read](result<shared_bytes> bytes) mutable {
      if (!bytes) return read();
      self->state.ep->reply(ctx, wire::kv_get_reply{version}, std::move(*bytes));
    };
    if (take_prefetched(self, key, version, std::move(prefetched))) return;
    read();
  });
}

}  // namespace sluice::owner_detail
