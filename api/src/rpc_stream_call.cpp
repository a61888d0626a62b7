// The calling side of streams (rpc_stream_serve.cpp has the protocol).
// After the opening call, the stream keeps a watch open on the serving
// client and `window` pulls ahead of what next() consumed; answers arrive
// on Sluice threads in any order and wait here by item until next() takes
// them in order.
#include "api/src/rpc_endpoint_impl.hpp"
#include "actors/common/endpoint.hpp"
#include "runtime/rpc_limits.hpp"

namespace sluice {

using stream_clock = std::chrono::steady_clock;

namespace {

/// How much longer than the stream's deadline its watch and pulls may
/// wait: the stream's own clocks end it at the deadline (both ends), and
/// a cancel the serving side hears before that is then always the
/// caller's, never an owner expiring a call of the stream.
constexpr std::chrono::milliseconds control_slack{1000};

}  // namespace

struct rpc_stream::impl : std::enable_shared_from_this<rpc_stream::impl> {
  rpc_endpoint::impl* endpoint = nullptr;  // REQUIRES: outlives the stream (it lives in the client)
  std::string method;
  node_id server;
  std::int64_t id = 0;
  stream_clock::time_point deadline;
  std::int64_t window = 16;

  std::mutex mutex;  // guards what follows
  std::condition_variable changed;
  /// Answers of pulls by item: the item, the end (nothing), or an error.
  std::map<std::int64_t, result<std::optional<rpc_result>>> arrived;
  /// Calls of the stream in flight, to cancel them.
  std::vector<std::shared_ptr<rpc_call_handle::state>> in_flight;
  /// Why the stream broke, outside of a pull (opening it, its watch).
  std::optional<error> broken;
  std::int64_t consumed = 0;
  std::int64_t next_pull = 0;
  bool over = false;
  std::optional<error> final_error;  // over with an error: next() repeats it
};

namespace {

using stream_impl = rpc_stream::impl;

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
  wire::rpc_call call{s->method, s->server, wire::rpc_routing::round_robin, encoded->buffer, {}};
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
    std::lock_guard guard{st->mutex};
    if (st->over) return;
    st->arrived.emplace(seq, std::move(outcome));
    st->changed.notify_all();
  });
}

void watch(const std::shared_ptr<stream_impl>& s) {
  std::weak_ptr<stream_impl> weak = s;
  control(s, "watch", 0, [weak](result<wire::message> r) {
    auto st = weak.lock();
    if (!st || r) return;
    std::lock_guard guard{st->mutex};
    if (st->over || st->broken) return;
    st->broken = r.error();
    st->changed.notify_all();
  });
}

/// How the stream ended, as far as its serving side is concerned.
enum class ended_by {
  /// It ended the stream itself (the end, the handler's error): what is
  /// still in flight it answers.
  server,
  /// It is gone (its process, an owner on the way): nothing to tell it.
  loss,
  /// This side (cancel, the deadline): it is told, and what is in
  /// flight is cancelled.
  caller,
};

/// Ends the stream here. REQUIRES: `lock` holds s->mutex (let go meanwhile).
void close(const std::shared_ptr<stream_impl>& s, std::unique_lock<std::mutex>& lock, std::optional<error> err,
           ended_by by) {
  s->over = true;
  s->final_error = std::move(err);
  s->arrived.clear();
  auto calls = std::move(s->in_flight);
  s->in_flight.clear();
  if (by == ended_by::server) return;
  lock.unlock();
  for (auto& call : calls) rpc_call_handle{call}.cancel();
  if (by == ended_by::caller && s->id != 0) control(s, "cancel", 0, [](result<wire::message>) {});
  lock.lock();
}

ended_by by_code(const error& err) { return err.code() == errc::timeout ? ended_by::caller : ended_by::loss; }

/// Opens the stream: the opening call, then its watch and first pulls.
void open(const std::shared_ptr<stream_impl>& s, rpc_endpoint& endpoint, const rpc_target& target,
          const dict_builder& args, const rpc_stream_options& options) {
  if (options.window < 1 || options.window > rpc_stream_window_max) {
    s->broken = error{errc::invalid_argument, "a stream's window must be from 1 to " +
                                                  std::to_string(rpc_stream_window_max)};
    return;
  }
  dict_builder opening = args;
  if (auto ok = opening.add_int64(stream_field::window, options.window); !ok) {
    s->broken = ok.error();
    return;
  }
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(s->deadline - stream_clock::now());
  auto opened = endpoint.call(target, s->method, opening, {.timeout = left, .routing = options.routing});
  if (!opened) {
    s->broken = opened.error();
    return;
  }
  auto* id = opened->dict().find(stream_field::id);
  auto* server = opened->dict().find(stream_field::server);
  auto server_id = server != nullptr && server->as_string() ? node_id::parse(*server->as_string())
                                                             : std::optional<node_id>{};
  if (id == nullptr || !id->as_int64() || !server_id) {
    s->broken = error{errc::invalid_argument, "'" + s->method + "' answered as a call, not a stream: call it with call()"};
    return;
  }
  s->id = *id->as_int64();
  s->server = *server_id;
  watch(s);
  s->next_pull = s->window;
  for (std::int64_t seq = 0; seq < s->window; ++seq) pull(s, seq);
}

}  // namespace

rpc_stream rpc_endpoint::call_stream(const rpc_target& target, std::string_view method, const dict_builder& args,
                                     rpc_stream_options options) {
  auto& c = *impl_->self;
  auto s = std::make_shared<stream_impl>();
  s->endpoint = impl_.get();
  s->method = std::string{method};
  s->window = options.window;
  auto timeout = options.timeout.count() > 0 ? options.timeout : c.options.timeout;
  s->deadline = stream_clock::now() + std::min<std::chrono::milliseconds>(timeout, max_request_timeout);
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
  auto wait_end = wait.count() > 0 ? stream_clock::now() + wait : stream_clock::time_point::max();
  std::unique_lock lock{s->mutex};
  while (true) {
    if (s->over) {
      if (s->final_error) return *s->final_error;
      return std::optional<rpc_result>{};
    }
    // The deadline ends the stream even with items left unread.
    auto now = stream_clock::now();
    if (now >= s->deadline) {
      auto why = error{errc::timeout, "the deadline of the stream '" + s->method + "' passed"};
      close(s, lock, why, ended_by::caller);
      return why;
    }
    if (auto it = s->arrived.find(s->consumed); it != s->arrived.end()) {
      auto outcome = std::move(it->second);
      s->arrived.erase(it);
      if (!outcome) {
        // An error of the handler's: the serving side ended the stream. A
        // timeout or a loss on the way: it may not know.
        auto why = outcome.error();
        close(s, lock, why, by_code(why));
        return outcome;
      }
      if (!*outcome) {
        close(s, lock, std::nullopt, ended_by::server);
        return outcome;
      }
      s->consumed += 1;
      auto seq = s->next_pull++;
      lock.unlock();
      pull(s, seq);  // the credit for one more item
      return outcome;
    }
    if (s->broken) {
      auto why = *s->broken;
      close(s, lock, why, by_code(why));
      return why;
    }
    if (now >= wait_end) {
      return fail(errc::timeout, "no item of '" + s->method + "' within " + std::to_string(wait.count()) +
                                     " ms; the stream goes on");
    }
    s->changed.wait_until(lock, std::min(s->deadline, wait_end));
  }
}

void rpc_stream::cancel() {
  if (!impl_) return;
  std::unique_lock lock{impl_->mutex};
  if (impl_->over) return;
  close(impl_, lock, error{errc::cancelled, "the stream was cancelled"}, ended_by::caller);
}

}  // namespace sluice
