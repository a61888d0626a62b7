// rpc_endpoint: serving and calling (sluice/rpc.hpp). On the owner's host
// a synchronous call goes out on the calling thread's own direct channel
// and its answer comes back there; asynchronous calls and served calls use
// rpc channels of their own (rpc_channel.hpp). Over TCP every call goes
// through the client node.
#include <condition_variable>
#include <future>
#include <thread>

#include <caf/send.hpp>

#include "actors/client/client.hpp"
#include "api/src/rpc_internal.hpp"
#include "runtime/wire/codec.hpp"
#include "runtime/rpc_limits.hpp"
#include "transports/shm/shm_client.hpp"

namespace sluice {
namespace {

/// A synchronous call through the client node waits this much longer
/// than its deadline, so that the node's own timeout normally answers.
constexpr std::chrono::milliseconds sync_slack{1000};
/// Bounds of serve_options::max_concurrent.
constexpr std::uint32_t max_concurrent_max = 65536;
/// Largest arguments buffer: what a dict may encode to.
constexpr std::uint64_t max_args_bytes = dict_encoded_bytes_max;
/// Pause between two attempts to serve again after the owner went away:
/// its restart takes a while, and each attempt costs it a connection.
constexpr std::chrono::milliseconds reserve_interval{500};

std::chrono::milliseconds effective(const client::impl& c, std::chrono::milliseconds timeout) {
  return timeout.count() > 0 ? timeout : c.options.timeout;
}

/// Sends `request` through the client node (any transport); `done` runs
/// once, on a Sluice thread.
void through_node(client::impl& c, wire::body request, shared_bytes payload, std::chrono::milliseconds timeout,
                  std::function<void(result<wire::message>)> done) {
  api_call msg;
  msg.request = std::move(request);
  msg.payload = std::move(payload);
  msg.timeout = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  msg.done = std::move(done);
  caf::anon_send(c.host->actor(), api_atom::value, std::move(msg));
}

/// A request answered on the calling thread: its direct channel when it
/// has one, else through the client node.
result<wire::message> ask(client::impl& c, const wire::body& request, const shared_bytes& payload,
                          std::chrono::milliseconds timeout) {
  if (auto direct = direct_call(c, request, payload, timeout)) return std::move(*direct);
  auto promise = std::make_shared<std::promise<result<wire::message>>>();
  auto future = promise->get_future();
  through_node(c, request, payload, timeout, [promise](result<wire::message> r) { promise->set_value(std::move(r)); });
  if (future.wait_for(timeout + sync_slack) != std::future_status::ready) {
    return fail(errc::timeout, "no answer from the client node within " + std::to_string((timeout + sync_slack).count()) +
                                   " ms");
  }
  return future.get();
}

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

struct rpc_endpoint::impl {
  client::impl* self;  // REQUIRES: outlives this endpoint (it lives inside the client)
  std::mutex mutex;      // guards the channels' creation
  std::shared_ptr<serve_state> serving;
  /// Serves over the node's own link when there is no shared memory.
  std::shared_ptr<node_served> node;
  std::shared_ptr<rpc_channel> calls;

  // Serving again on a new link when the owner went away (keep()).
  std::mutex keeper_mutex;  // guards the two flags
  std::condition_variable keeper_wake;
  bool keeper_stop = false;
  bool link_lost = false;
  std::thread keeper;

  explicit impl(client::impl* c) : self(c) {}
  ~impl() {
    {
      std::lock_guard guard{keeper_mutex};
      keeper_stop = true;
    }
    keeper_wake.notify_one();
    if (keeper.joinable()) keeper.join();
    std::shared_ptr<rpc_channel> closing;
    if (serving) {
      std::lock_guard guard{serving->mutex};
      closing = std::move(serving->channel);
    }
    closing.reset();  // joins the serving thread; the owner drops this client's instances
    if (node) {
      self->host->served()->set(nullptr);
      node->stop();
    }
    calls.reset();
  }

  bool on_owners_host() const { return !self->shm_address.empty() && self->host->shm() != nullptr; }
  result<std::shared_ptr<rpc_channel>> serve_channel();
  result<std::shared_ptr<rpc_channel>> call_channel();
  /// Sends a serve or unserve to the owner on the link the calls come on:
  /// `on`, or (null) the node's own link.
  result<void> tell_owner(wire::body request, const std::shared_ptr<rpc_channel>& on);
  /// The link calls come on: a serving channel on the owner's host, else
  /// the node's own link (null).
  result<std::shared_ptr<rpc_channel>> calls_link();
  result<void> serve_name(std::string_view name, std::shared_ptr<served_name> h);

  /// The link the handlers were served on broke.
  void lost();
  /// The keeper's thread: after each loss, serves every handler again
  /// (a new link to the owner, or to its successor) until it works.
  void keep();
  /// Tells the owner again about every served name; false when it failed.
  bool serve_again();
};

void rpc_endpoint::impl::lost() {
  {
    std::lock_guard guard{keeper_mutex};
    link_lost = true;
  }
  keeper_wake.notify_one();
}

bool rpc_endpoint::impl::serve_again() {
  auto link = calls_link();
  if (!link) return false;
  std::vector<std::pair<std::string, std::uint32_t>> names;
  {
    std::lock_guard guard{serving->mutex};
    for (auto& [name, h] : serving->handlers) names.emplace_back(name, h->max_concurrent);
  }
  for (auto& [name, max_concurrent] : names) {
    if (!tell_owner(wire::rpc{wire::rpc_serve{name, max_concurrent}}, *link)) return false;
  }
  get_logger("rpc")->info("serving {} names again after the link to the owner was lost", names.size());
  return true;
}

void rpc_endpoint::impl::keep() {
  std::unique_lock lock{keeper_mutex};
  while (true) {
    keeper_wake.wait(lock, [this] { return keeper_stop || link_lost; });
    if (keeper_stop) return;
    link_lost = false;
    while (true) {
      if (keeper_wake.wait_for(lock, reserve_interval, [this] { return keeper_stop; })) return;
      lock.unlock();
      bool served = serve_again();
      lock.lock();
      if (served) break;
    }
  }
}

result<std::shared_ptr<rpc_channel>> rpc_endpoint::impl::serve_channel() {
  std::lock_guard guard{mutex};
  if (!serving) {
    serving = std::make_shared<serve_state>();
    serving->owner_client = self;
  }
  std::shared_ptr<rpc_channel> broken;  // closed once the lock is let go
  std::lock_guard serving_guard{serving->mutex};
  if (serving->channel && serving->channel->usable()) return serving->channel;
  broken = std::move(serving->channel);
  // A raw pointer: the channel's thread is joined before serve_state goes.
  auto* state = serving.get();
  rpc_channel::hooks hooks{
      [state](wire::message msg) { state->on_call(state->shared_from_this(), std::move(msg)); },
      [state](std::uint64_t id) { state->on_cancel(id); },
      [this] { lost(); },
  };
  auto opened = rpc_channel::open(self->shm_address, client_hello(*self), self->host->shm()->segments(),
                                  std::move(hooks), std::chrono::microseconds{0});
  if (!opened) return opened.error();
  serving->channel = *opened;
  return serving->channel;
}

result<std::shared_ptr<rpc_channel>> rpc_endpoint::impl::call_channel() {
  std::lock_guard guard{mutex};
  if (calls && calls->usable()) return calls;
  // Asynchronous callers spin on their own core while they wait for
  // answers: the answer's reader should find it at once.
  auto opened = rpc_channel::open(self->shm_address, client_hello(*self), self->host->shm()->segments(), {},
                                  transport::shm::waiter_config{}.spin_us);
  if (!opened) return opened.error();
  calls = *opened;
  return calls;
}

result<std::shared_ptr<rpc_channel>> rpc_endpoint::impl::calls_link() {
  if (on_owners_host()) return serve_channel();
  std::lock_guard guard{mutex};
  if (!serving) {
    serving = std::make_shared<serve_state>();
    serving->owner_client = self;
  }
  if (!node) {
    node = std::make_shared<node_served>(serving);
    node->on_down = [this] { lost(); };
    self->host->served()->set(node);
  }
  return std::shared_ptr<rpc_channel>{};
}

result<void> rpc_endpoint::impl::tell_owner(wire::body request, const std::shared_ptr<rpc_channel>& on) {
  if (!on) {
    auto reply = ask(*self, request, {}, self->options.timeout);
    if (!reply) return std::move(reply).error();
    return {};
  }
  if (on->thread_id() == std::this_thread::get_id()) {
    return fail(errc::invalid_argument, "serve() and unserve() cannot run inside a handler of the same client");
  }
  auto promise = std::make_shared<std::promise<result<wire::message>>>();
  auto future = promise->get_future();
  wire::envelope env;
  env.source = self->host->id();
  env.body = std::move(request);
  on->request(std::move(env), {}, std::chrono::steady_clock::now() + self->options.timeout,
              [promise](result<wire::message> r) { promise->set_value(std::move(r)); });
  auto reply = future.get();  // the channel answers by the deadline at the latest
  if (!reply) return std::move(reply).error();
  return {};
}

rpc_endpoint::rpc_endpoint(std::unique_ptr<impl> state) : impl_(std::move(state)) {}
rpc_endpoint::~rpc_endpoint() = default;

std::string rpc_endpoint::id() const { return impl_->self->host->id().to_string(); }

namespace {

std::shared_ptr<served_name> served_with(const serve_options& options) {
  auto h = std::make_shared<served_name>();
  h->max_concurrent = options.max_concurrent;
  h->spin = options.spin;
  return h;
}

}  // namespace

result<void> rpc_endpoint::serve(std::string_view name, rpc_handler handler, serve_options options) {
  if (!handler) return fail(errc::invalid_argument, "serve() needs a handler");
  auto h = served_with(options);
  h->sync = std::move(handler);
  return impl_->serve_name(name, std::move(h));
}

result<void> rpc_endpoint::serve_async(std::string_view name, rpc_async_handler handler, serve_options options) {
  if (!handler) return fail(errc::invalid_argument, "serve_async() needs a handler");
  auto h = served_with(options);
  h->async = std::move(handler);
  return impl_->serve_name(name, std::move(h));
}

result<void> rpc_endpoint::impl::serve_name(std::string_view name, std::shared_ptr<served_name> h) {
  if (auto ok = check_rpc_name(name); !ok) return ok.error();
  if (h->max_concurrent < 1 || h->max_concurrent > max_concurrent_max) {
    return fail(errc::invalid_argument, "max_concurrent must be from 1 to " + std::to_string(max_concurrent_max));
  }
  if (h->spin.count() < 0) return fail(errc::invalid_argument, "a negative spin");
  auto channel = calls_link();
  if (!channel) return channel.error();
  {
    std::lock_guard guard{mutex};
    if (!keeper.joinable()) keeper = std::thread([this] { keep(); });
  }
  auto& state = *serving;
  std::chrono::microseconds spin{0};
  {
    std::lock_guard guard{state.mutex};
    state.handlers[std::string{name}] = h;
    for (auto& [n, each] : state.handlers) spin = std::max(spin, each->spin);
  }
  if (*channel) (*channel)->set_spin(spin);
  auto max_concurrent = h->max_concurrent;
  auto told = tell_owner(wire::rpc{wire::rpc_serve{std::string{name}, max_concurrent}}, *channel);
  if (!told) {
    std::lock_guard guard{state.mutex};
    if (auto it = state.handlers.find(name); it != state.handlers.end() && it->second == h) {
      state.handlers.erase(it);
    }
  }
  return told;
}

result<void> rpc_endpoint::unserve(std::string_view name) {
  if (auto ok = check_rpc_name(name); !ok) return ok.error();
  std::shared_ptr<rpc_channel> channel;
  bool served = false;
  {
    std::lock_guard guard{impl_->mutex};
    if (impl_->serving) {
      std::lock_guard serving_guard{impl_->serving->mutex};
      auto& handlers = impl_->serving->handlers;
      if (auto it = handlers.find(name); it != handlers.end()) {
        handlers.erase(it);
        channel = impl_->serving->channel;
        served = true;
      }
    }
  }
  if (!served) return fail(errc::not_found, "this client does not serve '" + std::string{name} + "'");
  return impl_->tell_owner(wire::rpc{wire::rpc_unserve{std::string{name}}}, channel);
}

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
  if (args.impl_for_internal() == nullptr || args.impl_for_internal()->sent) {
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
  auto timeout = effective(c, options.timeout);
  auto finish = [state, &c](result<wire::message> r) { state->complete(to_rpc_result(c, r)); };
  auto channel = impl_->on_owners_host() ? impl_->call_channel() : result<std::shared_ptr<rpc_channel>>{nullptr};
  if (!channel || !*channel) {
    // Through the client node: a cancel ends the call here only.
    through_node(c, wire::rpc{std::move(prepared->first)}, std::move(prepared->second), timeout, std::move(finish));
    return handle;
  }
  wire::envelope env;
  env.source = c.host->id();
  env.body = wire::rpc{std::move(prepared->first)};
  std::weak_ptr<rpc_channel> weak = *channel;
  auto id = (*channel)->request(std::move(env), std::move(prepared->second),
                                std::chrono::steady_clock::now() + timeout, std::move(finish));
  if (id != 0) {
    state->on_cancel = [weak, id, source = c.host->id()] {
      auto ch = weak.lock();
      if (!ch) return;
      wire::envelope cancel;
      cancel.source = source;
      cancel.body = wire::rpc{wire::rpc_cancel{id}};
      (void)ch->send(wire::encode(cancel));
    };
  }
  return handle;
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
    out.push_back({i.name, i.client.to_string(), i.client_name, i.owner.to_string(), i.owner_address, i.max_concurrent});
  }
  return out;
}

rpc_endpoint& client::rpc() {
  std::lock_guard guard{impl_->rpc_mutex};
  if (!impl_->rpc) impl_->rpc = std::make_shared<rpc_endpoint>(std::make_unique<rpc_endpoint::impl>(impl_.get()));
  return *impl_->rpc;
}

}  // namespace sluice
