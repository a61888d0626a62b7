// rpc_endpoint, the calling side (serving: rpc_endpoint_serve.cpp). A
// synchronous call goes out on the calling thread's own link (a direct
// shm channel on the owner's host, else a TCP connection) and its answer
// comes back there; asynchronous calls use a call channel of their own
// (call_channel.hpp), over shared memory or TCP alike. An in-process
// client's calls go through its node.
//
// Streams (docs/rpc.md, "Streams") are asynchronous calls: this is the
// thread-facing shell around the client core's stream_caller
// (actors/client/stream_caller.hpp), which decides what to pull, what
// arrived and in what order next() hands it out, and how and to whom the
// stream's end is told. What stays here touches threads and the channel:
// the stream's mutex, next()'s blocking wait, the stream's calls (the
// opening call, the watch, pulls, the cancel) and cancelling those in
// flight.
#include <condition_variable>
#include <future>
#include <thread>

#include "api/src/calls.hpp"
#include "actors/client/stream_caller.hpp"
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

result<std::shared_ptr<call_channel>> rpc_endpoint::impl::calls_channel() {
  std::lock_guard guard{mutex};
  if (calls && calls->usable()) return calls;
  if (!on_owners_host()) {
    auto now = call_channel::clock::now();
    if (now < calls_retry_at) return std::shared_ptr<call_channel>{};
    auto opened = call_channel::open_tcp(self->tcp_address, client_hello(*self), now + calls_connect_timeout, {});
    if (!opened) {
      // Through the node meanwhile; the next try after a pause.
      calls_retry_at = now + calls_retry_after;
      return std::shared_ptr<call_channel>{};
    }
    calls = *opened;
    return calls;
  }
  // Asynchronous callers spin on their own core while they wait for
  // answers: the answer's reader should find it at once.
  auto opened = call_channel::open(self->shm_address, client_hello(*self), self->host->shm()->segments(), {},
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
  auto channel = e.on_owners_host() || !c.tcp_address.empty() ? e.calls_channel()
                                                               : result<std::shared_ptr<call_channel>>{nullptr};
  if (!channel || !*channel) {
    // Through the client node: a cancel ends the call here only.
    through_node(c, wire::rpc{std::move(call)}, std::move(payload), timeout, std::move(finish));
    return;
  }
  wire::envelope env;
  env.source = c.host->id();
  env.body = wire::rpc{std::move(call)};
  std::weak_ptr<call_channel> weak = *channel;
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

// --- streams ---------------------------------------------------------------------

namespace {

/// How much longer than the stream's deadline its watch and pulls may
/// wait: the stream's own clocks end it at the deadline (both ends), and
/// a cancel the serving side hears before that is then always the
/// caller's, never an owner expiring a call of the stream.
constexpr std::chrono::milliseconds control_slack{1000};

}  // namespace

struct rpc_stream::impl : std::enable_shared_from_this<rpc_stream::impl> {
  explicit impl(stream_caller_options options) : deadline(options.deadline), protocol(std::move(options)) {}

  rpc_endpoint::impl* endpoint = nullptr;  // REQUIRES: outlives the stream (it lives in the client)
  const stream_time deadline;

  /// Set before any call of the stream goes out, then only read.
  node_id server;
  std::int64_t id = 0;

  std::mutex mutex;  // guards what follows
  std::condition_variable changed;
  /// Calls of the stream in flight, to cancel them.
  std::vector<std::shared_ptr<rpc_call_handle::state>> in_flight;
  stream_caller<rpc_result> protocol;
};

namespace {

using stream_impl = rpc_stream::impl;

/// What one event asks for, and the calls in flight it hands over.
struct actions {
  stream_caller_work work;
  std::vector<std::shared_ptr<rpc_call_handle::state>> to_cancel;
};

/// REQUIRES: s.mutex held.
void take_calls(stream_impl& s, actions& a) {
  if (!a.work.cancel_calls) return;
  a.to_cancel = std::move(s.in_flight);
  s.in_flight.clear();
}

result<std::optional<rpc_result>> pull_outcome(client::impl& c, result<wire::message>& r) {
  if (r) {
    auto* rpc = std::get_if<wire::rpc>(&r->env.body);
    if (rpc != nullptr && std::holds_alternative<wire::rpc_reply>(rpc->body) && r->payload.size() == 0 &&
        std::get<wire::rpc_reply>(rpc->body).result_buffer == 0) {
      return std::optional<rpc_result>{};  // the end
    }
  }
  auto item = to_rpc_result(c, r);
  if (!item) return std::move(item).error();
  return std::optional<rpc_result>{std::move(*item)};
}

/// Sends one control call of the stream (op, and the item for a pull);
/// `done` runs once with its answer. Never under s.mutex: an answer may
/// come at once, on this thread.
void control(const std::shared_ptr<stream_impl>& s, std::string_view op, std::int64_t seq,
             std::function<void(result<wire::message>)> done) {
  auto& c = *s->endpoint->self;
  auto state = std::make_shared<rpc_call_handle::state>();
  auto shared_done = std::make_shared<std::function<void(result<wire::message>)>>(std::move(done));
  state->done = [shared_done](result<rpc_result> r) {
    if (!r) (*shared_done)(result<wire::message>{r.error()});
  };
  dict_builder args;
  (void)args.add_int64(stream_field::id, s->id);
  (void)args.add_string(stream_field::op, op);
  (void)args.add_int64(stream_field::seq, seq);
  auto encoded = encode_dict(c, args);
  if (!encoded) return state->complete(encoded.error());
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(s->deadline - stream_clock::now());
  auto timeout = std::max(left, std::chrono::milliseconds{1}) + control_slack;
  auto finish = [state, shared_done](result<wire::message> r) {
    if (state->finished.exchange(true, std::memory_order_acq_rel)) return;
    (*shared_done)(std::move(r));
  };
  wire::rpc_call call{s->protocol.method(), s->server, wire::rpc_routing::round_robin, encoded->buffer, {}};
  send_call(*s->endpoint, *state, std::move(call), std::move(encoded->payload), timeout, std::move(finish));
  std::lock_guard guard{s->mutex};
  std::erase_if(s->in_flight, [](const auto& each) { return each->finished.load(std::memory_order_acquire); });
  if (!state->finished.load(std::memory_order_acquire)) s->in_flight.push_back(std::move(state));
}

void pull(const std::shared_ptr<stream_impl>& s, std::int64_t seq) {
  std::weak_ptr<stream_impl> weak = s;
  control(s, "pull", seq, [weak, seq](result<wire::message> r) {
    auto st = weak.lock();
    if (!st) return;
    auto outcome = pull_outcome(*st->endpoint->self, r);
    {
      std::lock_guard guard{st->mutex};
      // Over: nobody reads it; it is let go below, outside the lock.
      if (!st->protocol.over()) st->protocol.pull_answered(seq, std::move(outcome));
    }
    st->changed.notify_all();
  });
}

void watch(const std::shared_ptr<stream_impl>& s) {
  std::weak_ptr<stream_impl> weak = s;
  control(s, "watch", 0, [weak](result<wire::message> r) {
    auto st = weak.lock();
    if (!st || r) return;
    {
      std::lock_guard guard{st->mutex};
      st->protocol.broke(r.error());
    }
    st->changed.notify_all();
  });
}

/// Sends and cancels what an event asked for. REQUIRES: s.mutex not held.
void carry_out(const std::shared_ptr<stream_impl>& s, actions& a) {
  for (auto& call : a.to_cancel) rpc_call_handle{call}.cancel();
  if (a.work.tell_server) control(s, "cancel", 0, [](result<wire::message>) {});
  if (a.work.watch) watch(s);
  for (auto seq : a.work.pulls) pull(s, seq);
}

void broke(stream_impl& s, error why) {
  std::lock_guard guard{s.mutex};
  s.protocol.broke(std::move(why));
}

/// Whether this is the thread of the client's asynchronous calls (a
/// callback of one runs there).
bool on_calls_thread(rpc_endpoint::impl& e) {
  std::lock_guard guard{e.mutex};
  return e.calls && e.calls->thread_id() == std::this_thread::get_id();
}

/// Sends the opening call and waits for its answer, by the stream's
/// deadline at the latest: on the client's call channel, as the stream's
/// other calls go; from a callback on that channel's own thread (which
/// must read the answer) on the thread's own link instead.
result<rpc_result> opening_call(stream_impl& s, rpc_endpoint& endpoint, const rpc_target& target,
                                const dict_builder& args, const rpc_stream_options& options) {
  auto& e = *s.endpoint;
  auto& method = s.protocol.method();
  auto left = std::max(std::chrono::duration_cast<std::chrono::milliseconds>(s.deadline - stream_clock::now()),
                       std::chrono::milliseconds{1});
  if (on_calls_thread(e)) return endpoint.call(target, method, args, {.timeout = left, .routing = options.routing});
  auto prepared = prepare(*e.self, target, method, args, {.routing = options.routing});
  if (!prepared) return prepared.error();
  auto answered = std::make_shared<std::promise<result<wire::message>>>();
  auto answer = answered->get_future();
  rpc_call_handle::state unused;  // the opening call is not cancelled: next() ends a stream at its deadline
  send_call(e, unused, std::move(prepared->first), std::move(prepared->second), left,
            [answered](result<wire::message> r) { answered->set_value(std::move(r)); });
  auto reply = answer.get();  // the channel (or the node) answers by the deadline
  return to_rpc_result(*e.self, reply);
}

/// Opens the stream: the opening call, then its watch and first pulls.
void open(const std::shared_ptr<stream_impl>& s, rpc_endpoint& endpoint, const rpc_target& target,
          const dict_builder& args, const rpc_stream_options& options) {
  if (!s->protocol.can_open()) return;  // a bad window: next() says so
  dict_builder opening = args;
  if (auto ok = opening.add_int64(stream_field::window, options.window); !ok) return broke(*s, ok.error());
  auto opened = opening_call(*s, endpoint, target, opening, options);
  if (!opened) return broke(*s, opened.error());
  auto* id = opened->dict().find(stream_field::id);
  auto* server = opened->dict().find(stream_field::server);
  auto server_id = server != nullptr && server->as_string() ? node_id::parse(*server->as_string())
                                                             : std::optional<node_id>{};
  if (id == nullptr || !id->as_int64() || *id->as_int64() == 0 || !server_id) {
    return broke(*s, error{errc::invalid_argument,
                           "'" + s->protocol.method() + "' answered as a call, not a stream: call it with call()"});
  }
  s->id = *id->as_int64();
  s->server = *server_id;
  actions a;
  {
    std::lock_guard guard{s->mutex};
    s->protocol.opened(s->id, a.work);
  }
  carry_out(s, a);
}

}  // namespace

rpc_stream rpc_endpoint::call_stream(const rpc_target& target, std::string_view method, const dict_builder& args,
                                     rpc_stream_options options) {
  auto& c = *impl_->self;
  auto timeout = options.timeout.count() > 0 ? options.timeout : c.options.timeout;
  auto s = std::make_shared<stream_impl>(stream_caller_options{
      .method = std::string{method},
      .window = options.window,
      .deadline = stream_clock::now() + std::min<std::chrono::milliseconds>(timeout, max_request_timeout),
  });
  s->endpoint = impl_.get();
  open(s, *this, target, args, options);
  return rpc_stream{std::move(s)};
}

rpc_stream::rpc_stream(std::shared_ptr<impl> state) : impl_(std::move(state)) {}
rpc_stream::rpc_stream(rpc_stream&&) noexcept = default;
rpc_stream& rpc_stream::operator=(rpc_stream&& other) noexcept {
  if (this != &other) {
    cancel();
    impl_ = std::move(other.impl_);
  }
  return *this;
}
rpc_stream::~rpc_stream() { cancel(); }

result<std::optional<rpc_result>> rpc_stream::next(std::chrono::milliseconds wait) {
  if (!impl_) return fail(errc::invalid_argument, "a moved-from stream");
  auto& s = impl_;
  auto wait_end = wait.count() > 0 ? stream_clock::now() + wait : stream_time::max();
  std::unique_lock lock{s->mutex};
  while (true) {
    auto now = stream_clock::now();
    actions a;
    if (auto answer = s->protocol.next(now, a.work)) {
      take_calls(*s, a);
      lock.unlock();
      carry_out(s, a);
      return std::move(*answer);
    }
    if (now >= wait_end) {
      return fail(errc::timeout, "no item of '" + s->protocol.method() + "' within " + std::to_string(wait.count()) +
                                     " ms; the stream goes on");
    }
    s->changed.wait_until(lock, std::min(s->deadline, wait_end));
  }
}

void rpc_stream::cancel() {
  if (!impl_) return;
  actions a;
  {
    std::lock_guard guard{impl_->mutex};
    impl_->protocol.cancel(a.work);
    take_calls(*impl_, a);
  }
  carry_out(impl_, a);
}

}  // namespace sluice
