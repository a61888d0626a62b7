// rpc_endpoint, the calling side (serving: rpc_endpoint_serve.cpp). A
// synchronous call goes out on the calling thread's own link (a direct
// shm channel on the owner's host, else a TCP connection) and its answer
// comes back there; asynchronous calls use an rpc channel of their own
// (rpc_channel.hpp), over shared memory or TCP alike. An in-process
// client's calls go through its node.
#include <condition_variable>
#include <future>
#include <thread>

#include "api/src/calls.hpp"
#include "api/src/rpc_endpoint_impl.hpp"
#include "runtime/wire/codec.hpp"
#include "runtime/rpc_limits.hpp"
#include "transports/shm/shm_client.hpp"

namespace sluice {
namespace {

/// Largest arguments buffer: what a dict may encode to.
constexpr std::uint64_t max_args_bytes = dict_encoded_bytes_max;

}  // namespace

namespace {

result<node_id> target_of(const rpc_target& t) {
  if (t.client.empty()) return node_id{};
  auto id = node_id::parse(t.client);
  if (!id) return fail(errc::invalid_argument, "'" + t.client + "' is not a client id (1 to 16 hex digits)");
  return *id;
}

wire::rpc_routing routing_of(rpc_routing r) {
  return r == rpc_routing::least_outstanding ? wire::rpc_routing::least_outstanding : wire::rpc_routing::round_robin;
}

/// Checks the call and encodes its arguments.
result<std::pair<wire::rpc_call, shared_bytes>> prepare(client::impl& c, const rpc_target& target,
                                                         std::string_view method, const dict_builder& args,
                                                         const rpc_call_options& options) {
  if (auto ok = check_rpc_name(method); !ok) return ok.error();
  auto to = target_of(target);
  if (!to) return to.error();
  auto encoded = encode_dict(c, args);
  if (!encoded) return encoded.error();
  wire::rpc_call call{std::string{method}, *to, routing_of(options.routing), encoded->buffer, {}};
  return std::pair{std::move(call), std::move(encoded->payload)};
}

}  // namespace

result<std::shared_ptr<rpc_channel>> rpc_endpoint::impl::call_channel() {
  std::lock_guard guard{mutex};
  if (calls && calls->usable()) return calls;
  if (!on_owners_host()) {
    auto now = rpc_channel::clock::now();
    if (now < calls_retry_at) return std::shared_ptr<rpc_channel>{};
    auto opened = rpc_channel::open_tcp(self->tcp_address, client_hello(*self), now + calls_connect_timeout, {});
    if (!opened) {
      // Through the node meanwhile; the next try after a pause.
      calls_retry_at = now + calls_retry_after;
      return std::shared_ptr<rpc_channel>{};
    }
    calls = *opened;
    return calls;
  }
  // Asynchronous callers spin on their own core while they wait for
  // answers: the answer's reader should find it at once.
  auto opened = rpc_channel::open(self->shm_address, client_hello(*self), self->host->shm()->segments(), {},
                                  transport::shm::waiter_config{}.spin_us);
  if (!opened) return opened.error();
  calls = *opened;
  return calls;
}
rpc_endpoint::rpc_endpoint(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
rpc_endpoint::~rpc_endpoint() = default;

std::string rpc_endpoint::id() const { return impl_->self->host->id().to_string(); }
result<rpc_result> rpc_endpoint::call(const rpc_target& target, std::string_view method, const dict_builder& args,
                                      rpc_call_options options) {
  auto& c = *impl_->self;
  auto prepared = prepare(c, target, method, args, options);
  if (!prepared) return prepared.error();
  auto reply = ask(c, wire::rpc{std::move(prepared->first)}, prepared->second, effective(c, options.timeout));
  return to_rpc_result(c, reply);
}

result<rpc_args> rpc_endpoint::args_buffer(std::uint64_t size) {
  auto& c = *impl_->self;
  if (size > max_args_bytes) {
    return fail(errc::invalid_argument, "arguments of " + std::to_string(size) + " bytes; at most " +
                                            std::to_string(max_args_bytes) + " (dict_encoded_bytes_max)");
  }
  return make_args(c, size, true);
}

result<rpc_result> rpc_endpoint::call(const rpc_target& target, std::string_view method, rpc_args args,
                                      rpc_call_options options) {
  auto& c = *impl_->self;
  if (auto ok = check_rpc_name(method); !ok) return ok.error();
  auto to = target_of(target);
  if (!to) return to.error();
  if (rpc_args_access::of(args) == nullptr || rpc_args_access::of(args)->sent) {
    return fail(errc::invalid_argument, "these arguments were sent already");
  }
  auto encoded = take_encoded(args);
  wire::rpc_call call{std::string{method}, *to, routing_of(options.routing), encoded.buffer, {}};
  auto reply = ask(c, wire::rpc{std::move(call)}, encoded.payload, effective(c, options.timeout));
  return to_rpc_result(c, reply);
}

rpc_future rpc_endpoint::call_async(const rpc_target& target, std::string_view method, const dict_builder& args,
                                    rpc_call_options options) {
  auto promise = std::make_shared<std::promise<result<rpc_result>>>();
  auto future = promise->get_future();
  auto handle = call_async(
      target, method, args, [promise](result<rpc_result> r) { promise->set_value(std::move(r)); }, options);
  return rpc_future{std::move(future), std::move(handle)};
}

rpc_call_handle rpc_endpoint::call_async(const rpc_target& target, std::string_view method, const dict_builder& args,
                                         std::function<void(result<rpc_result>)> done, rpc_call_options options) {
  auto& c = *impl_->self;
  auto state = std::make_shared<rpc_call_handle::state>();
  state->done = std::move(done);
  rpc_call_handle handle{state};
  auto prepared = prepare(c, target, method, args, options);
  if (!prepared) {
    state->complete(prepared.error());
    return handle;
  }
  auto finish = [state, &c](result<wire::message> r) { state->complete(to_rpc_result(c, r)); };
  send_call(*impl_, *state, std::move(prepared->first), std::move(prepared->second), effective(c, options.timeout),
            std::move(finish));
  return handle;
}

void send_call(rpc_endpoint::impl& e, rpc_call_handle::state& state, wire::rpc_call call, shared_bytes payload,
               std::chrono::milliseconds timeout, std::function<void(result<wire::message>)> finish) {
  auto& c = *e.self;
  auto channel = e.on_owners_host() || !c.tcp_address.empty() ? e.call_channel()
                                                               : result<std::shared_ptr<rpc_channel>>{nullptr};
  if (!channel || !*channel) {
    // Through the client node: a cancel ends the call here only.
    through_node(c, wire::rpc{std::move(call)}, std::move(payload), timeout, std::move(finish));
    return;
  }
  wire::envelope env;
  env.source = c.host->id();
  env.body = wire::rpc{std::move(call)};
  std::weak_ptr<rpc_channel> weak = *channel;
  auto id = (*channel)->request(std::move(env), std::move(payload), std::chrono::steady_clock::now() + timeout,
                                std::move(finish));
  if (id != 0) {
    state.on_cancel = [weak, id, source = c.host->id()] {
      auto ch = weak.lock();
      if (!ch) return;
      wire::envelope cancel;
      cancel.source = source;
      cancel.body = wire::rpc{wire::rpc_cancel{id}};
      (void)ch->send(wire::encode(cancel));
    };
  }
}

result<std::vector<rpc_instance_info>> rpc_endpoint::instances(std::string_view name, bool prefix,
                                                               call_options options) {
  if (!prefix) {
    if (auto ok = check_rpc_name(name); !ok) return ok.error();
  }
  auto& c = *impl_->self;
  auto reply = ask(c, wire::rpc{wire::rpc_lookup{std::string{name}, prefix}}, {}, effective(c, options.timeout));
  auto body = reply_body<wire::rpc>(reply);
  if (!body) return std::move(body).error();
  auto* found = std::get_if<wire::rpc_instances>(&body->body);
  if (found == nullptr) return fail(errc::protocol, "the owner answered a lookup with " + std::string{wire::rpc_body_name(body->body)});
  std::vector<rpc_instance_info> out;
  for (auto& i : found->instances) {
    out.push_back({i.name, i.client.to_string(), i.client_name, i.owner.to_string(), i.owner_address, i.max_concurrent,
                   i.stream});
  }
  return out;
}

rpc_endpoint& client::rpc() {
  std::lock_guard guard{impl_->rpc_mutex};
  if (!impl_->rpc) impl_->rpc = std::make_shared<rpc_endpoint>(std::make_unique<rpc_endpoint::impl>(impl_.get()));
  return *impl_->rpc;
}

}  // namespace sluice
