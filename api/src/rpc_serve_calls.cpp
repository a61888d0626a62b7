// The serving side: a call arrives on the serving channel's thread, runs
// its handler there, and its answer goes back on the same channel (the
// owner matches it to the call by link and request id).
#include <cstring>
#include <exception>

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

// --- calls on the node's own link -----------------------------------------------------

/// Calls waiting for the serving thread at most; more are answered
/// `overloaded` at once (the client actor must never block on them).
constexpr std::size_t node_served_queue_max = 65536;
/// How often the serving thread looks for streams past their deadline
/// while no call comes: how late such a stream ends at most.
constexpr std::chrono::milliseconds stream_look_every{10};

node_served::node_served(std::shared_ptr<serve_state> state) : state_(std::move(state)), thread_([this] { run(); }) {}

node_served::~node_served() { stop(); }

void node_served::stop() {
  {
    std::lock_guard guard{mutex_};
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  for (auto& [call, answer] : queue_) {
    answer(wire::error_reply{errc::unavailable, "the serving client is closing"}, {});
  }
  queue_.clear();
}

void node_served::on_call(wire::message call, answer_fn answer) {
  {
    std::lock_guard guard{mutex_};
    if (!stopping_ && queue_.size() < node_served_queue_max) {
      queue_.emplace_back(std::move(call), std::move(answer));
      wake_.notify_one();
      return;
    }
  }
  answer(wire::error_reply{errc::overloaded, "this client has " + std::to_string(node_served_queue_max) +
                                                 " calls waiting for its handlers already"},
         {});
}

void node_served::on_cancel(std::uint64_t id) { state_->on_cancel(id); }

void node_served::run() {
  while (true) {
    std::pair<wire::message, answer_fn> next;
    {
      std::unique_lock lock{mutex_};
      // Wakes now and then with nothing to do: streams come due.
      wake_.wait_for(lock, stream_look_every, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      if (!queue_.empty()) {
        next = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (next.second) state_->on_call(state_, std::move(next.first), std::move(next.second));
    state_->expire_streams(stream_clock::now());
  }
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
