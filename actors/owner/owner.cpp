#include "actors/owner/owner.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/owner/owner_rpc.hpp"
#include "actors/owner/owner_state.hpp"
#include "runtime/keys.hpp"
#include "runtime/overloaded.hpp"
#include "runtime/units.hpp"

namespace sluice {

// --- the master ---------------------------------------------------------

void owner_detail::ask_master(self_ptr self, wire::body body, clock_time deadline, reply_handler on_reply) {
  auto& st = self->state;
  if (!st.master_link || !st.registered) {
    on_reply(error{errc::unavailable, "this owner is not connected to the master"});
    return;
  }
  // The fast path's commits go first: the request names them (after),
  // and the master would hold it until they came.
  send_commits(self);
  st.ep->request(*st.master_link, std::move(body), {}, deadline, std::move(on_reply));
}

namespace {

using namespace owner_detail;

void schedule_reconnect(self_ptr self) {
  auto& st = self->state;
  if (st.reconnect_armed) return;
  st.reconnect_armed = true;
  auto interval = std::chrono::duration_cast<clock_duration>(st.cfg.reconnect_interval);
  self->delayed_send(self, timer_delay(st.ep->faults(), interval), reconnect_atom::value);
}

/// The master answered a heartbeat (or registration) sent at `sent`: the
/// fast index may answer until the lease, counted from then, runs out.
void renew_lease(self_ptr self, clock_time sent) {
  auto& st = self->state;
  if (st.lease == clock_duration::zero()) return;
  auto until = sent + st.lease;
  if (until <= st.lease_until) return;
  st.lease_until = until;
  st.index->set_lease(until);
}

/// Tells a master this owner just registered with what it holds, all
/// pages at once — nothing else it sends can fall between them — and
/// frees what the master does not list.
void send_inventory(self_ptr self, transport::link_id link) {
  constexpr std::size_t page_entries = 4096;
  auto& st = self->state;
  auto held = st.store->inventory();
  auto deadline = st.ep->now() + control_timeout;
  std::string after;
  std::size_t at = 0;
  do {
    wire::inventory page;
    page.after = after;
    auto end = std::min(held.size(), at + page_entries);
    // A page ends between keys, never between two versions of one key.
    while (end < held.size() && end > at && held[end].first == held[end - 1].first) ++end;
    for (; at < end; ++at) page.entries.push_back(wire::key_version{held[at].first, held[at].second});
    page.final = at == held.size();
    if (!page.entries.empty()) after = page.entries.back().key;
    st.ep->request(link, std::move(page), {}, deadline, [self](result<wire::message> reply) {
      auto unknown = reply_body<wire::inventory_reply>(reply);
      if (!unknown) return;  // the next registration tries again
      auto& st = self->state;
      for (auto& u : unknown->unknown) {
        st.index->erase_version(u.key, u.version);
        if (st.store->drop(u.key, u.version)) gone(self, u.key, u.version);
      }
      if (!unknown->unknown.empty()) {
        st.ep->log()->info("freed {} values the master does not list", unknown->unknown.size());
      }
    });
  } while (at < held.size());
}

void register_with_master(self_ptr self) {
  auto& st = self->state;
  // (Re)registering means the master may have declared this owner down
  // and moved on without it (or be a new master): whatever the fast index
  // holds may be stale from now on, whether or not the answer arrives.
  st.index->clear();
  st.index->set_lease({});
  st.index->give_up_all();
  st.lease_until = {};
  wire::register_owner r{st.ep->me().name, st.ep->me().listen_address, st.store->capacity_bytes(),
                        st.incarnation, st.policy != nullptr, st.index->first_unacknowledged()};
  auto sent = st.ep->now();
  auto deadline = sent + control_timeout;
  auto link = *st.master_link;
  st.ep->request(link, std::move(r), {}, deadline, [self, link, sent](result<wire::message> reply) {
    auto& st = self->state;
    if (st.master_link != link) return;  // a newer link replaced this one
    auto r = reply_body<wire::register_owner_reply>(reply);
    if (r && r->heartbeat_interval_us == 0) r = error{errc::protocol, "heartbeat interval 0"};
    if (!r) {
      // A lost link is reported (once) by on_link_down; anything else is
      // worth a line of its own.
      if (r.code() != errc::unavailable) {
        st.ep->log()->warn("registration with the master failed: {}", r.error().to_string());
      }
      st.ep->close(link);
      return;
    }
    bool first = !st.registered;
    st.registered = true;
    st.master_warned = false;
    st.master_id = reply->env.source;
    st.lease = std::chrono::microseconds{r->lease_us};
    renew_lease(self, sent);
    st.heartbeat_interval = std::chrono::microseconds{r->heartbeat_interval_us};
    st.ep->log()->info("registered with the master as {}", st.ep->me().id.to_string());
    // The fast path's commits the last master did not acknowledge go
    // again, ahead of the inventory (which names them).
    st.index->resend();
    send_commits(self);
    send_inventory(self, link);
    // The other owners: who may relay, should a direct path fail.
    refresh_owners(self, [] {});
    rpc_registered(self);
    if (first) self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
  });
}

void connect_master(self_ptr self) {
  auto& st = self->state;
  auto link = st.ep->connect(st.cfg.master);
  if (!link) {
    st.ep->log()->debug("cannot reach the master at {}: {}", st.cfg.master, link.error().to_string());
    schedule_reconnect(self);
    return;
  }
  st.master_link = *link;
  register_with_master(self);
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (!st.registered) return;  // registration restarts the ticks
  retry_paths(self);
  rdma_tick(self);
  rpc_tick(self);
  wire::heartbeat h{st.store->used_bytes(), st.store->object_count(), st.evictions,
                    st.ep->peers_in_role(role::client, st.ep->now() - st.cfg.client_timeout), link_report(self)};
  auto sent = st.ep->now();
  auto deadline = sent + st.heartbeat_interval * 2;
  auto link = *st.master_link;
  st.ep->request(link, std::move(h), {}, deadline, [self, link, sent](result<wire::message> reply) {
    auto& st = self->state;
    if (st.master_link != link) return;
    auto r = reply_body<wire::heartbeat_reply>(reply);
    if (r && r->known) renew_lease(self, sent);
    if (r && !r->known) {
      st.ep->log()->warn("the master no longer knows this owner; registering again");
      register_with_master(self);
    }
  });
  self->delayed_send(self, timer_delay(st.ep->faults(), st.heartbeat_interval), tick_atom::value);
}

// --- other owners -------------------------------------------------------

void init_links(self_ptr self, const links_section& cfg) {
  auto& st = self->state;
  st.links_cfg = cfg;
  transport::link_policy policy;
  policy.order.clear();
  for (auto& name : cfg.order) {
    if (auto kind = transport::parse_path_kind(name)) policy.order.push_back(*kind);
  }
  policy.retry_initial = cfg.retry;
  policy.retry_max = cfg.retry_max;
  st.links = transport::link_manager{policy};
  // Between owners shared memory never applies; rdma only where the node
  // has a path (a device, or the software provider it was told to use).
  st.links.set_available(transport::path_kind::shm, false);
  st.links.set_available(transport::path_kind::rdma, st.rdma.path != nullptr);
  st.ep->set_forwarder([self](transport::link_id from, wire::message msg) { relay_frame(self, from, std::move(msg)); });
}

}  // namespace

result<transport::link_id> owner_detail::owner_link(self_ptr self, const wire::replica& r) {
  auto& st = self->state;
  // A link this owner is closing stays known until its close is reported;
  // it carries nothing more.
  if (auto link = st.ep->link_to(r.owner); link && !st.closing.contains(*link)) return *link;
  if (auto it = st.dialing.find(r.owner); it != st.dialing.end() && !st.closing.contains(it->second)) {
    return it->second;
  }
  auto link = st.ep->connect(r.address);
  if (link) st.dialing[r.owner] = *link;
  return link;
}

void owner_detail::close_link(self_ptr self, transport::link_id link) {
  self->state.closing.insert(link);
  self->state.ep->close(link);
}

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
    if (st.master_link) st.ep->notify(*st.master_link, wire::abort_put{key, version});
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

// --- kv, served to clients ------------------------------------------------

void serve_put(self_ptr self, const request_context& ctx, std::string key, shared_bytes value,
               wire::put_condition condition, std::uint64_t ttl_ms, std::uint32_t replicas,
               std::string prefer_owner, bool waited = false) {
  auto& st = self->state;
  if (auto ok = check_key(key); !ok) return st.ep->reply_error(ctx, ok.error());
  if (value.size() > st.cfg.max_value_bytes) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "the value is " + format_size(value.size()) +
                                             "; this owner accepts at most " +
                                             format_size(st.cfg.max_value_bytes)});
  }
  // A plain put this owner holds lets it ask for the key's slot, so the
  // next ones need no master (see fast_path.hpp).
  bool plain = !condition.any() && ttl_ms == 0 && replicas <= 1 && prefer_owner.empty();
  if (plain && commit_here(self, ctx, key, value)) return;
  if (plain && !waited && claiming(self, key)) {
    // The key's slot is being asked for: once the answer is in, this put
    // may need no master either.
    return after_claim(self, [self, ctx, key, value, condition, ttl_ms, replicas] {
      serve_put(self, ctx, key, value, condition, ttl_ms, replicas, {}, true);
    });
  }
  leave_slot(self, key);
  wire::place p{key, value.size(), st.ep->me().id, condition, ttl_ms, replicas, std::move(prefer_owner)};
  ask_master(self, std::move(p), ctx.deadline, [self, ctx, key, value, ttl_ms, plain](result<wire::message> reply) {
    auto& st = self->state;
    auto placed = reply_body<wire::place_reply>(reply);
    if (!placed) return st.ep->reply_error(ctx, placed.error());
    auto version = placed->version;
    bool mine = placed->target.owner == st.ep->me().id;
    // Once the holder committed, further copies are made and registered;
    // the put answers when they are done (or failed: it stays committed).
    auto committed = [self, ctx, key, value, ttl_ms, version, extra = placed->extra, plain, mine](result<std::uint64_t> v) {
      if (!v) return self->state.ep->reply_error(ctx, v.error());
      if (plain && mine) want_slot(self, key);
      if (extra.empty()) return self->state.ep->reply(ctx, wire::kv_put_reply{version});
      copy_to_replicas(self, key, version, value, ttl_ms, extra, ctx.deadline, [self, ctx, key, version, extra](std::size_t made) {
        if (made < extra.size()) {
          self->state.ep->log()->warn("put of '{}' (version {}) has {} of {} copies", key, version, made + 1,
                                      extra.size() + 1);
        }
        self->state.ep->reply(ctx, wire::kv_put_reply{version});
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

/// Asks the master on a client's behalf and passes its answer on.
template <class Reply>
void forward_to_master(self_ptr self, const request_context& ctx, wire::body request) {
  ask_master(self, std::move(request), ctx.deadline, [self, ctx](result<wire::message> reply) {
    auto body = reply_body<Reply>(reply);
    if (!body) return self->state.ep->reply_error(ctx, body.error());
    self->state.ep->reply(ctx, std::move(*body));
  });
}

void serve_reserve(self_ptr self, const request_context& ctx, const wire::kv_reserve& r, bool made_room = false) {
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
  st.reservations.emplace(id, reservation{ctx.link, r.key, std::move(*bytes), r.condition, r.ttl_ms, r.replicas, r.prefer_owner});
  st.ep->reply(ctx, wire::kv_reserve_reply{id, *where});
}

void serve_commit_reservation(self_ptr self, const request_context& ctx, std::uint64_t id) {
  auto& st = self->state;
  auto it = st.reservations.find(id);
  if (it == st.reservations.end() || it->second.link != ctx.link) {
    return st.ep->reply_error(ctx, error{errc::invalid_argument,
                                         "no reservation " + std::to_string(id) + " on this link"});
  }
  auto r = std::move(it->second);
  st.reservations.erase(it);
  serve_put(self, ctx, std::move(r.key), std::move(r.bytes), r.condition, r.ttl_ms, r.replicas,
            std::move(r.prefer_owner));
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

void on_request(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  auto ctx = st.ep->context_of(link, msg);
  std::visit(
      overloaded{
          [&](wire::kv_put& p) { serve_put(self, ctx, std::move(p.key), std::move(msg.payload), p.condition, p.ttl_ms, p.replicas,
                      std::move(p.prefer_owner));
          },
          [&](wire::kv_get& g) { serve_get(self, ctx, std::move(g.key), 0); },
          [&](wire::kv_remove& r) { serve_remove(self, ctx, std::move(r.key), r.if_version); },
          [&](wire::kv_exists& e) { serve_exists(self, ctx, std::move(e.key)); },
          [&](wire::cluster_status& s) { forward_to_master<wire::cluster_status_reply>(self, ctx, s); },
          [&](wire::list_keys& l) { forward_to_master<wire::list_keys_reply>(self, ctx, std::move(l)); },
          [&](wire::count_keys& c) { forward_to_master<wire::count_keys_reply>(self, ctx, std::move(c)); },
          [&](wire::pin& p) {
            // A session pin is the client's: the owner vouches for who it is.
            if (p.session != 0) p.session = ctx.source.value;
            forward_to_master<wire::pin_reply>(self, ctx, std::move(p));
          },
          [&](wire::unpin& u) {
            if (u.session != 0) u.session = ctx.source.value;
            forward_to_master<wire::unpin_reply>(self, ctx, std::move(u));
          },
          [&](wire::fetch& f) { serve_fetch(self, ctx, f); },
          [&](wire::fetch_range& f) { serve_fetch_range(self, ctx, f); },
          [&](wire::store& s) { serve_store(self, ctx, s, std::move(msg.payload)); },
          [&](wire::drop& d) {
            st.index->erase_version(d.key, d.version);
            st.store->drop(d.key, d.version);
            gone(self, d.key, d.version);
          },
          [&](wire::invalidate& i) {
            st.index->erase(i.key);
            st.index->give_up(slot_of(i.key), i.generation);
            answer_flushed(self, ctx);
          },
          [&](wire::barrier&) { answer_flushed(self, ctx); },
          [&](wire::kv_reserve& r) { serve_reserve(self, ctx, r); },
          [&](wire::kv_commit& c) { serve_commit_reservation(self, ctx, c.reservation); },
          [&](wire::kv_abort& a) {
            auto it = st.reservations.find(a.reservation);
            if (it != st.reservations.end() && it->second.link == link) st.reservations.erase(it);
          },
          [&](wire::rpc& r) { serve_rpc(self, ctx, r, std::move(msg.payload)); },
          [&](wire::rdma_connect& c) { serve_rdma_connect(self, ctx, c); },
          [&](wire::rdma_release& r) { serve_rdma_release(self, ctx, r); },
          [&](auto& other) {
            st.ep->reply_error(ctx, error{errc::invalid_argument,
                                          "an owner does not serve " +
                                              std::string{wire::body_name(wire::body{other})}});
          },
      },
      msg.env.body);
}

void on_link_down(self_ptr self, transport::link_id link, const error& reason) {
  auto& st = self->state;
  st.ep->link_down(link, reason);
  st.index->forget_link(link);
  std::erase_if(st.dialing, [link](const auto& entry) { return entry.second == link; });
  st.closing.erase(link);
  // A client that went away never commits: its reservations go back.
  std::erase_if(st.reservations, [link](const auto& entry) { return entry.second.link == link; });
  rpc_link_down(self, link, reason);
  if (st.master_link == link) {
    // Say it once when the master goes away, not on every failed retry.
    auto level = st.master_warned ? spdlog::level::debug : spdlog::level::warn;
    st.master_warned = true;
    st.ep->log()->log(level, "no link to the master at {}: {}; retrying every {}", st.cfg.master,
                      reason.to_string(), format_duration(st.cfg.reconnect_interval));
    st.master_link.reset();
    st.registered = false;
    st.index->set_lease({});
    st.index->give_up_all();
    st.lease_until = {};
    schedule_reconnect(self);
  }
}

owner_actor::behavior_type owner_behavior(self_ptr self, owner_deps deps) {
  auto& st = self->state;
  st.cfg = deps.config;
  st.store = std::move(deps.store);
  st.incarnation = deps.incarnation;
  st.policy = make_eviction_policy(st.cfg.eviction);
  st.index = deps.index ? std::move(deps.index) : std::make_shared<fast_index>();
  st.rdma.path = deps.rdma;
  st.routes = deps.routes ? std::move(deps.routes) : std::make_shared<rpc_routes>();
  st.ep.emplace(self, *deps.net, deps.identity, get_logger("owner"),
                [self](clock_duration d) { self->delayed_send(self, d, sweep_atom::value); },
                deps.faults);
  // Everything this owner sends names the last of its own commits sent
  // before it (see fast_path.hpp).
  st.ep->set_stamp([index = st.index] { return index->sent_through(); });
  st.index->set_max_value_bytes(st.cfg.fast_puts ? st.cfg.max_value_bytes : 0);
  init_links(self, deps.links);
  connect_master(self);
  return {
      [self](link_up_atom, transport::link_id link, const std::string& peer) {
        self->state.ep->link_up(link, peer);
      },
      [self](inbound_atom, transport::link_id link, wire::message& msg) {
        if (auto request = self->state.ep->inbound(link, std::move(msg))) {
          on_request(self, link, std::move(*request));
        }
      },
      [self](inbound_batch_atom, std::vector<inbound_item>& batch) {
        self->state.ep->inbound_batch(batch, [self](transport::link_id link, wire::message msg) {
          on_request(self, link, std::move(msg));
        });
      },
      [self](link_down_atom, transport::link_id link, const error& reason) {
        on_link_down(self, link, reason);
      },
      [self](sweep_atom) { self->state.ep->sweep(); },
      [self](flush_atom) { self->state.ep->flush(); },
      [self](tick_atom) { on_tick(self); },
      [self](commits_atom) { commits_waiting(self); },
      [self](rdma_atom, std::uint64_t work, bool ok, const std::string& why) { rdma_completed(self, work, ok, why); },
      [self](rdma_atom, std::uint64_t job) { rdma_overdue(self, job); },
      [self](report_atom) {
        self->state.report_armed = false;
        send_commits(self);
      },
      [self](reconnect_atom) {
        self->state.reconnect_armed = false;
        if (!self->state.master_link) connect_master(self);
      },
      [self](stop_atom) {
        auto& st = self->state;
        if (st.master_link && st.registered) st.ep->notify(*st.master_link, wire::leave{});
        self->quit();
        return true;
      },
  };
}

}  // namespace

owner_actor spawn_owner(caf::actor_system& sys, owner_deps deps) {
  return sys.spawn(owner_behavior, std::move(deps));
}

}  // namespace sluice
