#include "actors/client/client.hpp"

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>
#include <caf/send.hpp>
#include <caf/actor_cast.hpp>

namespace sluice {
namespace {

struct client_state {
  std::optional<endpoint> ep;
  std::shared_ptr<rpc_served_slot> served;
  std::vector<std::string> owner_addresses;
  std::optional<transport::link_id> link;
  clock_duration keepalive{};
  static inline const char* name = "sluice.client";
};

using self_ptr = client_actor::stateful_pointer<client_state>;

void on_call(self_ptr self, api_call& call) {
  auto& st = self->state;
  if (!st.link) {
    // (Re)connect on demand; the transport queues our frames until the
    // link is up, and the endpoint fails them if it never comes up.
    result<transport::link_id> link = error{errc::invalid_argument, "no owner address"};
    for (auto& address : st.owner_addresses) {
      link = st.ep->connect(address);
      if (link) break;
    }
    if (!link) {
      if (call.done) call.done(std::move(link).error());
      return;
    }
    st.link = *link;
  }
  if (call.notify) {
    st.ep->notify(*st.link, std::move(call.request), std::move(call.payload));
    return;
  }
  auto deadline = st.ep->now() + std::chrono::duration_cast<clock_duration>(call.timeout);
  st.ep->request(*st.link, std::move(call.request), std::move(call.payload), deadline,
                 std::move(call.done));
}

/// A request or notification from the owner: an RPC call to a handler
/// served on this link, or its cancel; anything else is ignored.
void on_served(self_ptr self, transport::link_id link, wire::message msg) {
  auto& st = self->state;
  auto* rpc = std::get_if<wire::rpc>(&msg.env.body);
  auto target = st.served ? st.served->get() : nullptr;
  if (rpc != nullptr && std::holds_alternative<wire::rpc_cancel>(rpc->body)) {
    if (target) target->on_cancel(std::get<wire::rpc_cancel>(rpc->body).call);
    return;
  }
  if (rpc == nullptr || !std::holds_alternative<wire::rpc_call>(rpc->body) || msg.env.request_id == 0) {
    st.ep->log()->debug("ignoring {} from the owner", wire::body_name(msg.env.body));
    return;
  }
  auto ctx = st.ep->context_of(link, msg);
  if (!target) {
    return st.ep->reply_error(ctx, error{errc::not_found, "client " + st.ep->me().id.to_string() +
                                                                 " serves nothing on this link"});
  }
  target->on_call(std::move(msg), [actor = caf::actor_cast<caf::actor>(self), ctx](wire::body body, shared_bytes payload) {
    caf::anon_send(actor, rpc_answer_atom::value, served_answer{ctx, std::move(body), std::move(payload)});
  });
}

client_actor::behavior_type client_behavior(self_ptr self, client_deps deps) {
  auto& st = self->state;
  st.served = deps.served;
  st.owner_addresses = deps.owner_addresses;
  st.keepalive = deps.keepalive;
  st.ep.emplace(self, *deps.net, deps.identity, get_logger("client"),
                [self](clock_duration d) { self->delayed_send(self, d, sweep_atom::value); },
                deps.faults);
  if (st.keepalive > clock_duration::zero()) self->delayed_send(self, st.keepalive, tick_atom::value);
  return {
      [self](tick_atom) {
        // Keeps this client's session alive at its owner (see owner_section::client_timeout).
        auto& st = self->state;
        if (st.link) st.ep->notify(*st.link, wire::ping{});
        self->delayed_send(self, timer_delay(st.ep->faults(), st.keepalive), tick_atom::value);
      },
      [self](link_up_atom, transport::link_id link, const std::string& peer) {
        self->state.ep->link_up(link, peer);
      },
      [self](inbound_atom, transport::link_id link, wire::message& msg) {
        if (auto request = self->state.ep->inbound(link, std::move(msg))) on_served(self, link, std::move(*request));
      },
      [self](inbound_batch_atom, std::vector<inbound_item>& batch) {
        self->state.ep->inbound_batch(batch, [self](transport::link_id link, wire::message msg) {
          on_served(self, link, std::move(msg));
        });
      },
      [self](rpc_answer_atom, served_answer& a) {
        self->state.ep->reply(a.ctx, std::move(a.body), std::move(a.payload));
      },
      [self](link_down_atom, transport::link_id link, const error& reason) {
        auto& st = self->state;
        st.ep->link_down(link, reason);
        if (st.link != link) return;
        st.link.reset();
        if (auto target = st.served ? st.served->get() : nullptr) target->on_link_down();
      },
      [self](sweep_atom) { self->state.ep->sweep(); },
      [self](flush_atom) { self->state.ep->flush(); },
      [self](api_atom, api_call& call) { on_call(self, call); },
      [self](stop_atom) {
        self->quit();
        return true;
      },
  };
}

}  // namespace

client_actor spawn_client(caf::actor_system& sys, client_deps deps) {
  return sys.spawn(client_behavior, std::move(deps));
}

}  // namespace sluice
