// The serving side of streams (docs/rpc.md, "Streams"). A stream is a
// convention over ordinary calls to its name, so it takes every path a
// call takes (the owner's relay, owner to owner) with nothing new on the
// wire:
//
//  - the opening call carries the caller's arguments plus its credit
//    window, and is answered at once with the stream's id;
//  - the caller's "watch" stays open for the stream's life: its cancel
//    (the caller cancelled, or its link closed and the owner cancelled
//    what it had in flight) stops the stream here;
//  - each "pull" k is the caller's credit for item k: it is answered with
//    that item, or the end (a reply with no payload at all), or the
//    stream's error. The caller sends pull k + window when it consumes
//    item k, so the items written and not consumed never exceed the
//    window, and this side holds at most that many.
#include <cstring>

#include "api/src/rpc_internal.hpp"
#include "runtime/rpc_limits.hpp"

namespace sluice {

using stream_clock = std::chrono::steady_clock;

struct rpc_stream_writer::impl {
  std::shared_ptr<serve_state> serving;
  /// Its in_flight counts this stream until it is retired.
  std::shared_ptr<served_name> handler;
  std::int64_t id = 0;
  std::string method;
  stream_clock::time_point deadline;
  /// The thread that takes this client's calls: it must never wait for
  /// credit, since the pulls that grant it arrive on it.
  std::thread::id serving_thread;
  /// The opening request's: rpc_request::cancelled() turns true with the stream's stop.
  std::shared_ptr<std::atomic<bool>> request_cancelled;

  mutable std::mutex mutex;  // guards what follows
  std::condition_variable credit_changed;
  /// One past the last item the caller granted credit for.
  std::int64_t granted = 0;
  /// The caller's window: also the most items held here unpulled, so that
  /// a caller that pulls out of turn cannot make this side hold more.
  std::int64_t window = 1;
  /// Items given a place in the stream (written, or being encoded).
  std::int64_t reserved = 0;
  /// finish() or fail() was called: the items before it are the stream.
  std::optional<std::int64_t> end_at;
  std::optional<error> end_error;  // fail()'s; none: finish()
  bool end_delivered = false;
  /// Cancelled, or past the deadline: every pull gets this at once.
  std::optional<error> stopped;
  bool retired = false;
  /// Pulls waiting for their item, by item.
  std::map<std::int64_t, std::shared_ptr<rpc_promise::impl>> pulls;
  /// Items written whose pull has not come yet (at most the window).
  std::map<std::int64_t, rpc_args> items;
  std::shared_ptr<rpc_promise::impl> watch;
};

namespace {

/// An answer to give once the stream's lock is let go (answering takes
/// the serving state's lock and writes to the channel).
struct outgoing {
  std::shared_ptr<rpc_promise::impl> to;
  std::optional<rpc_args> item;
  std::optional<error> err;
  bool end = false;
  bool empty_dict = false;  // a cancel's answer: an empty dict, as a call's result
};

struct pending_work {
  std::vector<outgoing> answers;
  std::vector<rpc_args> dropped;  // items nobody will read: their pool buffers go back
  bool retire = false;
};

using stream_impl = rpc_stream_writer::impl;

error named(const stream_impl& s, const error& err) {
  return error{err.code(), "'" + s.method + "': " + err.message()};
}

/// Answers the pulls that can be answered, and retires the stream when it
/// is over. REQUIRES: s.mutex held.
void settle(stream_impl& s, pending_work& work) {
  for (auto it = s.pulls.begin(); it != s.pulls.end();) {
    auto seq = it->first;
    if (auto item = s.items.find(seq); item != s.items.end() && !s.stopped) {
      work.answers.push_back({it->second, std::move(item->second), {}, false});
      s.items.erase(item);
      s.credit_changed.notify_all();  // room for one more held item
    } else if (s.stopped) {
      work.answers.push_back({it->second, {}, s.stopped, false});
    } else if (s.end_at && seq >= *s.end_at) {
      if (s.end_error) {
        work.answers.push_back({it->second, {}, named(s, *s.end_error), false});
      } else {
        work.answers.push_back({it->second, {}, {}, true});
      }
      if (seq == *s.end_at) s.end_delivered = true;
    } else {
      ++it;
      continue;
    }
    it = s.pulls.erase(it);
  }
  if (s.retired || !(s.stopped || (s.end_at && s.end_delivered))) return;
  s.retired = true;
  work.retire = true;
  // Pulls left (asked twice) and the watch end with the stream.
  for (auto& [seq, p] : s.pulls) {
    work.answers.push_back({p, {}, s.stopped ? s.stopped : std::optional<error>{}, !s.stopped});
  }
  s.pulls.clear();
  if (s.watch) work.answers.push_back({std::move(s.watch), {}, s.stopped, !s.stopped});
  for (auto& [seq, item] : s.items) work.dropped.push_back(std::move(item));
  s.items.clear();
}

void carry_out(stream_impl& s, pending_work& work) {
  for (auto& a : work.answers) {
    if (a.item) {
      a.to->answer_encoded(*a.item);
    } else if (a.err) {
      a.to->answer_error(*a.err);
    } else if (a.end) {
      a.to->answer_end();
    } else if (a.empty_dict) {
      a.to->answer(dict_builder{});
    }
  }
  work.dropped.clear();
  if (!work.retire) return;
  {
    std::lock_guard guard{s.serving->mutex};
    s.serving->streams.erase(s.id);
  }
  s.handler->in_flight.fetch_sub(1, std::memory_order_acq_rel);
}

/// Stops the stream with `err`. REQUIRES: s.mutex held.
void stop(stream_impl& s, error err, pending_work& work) {
  if (s.stopped || s.retired) return;
  s.stopped = std::move(err);
  s.request_cancelled->store(true, std::memory_order_release);
  s.credit_changed.notify_all();
  settle(s, work);
}

error past_deadline(const stream_impl& s) {
  return error{errc::timeout, "the deadline of the stream '" + s.method + "' passed"};
}

/// Why a write cannot go on, if it cannot. REQUIRES: s.mutex held.
std::optional<error> refusal(stream_impl& s, pending_work& work) {
  if (!s.stopped && stream_clock::now() >= s.deadline) stop(s, past_deadline(s), work);
  if (s.stopped) return s.stopped;
  if (s.end_at) return error{errc::invalid_argument, "the stream '" + s.method + "' was ended already"};
  return std::nullopt;
}

/// Encodes `item` once, into the pool when it is large, as a result is.
result<rpc_args> encode_item(client::impl& c, const dict_builder& item) {
  auto size = item.encoded_size();
  auto room = make_args(c, size, size >= rpc_pool_bytes_min);
  if (!room) return room.error();
  if (auto ok = item.encode_into(room->bytes()); !ok) return ok.error();
  return room;
}

result<void> write_item(stream_impl& s, const dict_builder& item, bool wait) {
  pending_work work;
  std::unique_lock lock{s.mutex};
  std::optional<error> refused;
  auto no_credit = [&s] {
    return s.reserved >= s.granted || static_cast<std::int64_t>(s.items.size()) >= s.window;
  };
  while (!(refused = refusal(s, work)) && no_credit()) {
    if (!wait) {
      refused = error{errc::overloaded, "the caller of '" + s.method + "' has granted no credit for another item yet"};
      break;
    }
    if (std::this_thread::get_id() == s.serving_thread) {
      refused = error{errc::overloaded, "no credit for another item of '" + s.method +
                                            "', and the thread that takes this client's calls cannot wait for it: "
                                            "write from a thread of your own"};
      break;
    }
    s.credit_changed.wait_until(lock, s.deadline);
  }
  if (refused) {
    lock.unlock();
    carry_out(s, work);
    return *refused;
  }
  auto seq = s.reserved++;
  lock.unlock();
  auto encoded = encode_item(*s.serving->owner_client, item);
  lock.lock();
  if (!encoded) {
    // The stream cannot go on past a hole: it ends with the error.
    if (!s.end_at) {
      s.end_at = seq;
      s.end_error = error{encoded.code(), "an item could not be sent: " + encoded.error().message()};
    }
    settle(s, work);
    lock.unlock();
    carry_out(s, work);
    return encoded.error();
  }
  if (s.stopped) {
    auto why = *s.stopped;
    lock.unlock();
    return why;
  }
  s.items.emplace(seq, std::move(*encoded));
  settle(s, work);
  lock.unlock();
  carry_out(s, work);
  return {};
}

void end_stream(stream_impl& s, std::optional<error> err) {
  pending_work work;
  {
    std::lock_guard guard{s.mutex};
    if (s.stopped || s.end_at) return;
    s.end_at = s.reserved;
    s.end_error = std::move(err);
    settle(s, work);
  }
  carry_out(s, work);
}

std::shared_ptr<stream_impl> find_stream(serve_state& state, std::int64_t id) {
  std::lock_guard guard{state.mutex};
  auto it = state.streams.find(id);
  return it == state.streams.end() ? nullptr : it->second;
}

/// A watch or a pull: kept until the stream answers it; a cancel of it
/// stops the stream.
void control_call(serve_state& state, const std::shared_ptr<rpc_promise::impl>& promise, const dict_view& args) {
  auto id = args.find(stream_field::id)->as_int64();
  auto* op_field = args.find(stream_field::op);
  auto op = op_field != nullptr ? op_field->as_string() : result<std::string_view>{error{errc::invalid_argument, ""}};
  auto stream = id ? find_stream(state, *id) : nullptr;
  if (!stream) {
    return promise->answer_error(
        error{errc::not_found, "'" + promise->method + "' has no open stream of that id here (it ended)"});
  }
  auto& s = *stream;
  pending_work work;
  std::unique_lock lock{s.mutex};
  if (op && *op == "cancel") {
    stop(s, stream_clock::now() >= s.deadline ? past_deadline(s)
                                               : error{errc::cancelled, "the caller cancelled the stream '" + s.method + "'"},
         work);
    work.answers.push_back({promise, {}, {}, false, true});
  } else if (op && (*op == "watch" || *op == "pull")) {
    {
      std::lock_guard guard{state.mutex};
      state.stream_calls[promise->request_id] = stream;
    }
    auto* seq_field = args.find(stream_field::seq);
    auto seq = seq_field != nullptr ? seq_field->as_int64() : result<std::int64_t>{std::int64_t{0}};
    if (s.retired) {
      work.answers.push_back({promise, {}, s.stopped, !s.stopped});
    } else if (*op == "watch") {
      if (s.watch) work.answers.push_back({std::move(s.watch), {}, error{errc::invalid_argument, "watched twice"}});
      s.watch = promise;
    } else if (!seq || *seq < 0 || s.pulls.size() >= static_cast<std::size_t>(s.window) || s.pulls.contains(*seq)) {
      work.answers.push_back({promise, {}, error{errc::invalid_argument, "a bad pull of a stream"}, false});
    } else {
      if (*seq >= s.granted) {
        s.granted = *seq + 1;
        s.credit_changed.notify_all();
      }
      s.pulls.emplace(*seq, promise);
      settle(s, work);
    }
  } else {
    work.answers.push_back({promise, {}, error{errc::invalid_argument, "an unknown stream operation"}, false});
  }
  lock.unlock();
  carry_out(s, work);
}

}  // namespace

void stream_call_cancelled(rpc_stream_writer::impl& s) {
  pending_work work;
  {
    std::lock_guard guard{s.mutex};
    // The caller's calls of a stream outlast its deadline (docs/rpc.md),
    // so a cancel before it is the caller's: it cancelled, or went away.
    if (stream_clock::now() >= s.deadline) {
      stop(s, past_deadline(s), work);
    } else {
      stop(s, error{errc::cancelled, "the caller of the stream '" + s.method + "' cancelled it or went away"}, work);
    }
  }
  carry_out(s, work);
}

void stop_streams(serve_state& state, const error& why) {
  std::vector<std::shared_ptr<stream_impl>> open;
  {
    std::lock_guard guard{state.mutex};
    for (auto& [id, stream] : state.streams) open.push_back(stream);
  }
  for (auto& stream : open) {
    pending_work work;
    {
      std::lock_guard guard{stream->mutex};
      stop(*stream, why, work);
    }
    carry_out(*stream, work);
  }
}

void serve_state::on_stream_call(const std::shared_ptr<serve_state>& self, std::shared_ptr<rpc_promise::impl> promise,
                                 wire::message& msg, const wire::rpc_call& call,
                                 std::shared_ptr<std::atomic<bool>> cancelled) {
  auto& h = *promise->handler;
  auto args = dict_view::parse(msg.payload.span());
  if (args && args->find(stream_field::id) != nullptr) {
    promise->handler.reset();  // control calls do not count against max_concurrent
    return control_call(*this, promise, *args);
  }
  if (args && args->find(stream_field::window) == nullptr) {
    promise->handler.reset();
    return promise->answer_error(error{errc::invalid_argument, "'" + call.method + "' " + std::string{rpc_serves_stream} +
                                                                   ": call it with call_stream() (sluice rpc call --stream)"});
  }
  auto request = admit(*owner_client, h, call.method, msg, call, cancelled);
  if (!request) {
    promise->handler.reset();
    return promise->answer_error(std::move(request).error());
  }
  auto* window_field = request->args().find(stream_field::window);
  auto window = window_field != nullptr ? window_field->as_int64() : result<std::int64_t>{std::int64_t{16}};
  auto s = std::make_shared<stream_impl>();
  s->serving = self;
  s->handler = std::move(promise->handler);  // counted until the stream is retired
  s->method = call.method;
  s->deadline = request->deadline();
  s->serving_thread = std::this_thread::get_id();
  s->request_cancelled = std::move(cancelled);
  s->window = window ? std::clamp<std::int64_t>(*window, 1, rpc_stream_window_max) : 1;
  s->granted = s->window;
  {
    std::lock_guard guard{mutex};
    s->id = next_stream++;
    streams[s->id] = s;
  }
  dict_builder opened;
  (void)opened.add_int64(stream_field::id, s->id);
  (void)opened.add_string(stream_field::server, owner_client->host->id().to_string());
  promise->answer(opened);
  try {
    s->handler->stream(std::move(*request), rpc_stream_writer{s});
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
  return impl_->stopped.has_value() || stream_clock::now() >= impl_->deadline;
}
std::uint32_t rpc_stream_writer::credit() const noexcept {
  if (!impl_) return 0;
  std::lock_guard guard{impl_->mutex};
  if (impl_->stopped || impl_->end_at) return 0;
  auto room = impl_->window - static_cast<std::int64_t>(impl_->items.size());
  return static_cast<std::uint32_t>(std::max<std::int64_t>(0, std::min(impl_->granted - impl_->reserved, room)));
}

}  // namespace sluice
