// The serving side: a call arrives on the serving channel's thread and
// runs its handler there, and its answer goes back on the same channel
// (the owner matches it to the call by link and request id). A call to a
// name served by serve_stream() opens a stream, or is one of its control
// calls (docs/rpc.md, "Streams"): this is the thread-facing shell around
// the client core's stream_server (actors/client/serve_table.hpp), which
// makes every protocol decision — credit, pulls and items held, the watch,
// cancel, end, stop, retire. What stays here is what touches threads and
// the channel: the stream's mutex, the writer's blocking wait for credit,
// encoding items (into the pool when large) and giving the answers the
// state machine asks for, outside the lock.
#include <cstring>
#include <exception>

#include "actors/client/serve_table.hpp"
#include "actors/common/endpoint.hpp"
#include "api/src/rpc_state.hpp"
#include "runtime/assert.hpp"
#include "runtime/rpc_limits.hpp"
#include "runtime/wire/codec.hpp"

namespace sluice {

std::string threw(const std::string& method, std::exception_ptr e) {
  try {
    std::rethrow_exception(std::move(e));
  } catch (const std::exception& x) {
    return "'" + method + "' threw: " + x.what();
  } catch (...) {
    return "'" + method + "' threw something that is not a std::exception";
  }
}

result<rpc_request> make_request(client::impl& c, const std::string& method, wire::message& msg,
                                 const wire::rpc_call& call, std::shared_ptr<std::atomic<bool>> cancelled) {
  auto args = dict_view::parse(msg.payload.span());
  if (!args) {
    return fail(errc::invalid_argument, "the arguments of '" + method + "' are not a dict: " + args.error().message());
  }
  auto state = std::make_unique<rpc_request::impl>();
  state->method = method;
  state->caller = (call.caller.valid() ? call.caller : msg.env.source).to_string();
  state->location = locate_in_pool(c, msg.payload.span());
  state->bytes = value{msg.payload.owner(), msg.payload.span(), 0};
  state->args.emplace(std::move(*args));
  auto budget = msg.env.deadline_us == 0 ? std::chrono::microseconds{max_request_timeout}
                                         : std::chrono::microseconds{msg.env.deadline_us};
  state->deadline = std::chrono::steady_clock::now() + budget;
  state->cancelled = std::move(cancelled);
  return rpc_request{std::move(state)};
}

void serve_state::on_frame(const std::shared_ptr<serve_state>& self, wire::message msg) {
  auto* rpc = std::get_if<wire::rpc>(&msg.env.body);
  if (rpc == nullptr) return;
  if (msg.env.request_id != 0 && std::holds_alternative<wire::rpc_call>(rpc->body)) return on_call(self, std::move(msg));
  if (auto* c = std::get_if<wire::rpc_cancel>(&rpc->body)) on_cancel(c->call);
}

void serve_state::on_call(const std::shared_ptr<serve_state>& self, wire::message msg, rpc_served::answer_fn answer) {
  auto& call = std::get<wire::rpc_call>(std::get<wire::rpc>(msg.env.body).body);
  auto promise = std::make_shared<rpc_promise::impl>();
  promise->serving = self;
  promise->through = std::move(answer);
  promise->request_id = msg.env.request_id;
  promise->reply_to = msg.env.source;
  promise->method = call.method;
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  std::optional<error> refused;
  {
    std::lock_guard guard{mutex};
    auto found = table.find(call.method);
    if (!found) {
      refused = std::move(found).error();
    } else {
      auto& entry = **found;
      // A stream's opening call is admitted where the stream opens; its
      // control calls are not counted.
      bool admitted = false;
      if (entry.kind == served_kind::call) {
        if (auto ok = table.admit(entry); !ok) {
          refused = std::move(ok).error();
        } else {
          admitted = true;
        }
      }
      // A cancel reaches an async handler's call and a stream's; a sync
      // handler's runs on the thread that would take the cancel, and sees
      // its deadline only.
      if (!refused && (entry.kind == served_kind::stream || entry.handler.async)) {
        if (auto ok = table.track(msg.env.request_id, served_call{cancelled, {}}); !ok) {
          refused = std::move(ok).error();
          if (admitted) table.release(entry);
          admitted = false;
        } else {
          promise->tracked = true;
        }
      }
      if (!refused) {
        promise->handler = *found;
        promise->counted = admitted;
      }
      SLUICE_ASSERT(!admitted || entry.kind == served_kind::call);
    }
  }
  if (refused) return promise->answer_error(*refused);
  if (promise->handler->kind == served_kind::stream) {
    return on_stream_call(self, std::move(promise), msg, call, std::move(cancelled));
  }
  auto& h = promise->handler->handler;
  auto request = make_request(*owner_client, call.method, msg, call, std::move(cancelled));
  if (!request) return promise->answer_error(request.error());
  if (h.sync) {
    try {
      auto out = h.sync(*request);
      if (!out) return promise->answer_error(error{out.code(), "'" + call.method + "': " + out.error().message()});
      return promise->answer(*out);
    } catch (...) {
      return promise->answer_error(error{errc::handler_failed, threw(call.method, std::current_exception())});
    }
  }
  try {
    h.async(std::move(*request), rpc_promise{promise});
  } catch (...) {
    promise->answer_error(error{errc::handler_failed, threw(call.method, std::current_exception())});
  }
}

void serve_state::on_cancel(std::uint64_t id) {
  std::shared_ptr<rpc_stream_writer::impl> stream;
  {
    std::lock_guard guard{mutex};
    auto* tracked = table.tracked(id);
    if (tracked == nullptr) return;
    if (auto flag = tracked->cancelled.lock()) flag->store(true, std::memory_order_release);
    stream = tracked->stream.lock();
  }
  // Outside the lock: a stream takes its own lock, then this one.
  if (stream) stream_call_cancelled(*stream);
}

// --- streams -----------------------------------------------------------------------

using stream_protocol = stream_server<rpc_args, std::shared_ptr<rpc_promise::impl>>;
using stream_work = stream_protocol::work;

struct rpc_stream_writer::impl {
  explicit impl(stream_server_options options) : protocol(std::move(options)) {}

  std::shared_ptr<serve_state> serving;
  /// Its in_flight counts this stream until it is retired.
  std::shared_ptr<served_name> handler;
  std::int64_t id = 0;
  /// The thread that takes this client's calls: it must never wait for
  /// credit, since the pulls that grant it arrive on it.
  std::thread::id serving_thread;
  /// The opening request's: rpc_request::cancelled() turns true with the stream's stop.
  std::shared_ptr<std::atomic<bool>> request_cancelled;

  mutable std::mutex mutex;  // guards protocol
  /// Told after every event: the writer waits on it for credit.
  std::condition_variable credit_changed;
  stream_protocol protocol;
};

namespace {

using stream_impl = rpc_stream_writer::impl;

/// Gives the answers `work` holds and lets the stream go when it retired.
/// REQUIRES: s.mutex not held (answering takes the serving state's lock
/// and writes to the channel).
void carry_out(stream_impl& s, stream_work& work) {
  if (work.stopped) s.request_cancelled->store(true, std::memory_order_release);
  for (auto& a : work.answers) {
    switch (a.kind) {
      case stream_answer_kind::item: a.to->answer_encoded(*a.item); break;
      case stream_answer_kind::error: a.to->answer_error(*a.err); break;
      case stream_answer_kind::end: a.to->answer_end(); break;
      case stream_answer_kind::done: a.to->answer(dict_builder{}); break;
    }
  }
  work.dropped.clear();  // their pool buffers go back
  if (!work.retired) return;
  std::lock_guard guard{s.serving->mutex};
  // A stream retires once: it is still open here, under its own id.
  SLUICE_ASSERT(s.serving->table.stream(s.id) != nullptr && s.serving->table.stream(s.id)->get() == &s);
  s.serving->table.close_stream(s.id);
  s.serving->note_stream_deadlines();
  s.serving->table.release(*s.handler);
}

/// Runs one event of the protocol under the stream's lock, wakes a writer
/// waiting for credit, then carries the work out.
template <class Event>
void on_event(stream_impl& s, Event event) {
  stream_work work;
  {
    std::lock_guard guard{s.mutex};
    event(s.protocol, work);
  }
  s.credit_changed.notify_all();
  carry_out(s, work);
}

/// Encodes `item` once, into the pool when it is large, as a result is.
result<rpc_args> encode_item(client::impl& c, const dict_builder& item) {
  auto size = item.encoded_size();
  auto room = make_args(c, size, size >= rpc_pool_bytes_min);
  if (!room) return room.error();
  if (auto ok = item.encode_into(room->bytes()); !ok) return ok.error();
  return room;
}

/// A place for one item, waiting for credit when `wait` and this is not
/// the serving thread. REQUIRES: `lock` holds s.mutex.
result<std::int64_t> place_item(stream_impl& s, std::unique_lock<std::mutex>& lock, bool wait, stream_work& work) {
  while (true) {
    auto place = s.protocol.reserve(stream_clock::now(), work);
    if (!place) return std::move(place).error();
    if (*place) return **place;
    auto& method = s.protocol.method();
    if (!wait) {
      return error{errc::overloaded, "the caller of '" + method + "' has granted no credit for another item yet"};
    }
    if (std::this_thread::get_id() == s.serving_thread) {
      return error{errc::overloaded, "no credit for another item of '" + method +
                                         "', and the thread that takes this client's calls cannot wait for it: "
                                         "write from a thread of your own"};
    }
    s.credit_changed.wait_until(lock, s.protocol.deadline());
  }
}

result<void> write_item(stream_impl& s, const dict_builder& item, bool wait) {
  stream_work work;
  std::unique_lock lock{s.mutex};
  auto seq = place_item(s, lock, wait, work);
  lock.unlock();
  carry_out(s, work);
  if (!seq) return std::move(seq).error();
  auto encoded = encode_item(*s.serving->owner_client, item);
  stream_work after;
  result<void> written;
  lock.lock();
  if (!encoded) {
    s.protocol.unencodable(*seq, encoded.error(), after);
    written = encoded.error();
  } else {
    written = s.protocol.ready(*seq, std::move(*encoded), after);
  }
  lock.unlock();
  s.credit_changed.notify_all();
  carry_out(s, after);
  return written;
}

void end_stream(stream_impl& s, std::optional<error> err) {
  on_event(s, [&err](stream_protocol& p, stream_work& w) {
    if (err) {
      p.fail(std::move(*err), w);
    } else {
      p.finish(w);
    }
  });
}

/// The window a stream's opening call asks for, within its bounds.
std::int64_t stream_window_of(const dict_view& args) {
  auto* field = args.find(stream_field::window);
  auto window = field != nullptr ? field->as_int64() : result<std::int64_t>{std::int64_t{16}};
  return window ? stream_protocol::window_for(*window) : 1;
}

std::shared_ptr<stream_impl> find_stream(serve_state& state, std::int64_t id) {
  std::lock_guard guard{state.mutex};
  auto* stream = state.table.stream(id);
  return stream == nullptr ? nullptr : *stream;
}

/// A watch, pull or cancel of a stream open here.
void control_call(serve_state& state, const std::shared_ptr<rpc_promise::impl>& promise, const dict_view& args) {
  auto id = args.find(stream_field::id)->as_int64();
  auto* op_field = args.find(stream_field::op);
  auto op = op_field != nullptr ? op_field->as_string() : result<std::string_view>{error{errc::invalid_argument, ""}};
  auto stream = id ? find_stream(state, *id) : nullptr;
  if (!stream) {
    return promise->answer_error(
        error{errc::not_found, "'" + promise->method + "' has no open stream of that id here (it ended)"});
  }
  if (op && *op == "cancel") {
    return on_event(*stream, [&promise](stream_protocol& p, stream_work& w) {
      p.cancel(promise, stream_clock::now(), w);
    });
  }
  if (!op || (*op != "watch" && *op != "pull")) {
    return promise->answer_error(error{errc::invalid_argument, "an unknown stream operation"});
  }
  {
    // A cancel of a watch or pull stops the stream (serve_state::on_cancel).
    std::lock_guard guard{state.mutex};
    if (auto* tracked = state.table.tracked(promise->request_id)) tracked->stream = stream;
  }
  if (*op == "watch") {
    return on_event(*stream, [&promise](stream_protocol& p, stream_work& w) { p.watch(promise, w); });
  }
  auto* seq_field = args.find(stream_field::seq);
  auto seq = seq_field != nullptr ? seq_field->as_int64() : result<std::int64_t>{std::int64_t{0}};
  auto item = seq ? *seq : std::int64_t{-1};  // not a number: a bad pull
  on_event(*stream, [&promise, item](stream_protocol& p, stream_work& w) { p.pull(item, promise, w); });
}

}  // namespace

void stream_call_cancelled(rpc_stream_writer::impl& s) {
  on_event(s, [](stream_protocol& p, stream_work& w) { p.call_cancelled(stream_clock::now(), w); });
}

void serve_state::expire_streams(stream_time now) {
  if (now.time_since_epoch().count() < next_stream_due.load(std::memory_order_relaxed)) return;
  std::vector<std::shared_ptr<stream_impl>> due;
  {
    std::lock_guard guard{mutex};
    for (auto id : table.streams_due(now)) due.push_back(*table.stream(id));
  }
  // Each stops with timeout and retires, answering what it held.
  for (auto& s : due) on_event(*s, [now](stream_protocol& p, stream_work& w) { p.expire(now, w); });
}

void stop_streams(serve_state& state, const error& why) {
  std::vector<std::shared_ptr<stream_impl>> open;
  {
    std::lock_guard guard{state.mutex};
    state.table.each_stream([&open](std::int64_t, const std::shared_ptr<stream_impl>& s) { open.push_back(s); });
  }
  for (auto& stream : open) {
    on_event(*stream, [&why](stream_protocol& p, stream_work& w) { p.lost(why, w); });
  }
}

void serve_state::on_stream_call(const std::shared_ptr<serve_state>& self, std::shared_ptr<rpc_promise::impl> promise,
                                 wire::message& msg, const wire::rpc_call& call,
                                 std::shared_ptr<std::atomic<bool>> cancelled) {
  auto args = dict_view::parse(msg.payload.span());
  if (args && args->find(stream_field::id) != nullptr) {
    promise->handler.reset();  // control calls do not count against max_concurrent
    return control_call(*this, promise, *args);
  }
  auto name = std::move(promise->handler);  // counted by the stream, once admitted, until it is retired
  if (args && args->find(stream_field::window) == nullptr) {
    return promise->answer_error(error{errc::invalid_argument, "'" + call.method + "' " + std::string{rpc_serves_stream} +
                                                                   ": call it with call_stream() (sluice rpc call --stream)"});
  }
  std::optional<error> refused;
  {
    std::lock_guard guard{mutex};
    if (auto ok = table.admit(*name); !ok) refused = std::move(ok).error();
  }
  if (refused) return promise->answer_error(*refused);
  auto request = make_request(*owner_client, call.method, msg, call, cancelled);
  auto s = request ? std::make_shared<stream_impl>(stream_server_options{
                         .method = call.method,
                         .window = stream_window_of(request->args()),
                         .deadline = request->deadline(),
                     })
                   : nullptr;
  if (s) {
    s->serving = self;
    s->handler = name;
    s->serving_thread = std::this_thread::get_id();
    s->request_cancelled = std::move(cancelled);
  }
  {
    std::lock_guard guard{mutex};
    auto id = request ? table.open_stream(s, request->deadline()) : result<std::int64_t>{request.error()};
    if (!id) {
      table.release(*name);
      refused = std::move(id).error();
    } else {
      s->id = *id;
      note_stream_deadlines();
    }
  }
  if (refused) return promise->answer_error(*refused);
  dict_builder opened;
  (void)opened.add_int64(stream_field::id, s->id);
  (void)opened.add_string(stream_field::server, owner_client->host->id().to_string());
  promise->answer(opened);
  try {
    s->handler->handler.stream(std::move(*request), rpc_stream_writer{s});
  } catch (...) {
    end_stream(*s, error{errc::handler_failed, threw(call.method, std::current_exception())});
  }
}

// --- the writer ------------------------------------------------------------------

rpc_stream_writer::rpc_stream_writer(std::shared_ptr<impl> state) : impl_(std::move(state)) {}
rpc_stream_writer::rpc_stream_writer(rpc_stream_writer&&) noexcept = default;
rpc_stream_writer& rpc_stream_writer::operator=(rpc_stream_writer&& other) noexcept {
  if (this != &other) {
    if (impl_) end_stream(*impl_, error{errc::handler_failed, "the handler dropped its stream writer unfinished"});
    impl_ = std::move(other.impl_);
  }
  return *this;
}
rpc_stream_writer::~rpc_stream_writer() {
  if (impl_) end_stream(*impl_, error{errc::handler_failed, "the handler dropped its stream writer unfinished"});
}

result<void> rpc_stream_writer::write(const dict_builder& item) {
  if (!impl_) return sluice::fail(errc::invalid_argument, "a moved-from stream writer");
  return write_item(*impl_, item, true);
}
result<void> rpc_stream_writer::try_write(const dict_builder& item) {
  if (!impl_) return sluice::fail(errc::invalid_argument, "a moved-from stream writer");
  return write_item(*impl_, item, false);
}
void rpc_stream_writer::finish() {
  if (impl_) end_stream(*impl_, std::nullopt);
}
void rpc_stream_writer::fail(const error& err) {
  if (impl_) end_stream(*impl_, err);
}
bool rpc_stream_writer::cancelled() const noexcept {
  if (!impl_) return true;
  std::lock_guard guard{impl_->mutex};
  return impl_->protocol.cancelled(stream_clock::now());
}
std::uint32_t rpc_stream_writer::credit() const noexcept {
  if (!impl_) return 0;
  std::lock_guard guard{impl_->mutex};
  return impl_->protocol.credit();
}

// --- answers -----------------------------------------------------------------------

bool rpc_promise::impl::claim() {
  if (answered.exchange(true, std::memory_order_acq_rel)) return false;
  SLUICE_ASSERT(!counted || handler);  // counted against the name it was admitted to
  if (!counted && !tracked) return true;
  std::lock_guard guard{serving->mutex};
  if (counted) serving->table.release(*handler);
  if (tracked) serving->table.untrack(request_id);
  return true;
}

void rpc_promise::impl::send(wire::body body, shared_bytes payload) {
  if (through) return through(std::move(body), std::move(payload));
  wire::envelope env;
  env.reply_to = request_id;
  env.source = serving->owner_client->host->id();
  env.target = reply_to;
  env.body = std::move(body);
  // Under the lock, so that the channel cannot close (and its thread be
  // joined) while an answer is being written from another thread.
  std::lock_guard guard{serving->mutex};
  if (!serving->channel) return;  // the endpoint closed: nobody can take the answer
  if (auto sent = serving->channel->send(wire::encode(env, std::move(payload))); !sent) {
    get_logger("rpc")->warn("the answer to '{}' was not sent: {}", method, sent.error().to_string());
  }
}

void rpc_promise::impl::answer(const dict_builder& result) {
  if (!claim()) return;
  auto encoded = encode_dict(*serving->owner_client, result);
  if (!encoded) {
    auto why = std::move(encoded).error();
    return send(wire::error_reply{why.code(), "the result of '" + method + "' could not be sent: " + why.message()},
                {});
  }
  send(wire::rpc{wire::rpc_reply{encoded->buffer}}, std::move(encoded->payload));
}

void rpc_promise::impl::answer(const dict_view& encoded) {
  if (!claim()) return;
  auto region = encoded.region();
  auto room = make_args(*serving->owner_client, region.size(), region.size() >= rpc_pool_bytes_min);
  if (!room) {
    auto why = std::move(room).error();
    return send(wire::error_reply{why.code(), "the result of '" + method + "' could not be sent: " + why.message()}, {});
  }
  std::memcpy(room->bytes().data(), region.data(), region.size());
  auto e = take_encoded(*room);
  send(wire::rpc{wire::rpc_reply{e.buffer}}, std::move(e.payload));
}

void rpc_promise::impl::answer_encoded(rpc_args& encoded) {
  if (!claim()) return;
  auto e = take_encoded(encoded);
  send(wire::rpc{wire::rpc_reply{e.buffer}}, std::move(e.payload));
}

void rpc_promise::impl::answer_end() {
  if (!claim()) return;
  send(wire::rpc{wire::rpc_reply{0}}, {});
}

void rpc_promise::impl::answer_error(const error& err) {
  if (!claim()) return;
  send(wire::error_reply{err.code(), err.message()}, {});
}

}  // namespace sluice
