// The calling side of streams (docs/rpc.md, "Streams"): the thread-facing
// shell around the client core's stream_caller (actors/client/
// stream_caller.hpp), which decides what to pull, what arrived and in what
// order next() hands it out, and how and to whom the stream's end is
// told. What stays here touches threads and the channel: the stream's
// mutex, next()'s blocking wait, the stream's calls (the opening call, the
// watch, pulls, the cancel) and cancelling those in flight.
#include "actors/client/stream_caller.hpp"
#include "api/src/rpc_endpoint_impl.hpp"
#include "actors/common/endpoint.hpp"

namespace sluice {

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
  /// Set before any call of the stream goes out, then only read.
  node_id server;
  std::int64_t id = 0;
  const stream_time deadline;

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

/// Opens the stream: the opening call, then its watch and first pulls.
void open(const std::shared_ptr<stream_impl>& s, rpc_endpoint& endpoint, const rpc_target& target,
          const dict_builder& args, const rpc_stream_options& options) {
  if (!s->protocol.can_open()) return;  // a bad window: next() says so
  dict_builder opening = args;
  if (auto ok = opening.add_int64(stream_field::window, options.window); !ok) return broke(*s, ok.error());
  auto& method = s->protocol.method();
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(s->deadline - stream_clock::now());
  auto opened = endpoint.call(target, method, opening, {.timeout = left, .routing = options.routing});
  if (!opened) return broke(*s, opened.error());
  auto* id = opened->dict().find(stream_field::id);
  auto* server = opened->dict().find(stream_field::server);
  auto server_id = server != nullptr && server->as_string() ? node_id::parse(*server->as_string())
                                                             : std::optional<node_id>{};
  if (id == nullptr || !id->as_int64() || *id->as_int64() == 0 || !server_id) {
    return broke(*s, error{errc::invalid_argument, "'" + method + "' answered as a call, not a stream: call it with call()"});
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
