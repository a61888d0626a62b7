#include "actors/owner/rpc_relay.hpp"

#include "actors/common/endpoint.hpp"
#include "runtime/assert.hpp"
#include "runtime/rpc_limits.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {
namespace {

using relayed = std::optional<transport::relayed_frame>;

transport::relayed_frame error_to(transport::link_id link, node_id self, node_id caller, std::uint64_t request,
                                  const error& err) {
  SLUICE_ASSERT(request != 0);
  wire::envelope env;
  env.reply_to = request;
  env.source = self;
  env.target = caller;
  env.body = wire::error_reply{err.code(), err.message()};
  return {link, wire::encode(env)};
}

/// A call to a local instance: it goes to the instance with a relay id,
/// the frame passed on as it came (its ids rewritten).
relayed relay_call(rpc_routes& routes, node_id self, transport::link_id from, const wire::inbound_frame& frame,
                   const wire::envelope_peek& head, std::chrono::steady_clock::time_point now) {
  const auto& call = *head.call;
  // Arguments this large go through the pool (the caller sent a buffer);
  // the actor copies other large ones there.
  if (call.args_buffer == 0 && frame.payload.size() >= rpc_pool_bytes_min) return std::nullopt;
  auto route = routes.route(call.method, call.target, call.routing, now, rpc_routes::mode::relay);
  if (route.what != rpc_route::kind::local) return std::nullopt;
  auto budget = head.deadline_us == 0 ? std::chrono::microseconds{max_request_timeout}
                                      : std::min(std::chrono::microseconds{head.deadline_us},
                                                 std::chrono::microseconds{max_request_timeout});
  rpc_relay r{0, from, head.request_id, head.source, route.link, route.client, std::string{call.method}, now + budget};
  auto id = routes.add_relay(std::move(r));
  if (!id) {
    routes.finished(route.client);
    return std::nullopt;
  }
  SLUICE_ASSERT((*id & rpc_relay_bit) != 0);
  if (call.args_buffer == 0) {
    if (auto out = wire::relabel(frame, {*id, 0, route.client}, frame.payload)) {
      return transport::relayed_frame{route.link, std::move(*out)};
    }
  }
  auto fail_call = [&](error err) {
    routes.take_relay(*id, route.link);
    routes.finished(route.client);
    return error_to(from, self, head.source, head.request_id, err);
  };
  auto msg = wire::decode(frame);
  if (!msg) return fail_call(msg.error());
  auto args = std::move(msg->payload);
  if (call.args_buffer != 0) {
    auto buffer = routes.take_buffer(call.args_buffer, head.source);
    if (!buffer) {
      return fail_call(error{errc::invalid_argument, "the call names rpc buffer " + std::to_string(call.args_buffer) +
                                                         ", which this client does not hold"});
    }
    args = std::move(*buffer);
  }
  auto env = std::move(msg->env);
  env.request_id = *id;
  env.target = route.client;
  env.body = wire::rpc{wire::rpc_call{std::string{call.method}, route.client, call.routing, 0, env.source}};
  return transport::relayed_frame{route.link, wire::encode(env, std::move(args))};
}

/// The answer to a relayed call: back to the caller, under its own id.
relayed relay_answer(rpc_routes& routes, node_id self, transport::link_id from, const wire::inbound_frame& frame,
                     const wire::envelope_peek& head) {
  auto r = routes.take_relay(head.reply_to, from);
  if (!r) return transport::relayed_frame{};  // the caller gave up, or it expired: drop it
  SLUICE_ASSERT(r->caller_request != 0);
  routes.finished(r->client);
  if (head.result_buffer == 0) {
    if (auto out = wire::relabel(frame, {0, r->caller_request, r->caller}, frame.payload)) {
      return transport::relayed_frame{r->caller_link, std::move(*out)};
    }
  }
  auto msg = wire::decode(frame);
  if (!msg) return error_to(r->caller_link, self, r->caller, r->caller_request, msg.error());
  auto payload = std::move(msg->payload);
  if (auto* rpc = std::get_if<wire::rpc>(&msg->env.body)) {
    auto* reply = std::get_if<wire::rpc_reply>(&rpc->body);
    if (reply != nullptr && reply->result_buffer != 0) {
      auto buffer = routes.take_buffer(reply->result_buffer, msg->env.source);
      if (!buffer) {
        return error_to(r->caller_link, self, r->caller, r->caller_request,
                        error{errc::protocol, "the handler answered with an rpc buffer it does not hold"});
      }
      payload = std::move(*buffer);
      reply->result_buffer = 0;
    }
  }
  auto env = std::move(msg->env);
  env.request_id = 0;
  env.reply_to = r->caller_request;
  env.target = r->caller;
  return transport::relayed_frame{r->caller_link, wire::encode(env, std::move(payload))};
}

/// A caller gave up a relayed call: the handler hears of it; its answer,
/// if one still comes, is dropped.
relayed relay_cancel(rpc_routes& routes, transport::link_id from, const wire::envelope_peek& head) {
  auto r = routes.take_relay_of_caller(from, *head.cancel);
  if (!r) return std::nullopt;  // not relayed here: the actor may know it
  SLUICE_ASSERT((r->id & rpc_relay_bit) != 0);
  routes.finished(r->client);
  wire::envelope env;
  env.source = head.source;
  env.target = r->client;
  env.body = wire::rpc{wire::rpc_cancel{r->id}};
  return transport::relayed_frame{r->handler_link, wire::encode(env)};
}

}  // namespace

relayed relay_rpc(rpc_routes& routes, node_id self, transport::link_id from, const wire::inbound_frame& frame,
                  std::chrono::steady_clock::time_point now) {
  auto head = wire::peek(frame);
  if (!head) return std::nullopt;
  if ((head->reply_to & rpc_relay_bit) != 0) return relay_answer(routes, self, from, frame, *head);
  if (!head->rpc || head->reply_to != 0) return std::nullopt;
  if (head->call && head->request_id != 0) {
    if (!routes.first_time(from, head->request_id)) return transport::relayed_frame{};  // delivered twice
    return relay_call(routes, self, from, frame, *head, now);
  }
  if (head->cancel && head->request_id == 0) return relay_cancel(routes, from, *head);
  return std::nullopt;
}

transport::relay_fn make_relay_hook(std::shared_ptr<rpc_routes> routes, node_id self,
                                    std::function<std::chrono::steady_clock::time_point()> now) {
  SLUICE_ASSERT(routes != nullptr);
  SLUICE_ASSERT(now != nullptr);
  return [routes = std::move(routes), self, now = std::move(now)](transport::link_id from,
                                                                  const wire::inbound_frame& frame) {
    return relay_rpc(*routes, self, from, frame, now());
  };
}

}  // namespace sluice
