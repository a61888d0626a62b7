// Invariants (asserted):
//   1. one rpc_sync at a time: its answer comes only while it is in flight;
//   2. one lookup per name at a time: a name in rpc_lookups has someone
//      waiting, and the answer finds them there;
//   3. the owner actor's own request ids never carry rpc_relay_bit, which
//      tells the answers of relayed calls apart;
//   4. rpc buffer ids given to clients are never 0 (0 on the wire means
//      none), and a payload copied into the pool fits its room exactly;
//   5. a call tries at most rpc_attempts_max instances.
#include "actors/owner/owner_rpc.hpp"

#include <cstring>

#include "runtime/assert.hpp"
#include "runtime/overloaded.hpp"
#include "runtime/rpc_limits.hpp"
#include "runtime/units.hpp"

namespace sluice::owner_detail {
namespace {

/// Instances a call to "any" tries before it gives up: each try that
/// finds its instance gone at another owner (it crashed or moved since
/// the master was asked) moves on to the next.
constexpr int rpc_attempts_max = 3;
/// How long a lookup at the master may take; a call waiting for it fails
/// by its own deadline if that comes first.
constexpr std::chrono::seconds rpc_lookup_timeout{2};

/// A call on its way through this owner.
struct call_job {
  request_context ctx;
  wire::rpc_call call;
  shared_bytes args;
  bool from_owner = false;  ///< another owner routed it: deliver here or nowhere
  bool looked_up = false;   ///< the master was asked once already
  bool stale_ok = false;    ///< the master could not be asked
  int attempt = 0;
};

void route_call(self_ptr self, call_job job);

std::string who(const call_job& job, node_id client) {
  return "'" + job.call.method + "' on client " + client.to_string();
}

/// The rpc message in a reply, or why there is none.
result<wire::rpc_body> rpc_of(result<wire::message>& reply) {
  auto body = reply_body<wire::rpc>(reply);
  if (!body) return std::move(body).error();
  return std::move(body->body);
}

// --- the pool ------------------------------------------------------------------

/// `payload` as it should travel to the peer on `link`: a large one for a
/// peer that maps this owner's pool goes there (read in place, never
/// through the rings), copied in once if it is not there yet.
void to_pool(self_ptr self, transport::link_id link, shared_bytes payload,
             std::function<void(result<shared_bytes>)> then, bool made_room = false) {
  auto& st = self->state;
  if (payload.size() < rpc_pool_bytes_min || !st.routes->shares_pool(link) || st.store->locate(payload)) {
    return then(std::move(payload));
  }
  auto room = st.store->reserve(payload.size());
  if (!room && room.code() == errc::no_capacity && !made_room) {
    auto size = payload.size();
    return make_room(self, size, [self, link, payload = std::move(payload), then = std::move(then)]() mutable {
      to_pool(self, link, std::move(payload), std::move(then), true);
    });
  }
  if (!room) return then(room.error());
  SLUICE_ASSERT(room->size() == payload.size());
  // reserve()'s bytes are ours to fill before anyone else sees them.
  std::memcpy(const_cast<std::byte*>(room->data()), payload.data(), payload.size());
  then(std::move(*room));
}

void serve_buffer(self_ptr self, const request_context& ctx, std::uint64_t size, bool made_room = false) {
  auto& st = self->state;
  if (size == 0 || size > st.cfg.max_value_bytes) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "an rpc buffer of " + format_size(size) +
                                                                   "; this owner gives 1 B to " +
                                                                   format_size(st.cfg.max_value_bytes)});
  }
  auto bytes = st.store->reserve(size);
  if (!bytes && bytes.code() == errc::no_capacity && !made_room) {
    return make_room(self, size, [self, ctx, size] {
      if (self->state.ep->peer(ctx.link) != nullptr) serve_buffer(self, ctx, size, true);
    });
  }
  if (!bytes) return st.ep->reply_error(ctx, bytes.error());
  auto where = st.store->locate(*bytes);
  if (!where) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "this owner has no shared-memory pool; send arguments with the call"});
  }
  auto id = st.routes->add_buffer(ctx.source, ctx.link, std::move(*bytes));
  if (!id) return st.ep->reply_error(ctx, id.error());
  SLUICE_ASSERT(*id != 0);
  st.ep->reply(ctx, wire::rpc{wire::rpc_buffer_reply{*id, *where}});
}

// --- the master ------------------------------------------------------------------

/// Tells the master every live instance of this owner, once any change
/// since the last time is due; one sync at a time, in order.
void push_sync(self_ptr self) {
  auto& st = self->state;
  st.rpc_sync_due = true;
  if (!st.registered || st.rpc_sync_in_flight) return;
  st.rpc_sync_due = false;
  st.rpc_sync_in_flight = true;
  wire::rpc sync{wire::rpc_sync{st.routes->live_instances()}};
  ask_master(self, std::move(sync), st.ep->now() + control_timeout, [self](result<wire::message> reply) {
    auto& st = self->state;
    SLUICE_ASSERT(st.rpc_sync_in_flight);
    st.rpc_sync_in_flight = false;
    if (!reply) {
      st.ep->log()->debug("the master did not take this owner's rpc instances: {}", reply.error().to_string());
      st.rpc_sync_due = true;  // the next tick or registration tries again
      return;
    }
    if (st.rpc_sync_due) push_sync(self);
  });
}

/// Asks the master about `name` (one question at a time per name) and
/// learns the answer; `done(true)` when it came.
void lookup_then(self_ptr self, const std::string& name, std::function<void(bool)> done) {
  auto& st = self->state;
  auto& waiting = st.rpc_lookups[name];
  waiting.push_back(std::move(done));
  if (waiting.size() > 1) return;
  ask_master(self, wire::rpc{wire::rpc_lookup{name, false}}, st.ep->now() + rpc_lookup_timeout,
             [self, name](result<wire::message> reply) {
               auto& st = self->state;
               auto body = rpc_of(reply);
               auto* found = body ? std::get_if<wire::rpc_instances>(&*body) : nullptr;
               if (found != nullptr) {
                 auto until = st.ep->now() + std::chrono::duration_cast<clock_duration>(rpc_lookup_ttl);
                 st.routes->learn(name, found->instances, st.ep->me().id, until);
               }
               auto waiting = st.rpc_lookups.find(name);
               SLUICE_ASSERT(waiting != st.rpc_lookups.end());
               SLUICE_ASSERT(!waiting->second.empty());
               auto waiters = std::move(waiting->second);
               st.rpc_lookups.erase(waiting);
               for (auto& w : waiters) w(found != nullptr);
             });
}

// --- calls ---------------------------------------------------------------------------

/// Passes the instance's answer to the caller: the result as payload (a
/// result buffer of a local handler becomes the payload).
void answer_call(self_ptr self, const request_context& ctx, wire::message reply, node_id client,
                 const std::string& method) {
  auto& st = self->state;
  auto* rpc = std::get_if<wire::rpc>(&reply.env.body);
  auto* r = rpc != nullptr ? std::get_if<wire::rpc_reply>(&rpc->body) : nullptr;
  if (r == nullptr) {
    return st.ep->reply_error(ctx, error{errc::protocol, "'" + method + "' answered with " +
                                                           std::string{wire::body_name(reply.env.body)}});
  }
  auto out = std::move(reply.payload);
  if (r->result_buffer != 0) {
    auto buffer = st.routes->take_buffer(r->result_buffer, client);
    if (!buffer) {
      return st.ep->reply_error(ctx, error{errc::protocol, "'" + method + "' answered with an rpc buffer it does not hold"});
    }
    out = std::move(*buffer);
  }
  to_pool(self, ctx.link, std::move(out), [self, ctx](result<shared_bytes> bytes) {
    if (!bytes) return self->state.ep->reply_error(ctx, bytes.error());
    self->state.ep->reply(ctx, wire::rpc{wire::rpc_reply{0}}, std::move(*bytes));
  });
}

/// Sends the call on `link` (to the instance, or to its owner) and
/// passes the answer back; `not_here` runs instead when the other owner
/// says the instance is not there (nothing was delivered).
void forward(self_ptr self, const call_job& job, transport::link_id link, node_id client, shared_bytes args,
             std::function<void()> not_here) {
  auto& st = self->state;
  auto caller = job.call.caller != node_id{} ? job.call.caller : job.ctx.source;
  wire::rpc body{wire::rpc_call{job.call.method, client, job.call.routing, 0, caller}};
  auto key = std::pair{job.ctx.link, job.ctx.request_id};
  auto id = st.ep->request(link, std::move(body), std::move(args), job.ctx.deadline,
                           [self, job, client, key, not_here](result<wire::message> reply) {
                             auto& st = self->state;
                             st.rpc_forwarded.erase(key);
                             st.routes->finished(client);
                             auto body = rpc_of(reply);
                             if (body && std::holds_alternative<wire::rpc_instances>(*body)) return not_here();
                             if (!reply) {
                               return st.ep->reply_error(job.ctx, error{reply.code(), who(job, client) + ": " +
                                                                                          reply.error().message()});
                             }
                             answer_call(self, job.ctx, std::move(*reply), client, job.call.method);
                           });
  if (id == 0) return;  // answered already
  SLUICE_ASSERT((id & rpc_relay_bit) == 0);
  st.rpc_forwarded[key] = forwarded_rpc{link, id};
}

void send_local(self_ptr self, call_job job, const rpc_route& route) {
  auto args = job.args;
  to_pool(self, route.link, std::move(args), [self, job = std::move(job), route](result<shared_bytes> args) {
    if (!args) {
      self->state.routes->finished(route.client);
      return self->state.ep->reply_error(job.ctx, args.error());
    }
    forward(self, job, route.link, route.client, std::move(*args), [self, job, route] {
      self->state.ep->reply_error(job.ctx, error{errc::protocol, who(job, route.client) + ": its link answered as an owner"});
    });
  });
}

void send_remote(self_ptr self, call_job job, const rpc_route& route) {
  auto& st = self->state;
  auto link = owner_link(self, wire::replica{route.owner, route.owner_address});
  if (!link) {
    st.routes->finished(route.client);
    return st.ep->reply_error(job.ctx, link.error());
  }
  auto args = job.args;
  forward(self, job, *link, route.client, std::move(args), [self, job, route]() mutable {
    // Gone from its owner since the master was asked: try another.
    auto& st = self->state;
    st.routes->forget_remote(job.call.method, route.client);
    if (job.call.target == node_id{} && job.attempt + 1 < rpc_attempts_max) {
      ++job.attempt;
      return route_call(self, std::move(job));
    }
    st.ep->reply_error(job.ctx, error{errc::not_found, who(job, route.client) + " is gone"});
  });
}

void no_instance(self_ptr self, const call_job& job) {
  auto& st = self->state;
  // Another owner asked for one of our clients: say it is not here, so
  // that it can try elsewhere (nothing was delivered).
  if (job.from_owner) return st.ep->reply(job.ctx, wire::rpc{wire::rpc_instances{}});
  auto what = job.call.target == node_id{}
                  ? "no live instance serves '" + job.call.method + "'"
                  : "client " + job.call.target.to_string() + " does not serve '" + job.call.method + "'";
  st.ep->reply_error(job.ctx, error{errc::not_found, what});
}

void route_call(self_ptr self, call_job job) {
  auto& st = self->state;
  SLUICE_ASSERT(job.attempt >= 0);
  SLUICE_ASSERT(job.attempt < rpc_attempts_max);
  auto m = job.from_owner ? rpc_routes::mode::local_only
           : job.stale_ok || job.looked_up ? rpc_routes::mode::stale_ok
                                           : rpc_routes::mode::any;
  auto route = st.routes->route(job.call.method, job.call.target, job.call.routing, st.ep->now(), m);
  switch (route.what) {
    case rpc_route::kind::local: return send_local(self, std::move(job), route);
    case rpc_route::kind::remote: return send_remote(self, std::move(job), route);
    case rpc_route::kind::none: return no_instance(self, job);
    case rpc_route::kind::lookup: break;
  }
  auto name = job.call.method;
  lookup_then(self, name, [self, job = std::move(job)](bool answered) mutable {
    job.looked_up = true;
    job.stale_ok = !answered;
    route_call(self, std::move(job));
  });
}

void serve_call(self_ptr self, const request_context& ctx, wire::rpc_call& call, shared_bytes payload) {
  auto& st = self->state;
  if (auto ok = check_rpc_name(call.method); !ok) return st.ep->reply_error(ctx, ok.error());
  const auto* peer = st.ep->peer(ctx.link);
  call_job job{ctx, std::move(call), std::move(payload), peer != nullptr && peer->peer_role == role::owner};
  if (job.call.args_buffer != 0) {
    auto buffer = st.routes->take_buffer(job.call.args_buffer, ctx.source);
    if (!buffer) {
      return st.ep->reply_error(ctx, error{errc::invalid_argument, "the call names rpc buffer " +
                                                                     std::to_string(job.call.args_buffer) +
                                                                     ", which this client does not hold"});
    }
    job.args = std::move(*buffer);
    job.call.args_buffer = 0;
  }
  route_call(self, std::move(job));
}

void serve_cancel(self_ptr self, const request_context& ctx, std::uint64_t call) {
  auto& st = self->state;
  auto it = st.rpc_forwarded.find({ctx.link, call});
  if (it == st.rpc_forwarded.end()) return;  // answered already
  st.ep->notify(it->second.link, wire::rpc{wire::rpc_cancel{it->second.request}});
  st.rpc_forwarded.erase(it);
}

// --- serving -------------------------------------------------------------------------

void serve_serve(self_ptr self, const request_context& ctx, const wire::rpc_serve& s) {
  auto& st = self->state;
  const auto* peer = st.ep->peer(ctx.link);
  if (peer == nullptr || peer->peer_role != role::client) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument, "only clients serve rpc names"});
  }
  if (auto ok = check_rpc_name(s.name); !ok) return st.ep->reply_error(ctx, ok.error());
  auto ok = st.routes->serve(s.name, rpc_routes::local_instance{ctx.source, peer->name, ctx.link, s.max_concurrent, s.stream});
  if (!ok) return st.ep->reply_error(ctx, ok.error());
  st.ep->log()->debug("client {} serves '{}'", ctx.source.to_string(), s.name);
  st.ep->reply(ctx, wire::ok_reply{});
  push_sync(self);
}

void serve_lookup(self_ptr self, const request_context& ctx, wire::rpc_lookup l) {
  ask_master(self, wire::rpc{std::move(l)}, ctx.deadline, [self, ctx](result<wire::message> reply) {
    auto body = rpc_of(reply);
    if (!body) return self->state.ep->reply_error(ctx, body.error());
    self->state.ep->reply(ctx, wire::rpc{std::move(*body)});
  });
}

}  // namespace

void serve_rpc(self_ptr self, const request_context& ctx, wire::rpc& msg, shared_bytes payload) {
  auto& st = self->state;
  std::visit(overloaded{
                 [&](wire::rpc_call& c) { serve_call(self, ctx, c, std::move(payload)); },
                 [&](wire::rpc_cancel& c) { serve_cancel(self, ctx, c.call); },
                 [&](wire::rpc_serve& s) { serve_serve(self, ctx, s); },
                 [&](wire::rpc_unserve& u) {
                   if (st.routes->unserve(u.name, ctx.source)) push_sync(self);
                   st.ep->reply(ctx, wire::ok_reply{});
                 },
                 [&](wire::rpc_lookup& l) { serve_lookup(self, ctx, std::move(l)); },
                 [&](wire::rpc_buffer& b) { serve_buffer(self, ctx, b.size); },
                 [&](wire::rpc_release& r) { st.routes->take_buffer(r.buffer, ctx.source); },
                 [&](auto& other) {
                   st.ep->reply_error(ctx, error{errc::invalid_argument,
                                                 "an owner does not serve " +
                                                     std::string{wire::rpc_body_name(wire::rpc_body{other})}});
                 },
             },
             msg.body);
}

void rpc_link_down(self_ptr self, transport::link_id link, const error& reason) {
  auto& st = self->state;
  auto gone = st.routes->link_down(link);
  for (auto& r : gone.unanswered) {
    request_context caller{r.caller_link, r.caller_request, r.caller, {}};
    st.ep->reply_error(caller, error{errc::unavailable, "'" + r.method + "' on client " + r.client.to_string() +
                                                            " went away before it answered: " + reason.to_string()});
  }
  for (auto& r : gone.abandoned) st.ep->notify(r.handler_link, wire::rpc{wire::rpc_cancel{r.id}});
  // Calls this actor passed on for a caller on that link: nobody waits
  // for them any more.
  for (auto it = st.rpc_forwarded.begin(); it != st.rpc_forwarded.end();) {
    if (it->first.first != link) {
      ++it;
      continue;
    }
    st.ep->notify(it->second.link, wire::rpc{wire::rpc_cancel{it->second.request}});
    it = st.rpc_forwarded.erase(it);
  }
  if (!gone.names.empty()) push_sync(self);
}

void rpc_registered(self_ptr self) { push_sync(self); }

void rpc_tick(self_ptr self) {
  auto& st = self->state;
  auto now = st.ep->now();
  // A serving client whose session lapsed (it stopped answering though
  // its links stay open) takes no calls to "any", here or elsewhere.
  if (st.routes->set_live(st.ep->peers_in_role(role::client, now - st.cfg.client_timeout))) push_sync(self);
  for (auto& r : st.routes->expired(now)) st.ep->notify(r.handler_link, wire::rpc{wire::rpc_cancel{r.id}});
  // Names in use are looked up again before what is known expires, so
  // that calls do not wait for the master.
  auto before = now + st.heartbeat_interval * 2;
  for (auto& name : st.routes->to_refresh(before)) lookup_then(self, name, [](bool) {});
  if (st.rpc_sync_due) push_sync(self);
}

}  // namespace sluice::owner_detail
