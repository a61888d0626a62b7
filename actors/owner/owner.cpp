// The owner actor's behaviour: what it answers, which requests go to which
// part (owner_*.cpp), and what a lost link undoes. spawn_owner builds it.
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
namespace {

using namespace owner_detail;

/// Asks the master on a client's behalf and passes its answer on.
template <class Reply>
void forward_to_master(self_ptr self, const request_context& ctx, wire::body request) {
  ask_master(self, std::move(request), ctx.deadline, [self, ctx](result<wire::message> reply) {
    auto body = reply_body<Reply>(reply);
    if (!body) return self->state.ep->reply_error(ctx, body.error());
    self->state.ep->reply(ctx, std::move(*body));
  });
}

/// Passes an MQ request on to the master, vouching for the client: the
/// session a member speaks for is always its own. (A producer names
/// itself: its id must outlive the process for retries to be deduped.)
void forward_mq(self_ptr self, const request_context& ctx, wire::mq m) {
  std::visit(overloaded{
                 [&](wire::mq_join& j) { j.session = ctx.source.value; },
                 [&](wire::mq_leave& l) { l.session = ctx.source.value; },
                 [&](wire::mq_poll& p) { p.session = ctx.source.value; },
                 [&](wire::mq_settle& s) { s.session = ctx.source.value; },
                 [](auto&) {},
             },
             m.body);
  ask_master(self, std::move(m), ctx.deadline, [self, ctx](result<wire::message> reply) {
    if (!reply) return self->state.ep->reply_error(ctx, reply.error());
    self->state.ep->reply(ctx, std::move(reply->env.body));
  });
}

void on_request(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  auto ctx = st.ep->context_of(link, msg);
  std::visit(
      overloaded{
          [&](wire::kv_put& p) { serve_put(self, ctx, std::move(p.key), std::move(msg.payload), p.condition, p.ttl_ms, p.replicas,
                      std::move(p.prefer_owner), p.min_replicas);
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
          [&](wire::repair_copy& r) { serve_repair_copy(self, ctx, r); },
          [&](wire::drop& d) {
            st.index->erase_version(d.key, d.version);
            st.store->drop(d.key, d.version);
            gone(self, d.key, d.version);
            st.ep->reply(ctx, wire::ok_reply{});  // the master asks (a notification is not answered)
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
            if (it != st.reservations.end() && made_by(st, it->second, link)) st.reservations.erase(it);
            // Sent as a request, it is answered once the room is back.
            st.ep->reply(ctx, wire::ok_reply{});
          },
          [&](wire::rpc& r) { serve_rpc(self, ctx, r, std::move(msg.payload)); },
          [&](wire::mq& m) {
            if (auto* p = std::get_if<wire::mq_prefetch>(&m.body)) return serve_mq_prefetch(self, ctx, *p);
            forward_mq(self, ctx, std::move(m));
          },
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
  if (st.master_link == link) master_link_lost(self, reason);
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
  init_master_paths(self);
  init_gpu(self, deps.gpu);
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
      [self](gpu_atom) { return report_gpu(self); },
      [self](report_atom) {
        self->state.report_armed = false;
        send_commits(self);
      },
      [self](reconnect_atom) {
        self->state.reconnect_armed = false;
        connect_master(self);
      },
      [self](stop_atom) {
        auto& st = self->state;
        if (st.registered) tell_master(self, wire::leave{});
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
