// Moving values between owners over RDMA. The reader sets a queue pair up
// over its tcp link to the holder (rdma_connect: the endpoints, and the
// holder's registered segments), asks for a lease on the value
// (fetch_range with rdma set, answered with rdma_lease: where the bytes
// lie, kept there until released or the lease runs out), posts one-sided
// reads of it straight into its own pool region — pieces of [owner]
// transfer_chunk, transfer_window of them in flight — and hears of each
// completion as a message from the rdma path's poller thread. Nothing
// here waits on the device.
//
// Any failure of the path (a failed completion, a pair in the error
// state, a holder without rdma, a lease that does not add up) demotes the
// rdma path to that owner in the link manager; the caller falls back to
// the next path. A holder that declines to lease one value (not held, not
// in registered memory, too many leases) demotes nothing: that value alone
// goes over the next path. The path is tried again on the owner's tick after its
// backoff, with a fresh queue pair.

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <algorithm>

#include "actors/owner/owner_state.hpp"
#include "runtime/assert.hpp"

namespace sluice::owner_detail {

using transport::path_kind;

/// The reads of one value.
struct rdma_job {
  std::uint64_t id = 0;
  wire::replica from;
  std::uint64_t pair = 0;
  std::uint64_t lease = 0;
  std::uint64_t remote_address = 0;
  std::uint32_t rkey = 0;
  wire::pool_region local;
  shared_bytes into;  // kept alive while a read may land in it
  std::uint64_t size = 0;
  std::uint64_t next = 0;
  std::uint64_t arrived = 0;
  std::uint64_t arrived_checked = 0;  // arrived when the overdue timer last fired
  clock_time deadline;
  std::uint32_t in_flight = 0;
  bool failed = false;
  bool over = false;
  error why{errc::internal, ""};
  std::function<void(result<void>, bool)> done;
};
using job_ptr = std::shared_ptr<rdma_job>;

namespace {

/// A lease lasts as long as its request's deadline, at most this long...
constexpr std::chrono::seconds lease_max{60};
/// ...and this much longer: a reader whose reads completed just before
/// its deadline may still be copying.
constexpr std::chrono::seconds lease_grace{1};

std::string peer_name(self_ptr self, node_id id) {
  auto it = self->state.owners.find(id);
  if (it != self->state.owners.end() && !it->second.name.empty()) return it->second.name;
  return id.to_string();
}

/// The rdma path to `peer` failed: demote it (saying so once) and drop
/// its pair — when it is still `pair` (0: whichever is ready), not one set
/// up since — so the next try sets a fresh one up.
void rdma_failed(self_ptr self, node_id peer, const error& why, std::uint64_t pair = 0) {
  auto& st = self->state;
  if (st.links.failed(peer.value, path_kind::rdma, st.ep->now(), why.to_string())) {
    st.ep->log()->info("path to {} over rdma is down: {}", peer_name(self, peer), why.to_string());
  }
  auto it = st.rdma.out.find(peer);
  if (it == st.rdma.out.end() || !it->second.waiters.empty()) return;
  if (pair != 0 && it->second.pair != pair) return;
  st.rdma.path->close_pair(it->second.pair);
  st.rdma.out.erase(it);
}

void rdma_worked(self_ptr self, node_id peer, std::uint64_t bytes) {
  auto& st = self->state;
  if (st.links.succeeded(peer.value, path_kind::rdma, st.ep->now())) {
    st.ep->log()->info("path to {} over rdma is back", peer_name(self, peer));
  }
  if (bytes > 0) st.links.carried(peer.value, path_kind::rdma, bytes, st.ep->now());
}

/// A queue pair to `from`, set up over the tcp link when there is none.
void ensure_pair(self_ptr self, const wire::replica& from, clock_time until, std::function<void(result<void>)> then) {
  auto& rs = self->state.rdma;
  auto& p = rs.out[from.owner];
  if (p.ready) {
    SLUICE_ASSERT(p.waiters.empty());
    return then({});
  }
  p.waiters.push_back(std::move(then));
  if (p.waiters.size() > 1) return;  // being set up
  auto fail_all = [self, peer = from.owner](const error& why) {
    auto& rs = self->state.rdma;
    auto it = rs.out.find(peer);
    if (it == rs.out.end()) return;
    auto waiters = std::move(it->second.waiters);
    rs.out.erase(it);
    for (auto& w : waiters) w(why);
  };
  auto opened = rs.path->open_pair();
  if (!opened) return fail_all(opened.error());
  p.pair = opened->first;
  SLUICE_ASSERT(p.pair != 0);
  wire::rdma_connect c{rs.path->provider(), opened->second};
  peer_request(self, from, std::move(c), {}, until, std::nullopt,
               [self, peer = from.owner, pair = p.pair, fail_all](result<wire::message> reply) {
                 auto& rs = self->state.rdma;
                 auto it = rs.out.find(peer);
                 if (it == rs.out.end() || it->second.pair != pair) return rs.path->close_pair(pair);
                 // The pair is being set up, once: its waiters are still there.
                 SLUICE_ASSERT(!it->second.ready);
                 SLUICE_ASSERT(!it->second.waiters.empty());
                 auto r = reply_body<wire::rdma_connect_reply>(reply);
                 result<void> ok = r ? result<void>{} : result<void>{r.error()};
                 if (ok && r->provider != rs.path->provider()) {
                   ok = error{errc::unavailable, "the owner uses the " + r->provider + " rdma provider, this one " +
                                                     rs.path->provider()};
                 }
                 if (ok) ok = rs.path->connect_pair(pair, r->endpoint);
                 if (!ok) {
                   rs.path->close_pair(pair);
                   return fail_all(ok.error());
                 }
                 it->second.ready = true;
                 it->second.segments = std::move(r->segments);
                 auto waiters = std::move(it->second.waiters);
                 it->second.waiters.clear();
                 for (auto& w : waiters) w({});
               });
}

/// Whether the lease names `size` bytes inside one of the holder's
/// registered segments: untrusted input, checked before any read.
result<void> check_lease(const wire::rdma_lease& l, std::uint64_t size, const std::vector<wire::rdma_segment>& segs) {
  if (l.where.length != size) {
    return fail(errc::protocol, "the holder leased " + std::to_string(l.where.length) + " bytes of a value of " +
                                    std::to_string(size));
  }
  for (auto& s : segs) {
    if (s.segment != l.where.segment || s.rkey != l.rkey) continue;
    if (l.address >= s.address && l.address - s.address <= s.length && size <= s.length - (l.address - s.address)) {
      return {};
    }
  }
  return fail(errc::protocol, "the holder's lease lies outside the segments it registered");
}

/// Answers to a lease request that say nothing about the rdma path.
bool holder_declined(errc code) {
  return code == errc::not_found || code == errc::invalid_argument || code == errc::overloaded;
}

void finish(self_ptr self, const job_ptr& j, result<void> outcome) {
  if (j->over) return;
  SLUICE_ASSERT(j->done != nullptr);
  SLUICE_ASSERT(!outcome || j->arrived == j->size);
  j->over = true;
  auto& st = self->state;
  auto erased = st.rdma.jobs.erase(j->id);
  SLUICE_ASSERT(erased == 1);
  // The holder may free the bytes now (or when the lease runs out, should
  // this notice not arrive).
  if (auto link = owner_link(self, j->from)) st.ep->notify(*link, wire::rdma_release{j->lease});
  if (outcome) {
    rdma_worked(self, j->from.owner, j->size);
  } else {
    rdma_failed(self, j->from.owner, outcome.error(), j->pair);
  }
  auto done = std::move(j->done);
  done(std::move(outcome), j->in_flight > 0);
}

void pump(self_ptr self, const job_ptr& j) {
  auto& st = self->state;
  while (!j->failed && j->in_flight < st.cfg.transfer_window && j->next < j->size) {
    auto length = std::min(st.cfg.transfer_chunk_bytes, j->size - j->next);
    SLUICE_ASSERT(length > 0);
    auto work = st.rdma.next_work++;
    SLUICE_ASSERT(work != 0);
    wire::pool_region piece{j->local.segment, j->local.offset + j->next, length};
    auto posted = st.rdma.path->post_read(j->pair, piece, j->remote_address + j->next, j->rkey, work);
    if (!posted) {
      j->failed = true;
      j->why = error{posted.code(), "posting an rdma read failed: " + posted.error().message()};
      break;
    }
    auto [at, fresh] = st.rdma.reads.emplace(work, std::pair{j, length});
    SLUICE_ASSERT(fresh);
    j->in_flight += 1;
    j->next += length;
    SLUICE_ASSERT(j->next <= j->size);
    SLUICE_ASSERT(j->in_flight <= st.cfg.transfer_window);
  }
  if (j->failed && j->in_flight == 0) finish(self, j, j->why);
}

/// The reads are overdue when no piece arrived for [links] timeout, or at
/// the deadline: a large value on a slow link takes as long as it needs.
void arm_overdue(self_ptr self, const job_ptr& j) {
  auto& st = self->state;
  auto now = st.ep->now();
  auto until = std::min(j->deadline, now + std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout));
  self->delayed_send(self, until > now ? until - now : clock_duration::zero(), rdma_atom::value, j->id);
}

void start_reads(self_ptr self, const wire::replica& from, const wire::rdma_lease& lease, shared_bytes into,
                 clock_time deadline, std::function<void(result<void>, bool)> done) {
  auto& st = self->state;
  auto j = std::make_shared<rdma_job>();
  j->id = st.rdma.next_job++;
  SLUICE_ASSERT(j->id != 0);
  j->from = from;
  // The caller found the pair ready just now.
  auto pair = st.rdma.out.find(from.owner);
  SLUICE_ASSERT(pair != st.rdma.out.end());
  SLUICE_ASSERT(pair->second.ready);
  j->pair = pair->second.pair;
  j->lease = lease.lease;
  j->remote_address = lease.address;
  j->rkey = lease.rkey;
  auto local = st.store->locate(into);
  // rdma_wanted() found `into` in the pool: the reads land there.
  SLUICE_ASSERT(local.has_value());
  SLUICE_ASSERT(!into.empty());
  j->local = *local;
  j->size = into.size();
  j->into = std::move(into);
  j->done = std::move(done);
  j->deadline = deadline;
  SLUICE_ASSERT(st.rdma.jobs.size() < rdma_jobs_max);
  auto [at, fresh] = st.rdma.jobs.emplace(j->id, j);
  SLUICE_ASSERT(fresh);
  arm_overdue(self, j);
  pump(self, j);
}

}  // namespace

bool rdma_wanted(self_ptr self, const wire::replica& from, const shared_bytes& into) {
  auto& st = self->state;
  if (st.rdma.path == nullptr || into.empty()) return false;
  // Past a bound the read goes over tcp, which has its own.
  if (st.rdma.jobs.size() >= rdma_jobs_max) return false;
  if (!st.rdma.out.contains(from.owner) && st.rdma.out.size() >= rdma_out_pairs_max) return false;
  if (st.links.choose(from.owner.value, st.ep->now()) != path_kind::rdma) return false;
  auto where = st.store->locate(into);
  if (!where) return false;
  auto segs = st.rdma.path->segments();
  return std::any_of(segs.begin(), segs.end(), [&](const wire::rdma_segment& s) { return s.segment == where->segment; });
}

void rdma_fetch(self_ptr self, const wire::replica& from, const std::string& key, std::uint64_t version,
                shared_bytes into, clock_time deadline, std::function<void(result<void>, bool)> done) {
  auto& st = self->state;
  // Setting up and asking for the lease get [links] timeout, like any
  // path but the last; the reads then go on while they make progress.
  auto until = std::min(deadline, st.ep->now() + std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout));
  ensure_pair(self, from, until, [self, from, key, version, into, until, deadline, done](result<void> ready) {
    if (!ready) {
      rdma_failed(self, from.owner, ready.error());
      return done(ready.error(), false);
    }
    auto size = into.size();
    wire::fetch_range ask{key, version, 0, size, true};
    peer_request(self, from, std::move(ask), {}, until, std::nullopt,
                 [self, from, size, into, deadline, done](result<wire::message> reply) {
                   auto& st = self->state;
                   auto lease = reply_body<wire::rdma_lease>(reply);
                   // The holder answered that this value cannot be leased
                   // (gone, or not in its registered memory, or too many
                   // leases): no fault of the path, which stays as it is.
                   if (!lease && holder_declined(lease.code())) return done(lease.error(), false);
                   auto pair = st.rdma.out.find(from.owner);
                   result<void> ok = lease ? result<void>{} : result<void>{lease.error()};
                   if (ok && (pair == st.rdma.out.end() || !pair->second.ready)) {
                     ok = error{errc::unavailable, "the queue pair went away"};
                   }
                   if (ok) ok = check_lease(*lease, size, pair->second.segments);
                   if (!ok) {
                     if (lease) {
                       if (auto link = owner_link(self, from)) st.ep->notify(*link, wire::rdma_release{lease->lease});
                     }
                     rdma_failed(self, from.owner, ok.error());
                     return done(ok.error(), false);
                   }
                   if (st.rdma.jobs.size() >= rdma_jobs_max) {
                     // rdma_wanted() saw room when this read began; reads
                     // that began since may have taken it while the pair
                     // and the lease were on their way. Over the bound this
                     // one goes over tcp: no fault of the path.
                     if (auto link = owner_link(self, from)) st.ep->notify(*link, wire::rdma_release{lease->lease});
                     return done(error{errc::overloaded, "too many rdma reads in flight on this owner"}, false);
                   }
                   start_reads(self, from, *lease, into, deadline, done);
                 });
  });
}

void rdma_completed(self_ptr self, std::uint64_t work, bool ok, const std::string& why) {
  auto& rs = self->state.rdma;
  auto it = rs.reads.find(work);
  if (it == rs.reads.end()) return;
  auto [j, length] = it->second;
  rs.reads.erase(it);
  SLUICE_ASSERT(j->in_flight > 0);
  j->in_flight -= 1;
  if (j->over) return;
  if (!ok && !j->failed) {
    j->failed = true;
    j->why = error{errc::unavailable, "an rdma read from " + peer_name(self, j->from.owner) + " failed: " + why};
  }
  if (ok) j->arrived += length;
  SLUICE_ASSERT(j->arrived <= j->next);
  if (j->failed) {
    if (j->in_flight == 0) finish(self, j, j->why);
    return;
  }
  if (j->arrived == j->size) return finish(self, j, result<void>{});
  pump(self, j);
}

void rdma_overdue(self_ptr self, std::uint64_t job) {
  auto& rs = self->state.rdma;
  auto it = rs.jobs.find(job);
  if (it == rs.jobs.end()) return;
  auto j = it->second;
  if (j->arrived > j->arrived_checked && self->state.ep->now() < j->deadline) {
    j->arrived_checked = j->arrived;  // still moving: give it another while
    return arm_overdue(self, j);
  }
  finish(self, j, error{errc::timeout, "rdma reads from " + peer_name(self, j->from.owner) + " did not complete in time"});
}

void serve_rdma_connect(self_ptr self, const request_context& ctx, const wire::rdma_connect& c) {
  auto& st = self->state;
  auto& rs = st.rdma;
  if (rs.path == nullptr) {
    return st.ep->reply_error(ctx, error{errc::unavailable, "this owner has no rdma path ([rdma] device)"});
  }
  if (c.provider != rs.path->provider()) {
    return st.ep->reply_error(ctx, error{errc::unavailable, "this owner uses the " + rs.path->provider() +
                                                                 " rdma provider, the reader " + c.provider});
  }
  if (!rs.in.contains(ctx.source) && rs.in.size() >= rdma_in_pairs_max) {
    return st.ep->reply_error(ctx, error{errc::overloaded, "too many owners read this one over rdma"});
  }
  auto opened = rs.path->open_pair();
  if (!opened) return st.ep->reply_error(ctx, opened.error());
  if (auto ok = rs.path->connect_pair(opened->first, c.endpoint); !ok) {
    rs.path->close_pair(opened->first);
    return st.ep->reply_error(ctx, ok.error());
  }
  // A reader that sets up a new pair is done with its old one.
  if (auto old = rs.in.find(ctx.source); old != rs.in.end()) rs.path->close_pair(old->second);
  rs.in[ctx.source] = opened->first;
  SLUICE_ASSERT(rs.in.size() <= rdma_in_pairs_max);
  st.ep->reply(ctx, wire::rdma_connect_reply{rs.path->provider(), opened->second, rs.path->segments()});
}

void serve_rdma_lease(self_ptr self, const request_context& ctx, const wire::fetch_range& f) {
  auto& st = self->state;
  auto& rs = st.rdma;
  if (rs.path == nullptr) return st.ep->reply_error(ctx, error{errc::unavailable, "this owner has no rdma path"});
  auto bytes = st.store->get(f.key, f.version);
  if (!bytes) {
    return st.ep->reply_error(ctx, error{errc::not_found, "version " + std::to_string(f.version) +
                                                              " is not held here (dropped or superseded)"});
  }
  if (f.offset > bytes->size() || f.length > bytes->size() - f.offset) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "asked for bytes beyond the value"});
  }
  auto where = st.store->locate(*bytes);
  std::optional<wire::rdma_segment> seg;
  if (where) {
    for (auto& s : rs.path->segments()) {
      if (s.segment == where->segment) seg = s;
    }
  }
  if (!seg) {
    return st.ep->reply_error(
        ctx, error{errc::invalid_argument, "the value does not lie in registered memory here; read it over tcp"});
  }
  if (rs.leases.size() >= rdma_leases_max) {
    return st.ep->reply_error(ctx, error{errc::overloaded, "too many rdma leases held; read over tcp"});
  }
  auto now = st.ep->now();
  auto until = std::min(ctx.deadline, now + std::chrono::duration_cast<clock_duration>(lease_max)) +
               std::chrono::duration_cast<clock_duration>(lease_grace);
  auto id = rs.next_lease++;
  SLUICE_ASSERT(id != 0);
  auto [held, fresh] = rs.leases.emplace(id, rdma_held{*bytes, ctx.source, until});
  SLUICE_ASSERT(fresh);
  SLUICE_ASSERT(rs.leases.size() <= rdma_leases_max);
  used(self, f.key);
  auto offset = where->offset + f.offset;
  wire::rdma_lease l{id, f.version, wire::pool_region{where->segment, offset, f.length}, seg->address + offset, seg->rkey,
                     remaining_us(now, until)};
  st.ep->reply(ctx, std::move(l));
}

void serve_rdma_release(self_ptr self, const request_context& ctx, const wire::rdma_release& r) {
  auto& leases = self->state.rdma.leases;
  auto it = leases.find(r.lease);
  if (it != leases.end() && it->second.reader == ctx.source) leases.erase(it);
}

void rdma_tick(self_ptr self) {
  auto now = self->state.ep->now();
  std::erase_if(self->state.rdma.leases, [now](const auto& entry) { return entry.second.until <= now; });
}

void rdma_retry(self_ptr self, const wire::replica& to) {
  auto& st = self->state;
  if (st.rdma.path == nullptr) return;
  auto it = st.rdma.out.find(to.owner);
  if (it != st.rdma.out.end() && !it->second.waiters.empty()) return;  // being set up already
  if (it != st.rdma.out.end()) {
    st.rdma.path->close_pair(it->second.pair);
    st.rdma.out.erase(it);
  }
  auto until = st.ep->now() + std::chrono::duration_cast<clock_duration>(st.links_cfg.timeout);
  ensure_pair(self, to, until, [self, peer = to.owner](result<void> ok) {
    if (ok) return rdma_worked(self, peer, 0);
    rdma_failed(self, peer, ok.error());
  });
}

}  // namespace sluice::owner_detail
