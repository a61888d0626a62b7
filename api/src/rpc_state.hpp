// What the RPC side of the client library shares between its files: the
// states behind the public types of sluice/rpc.hpp, and the helpers that
// turn dicts into payloads and answers into results.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>
#include <chrono>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "actors/client/client_rpc.hpp"
#include "actors/client/serve_table.hpp"
#include "actors/client/stream_protocol.hpp"
#include "api/src/client_impl.hpp"
#include "api/src/call_channel.hpp"
#include "sluice/rpc.hpp"

namespace sluice {

struct rpc_request::impl {
  std::string method;
  std::string caller;
  value bytes;  // keeps the arguments (and any pool lease) alive
  std::optional<dict_view> args;
  std::chrono::steady_clock::time_point deadline;
  std::shared_ptr<std::atomic<bool>> cancelled;
  std::optional<pool_location> location;
};

struct rpc_result::impl {
  value bytes;
  std::optional<dict_view> dict;
  std::optional<pool_location> location;
};

/// The library's way to the state behind an rpc_args (null once moved from).
struct rpc_args_access {
  static rpc_args::impl* of(const rpc_args& args) noexcept { return args.impl_.get(); }
};

struct rpc_args::impl {
  client::impl* owner = nullptr;  // REQUIRES: outlives this
  std::uint64_t buffer = 0;       // a pool buffer of the owner; 0: `keep` is a buffer of ours
  std::shared_ptr<const void> keep;
  std::span<std::byte> bytes;
  std::optional<pool_location> location;
  bool sent = false;
};

struct rpc_call_handle::state {
  std::function<void(result<rpc_result>)> done;
  std::atomic<bool> finished{false};
  /// Tells the handler (through the owner); empty where it cannot.
  std::function<void()> on_cancel;

  /// Runs `done` unless the call finished already.
  void complete(result<rpc_result> outcome);
};

/// A dict ready to travel: inline as the frame's payload, or in a pool
/// buffer of the owner (buffer != 0).
struct encoded_dict {
  shared_bytes payload;
  std::uint64_t buffer = 0;
};

/// Room for `size` bytes of arguments or a result: in the owner's pool
/// (a buffer asked for on the calling thread's direct channel) when
/// `in_pool` and the client is on the owner's host, else a buffer of its
/// own.
result<rpc_args> make_args(client::impl& c, std::uint64_t size, bool in_pool);
/// What is written in `args`, ready to travel (the call takes it over).
encoded_dict take_encoded(rpc_args& args);
/// Encodes `d` once, into the pool when it is large (rpc_pool_bytes_min).
result<encoded_dict> encode_dict(client::impl& c, const dict_builder& d);

/// The result carried by an answer to rpc_call.
result<rpc_result> to_rpc_result(client::impl& c, result<wire::message>& reply);

/// Where `bytes` lie in this client's mapping of the owner's pool.
std::optional<pool_location> locate_in_pool(client::impl& c, std::span<const std::byte> bytes);

// How a stream travels (stream_field, its window's bound): the client
// core's actors/client/stream_protocol.hpp.

/// What a plain call to a stream's name is answered (invalid_argument),
/// after the name: the launcher looks for it.
inline constexpr std::string_view rpc_serves_stream = "serves a stream";

/// What serves a name: one of the three.
struct served_handler {
  rpc_handler sync;
  rpc_async_handler async;
  rpc_stream_handler stream;
};
/// A call in progress that a cancel reaches: the flag its handler reads
/// (rpc_request::cancelled()) and, for a watch or pull, its stream.
struct served_call {
  std::weak_ptr<std::atomic<bool>> cancelled;
  std::weak_ptr<rpc_stream_writer::impl> stream;
};
/// The client core's serving state (actors/client/serve_table.hpp): names,
/// admission, calls a cancel reaches, open streams.
using serve_core = serve_table<served_handler, served_call, std::shared_ptr<rpc_stream_writer::impl>>;
using served_name = serve_core::name_entry;

/// The serving side of one client: the client core's serving state under
/// a mutex, and the channel calls arrive on. Shared with the promises of
/// calls in progress, which may outlive the endpoint (their answers then
/// go nowhere).
struct serve_state : std::enable_shared_from_this<serve_state> {
  explicit serve_state(client::impl* c) : owner_client(c), table(c->host->id().to_string()) {}

  client::impl* owner_client;  // REQUIRES: outlives every use through a channel
  std::mutex mutex;            // guards the members below
  serve_core table;
  /// Null once the endpoint closed.
  std::shared_ptr<call_channel> channel;
  /// The table's next_stream_deadline() in steady-clock ticks (max: none),
  /// kept beside it so that the serving thread's look at every turn takes
  /// no lock. Written under `mutex`.
  std::atomic<stream_time::rep> next_stream_due{std::numeric_limits<stream_time::rep>::max()};

  /// A frame the serving channel's thread read that answers nothing: a
  /// call (to on_call) or a cancel (to on_cancel); anything else is dropped.
  void on_frame(const std::shared_ptr<serve_state>& self, wire::message msg);
  /// Runs the call's handler (on the channel's thread, or on the thread
  /// of a node_served). `answer`: how the answer goes back; empty: on
  /// `channel`.
  void on_call(const std::shared_ptr<serve_state>& self, wire::message msg, rpc_served::answer_fn answer = {});
  void on_cancel(std::uint64_t id);
  /// Ends the streams whose deadline passed by `now` (their caller may be
  /// gone without a word): the serving thread calls it at every turn.
  void expire_streams(stream_time now);
  /// After a stream opened or closed. REQUIRES: `mutex` held.
  void note_stream_deadlines() {
    auto next = table.next_stream_deadline();
    next_stream_due.store(next ? next->time_since_epoch().count() : std::numeric_limits<stream_time::rep>::max(),
                          std::memory_order_relaxed);
  }
  /// A call to a name served by serve_stream(): its opening call or one of
  /// its control calls (rpc_serve_calls.cpp).
  void on_stream_call(const std::shared_ptr<serve_state>& self, std::shared_ptr<rpc_promise::impl> promise,
                      wire::message& msg, const wire::rpc_call& call, std::shared_ptr<std::atomic<bool>> cancelled);
};

/// Serves the calls that reach the client node's own link (a client over
/// TCP has no channel of its own): a thread of its own runs them one after
/// another, so that the client actor never waits for a handler.
class node_served final : public rpc_served {
 public:
  explicit node_served(std::shared_ptr<serve_state> state);
  ~node_served() override;
  void on_call(wire::message call, answer_fn answer) override;
  void on_cancel(std::uint64_t id) override;
  void on_link_down() override {
    if (on_down) on_down();
  }
  /// Told when the node's link went down. Set before the node may call.
  std::function<void()> on_down;
  /// Stops the thread (what is queued is answered `unavailable`).
  /// Idempotent. REQUIRES: not called from a handler.
  void stop();

 private:
  void run();

  std::shared_ptr<serve_state> state_;
  std::mutex mutex_;  // guards queue_, stopping_
  std::condition_variable wake_;
  std::deque<std::pair<wire::message, answer_fn>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: it starts once the rest exists
};

/// What answering one call needs; shared by the sync path and a promise.
struct rpc_promise::impl {
  std::shared_ptr<serve_state> serving;
  std::shared_ptr<served_name> handler;
  /// The call was admitted to `handler` (counted in its in_flight until answered).
  bool counted = false;
  std::uint64_t request_id = 0;
  node_id reply_to;  // the envelope's source: the owner or the caller
  std::string method;
  /// How the answer goes back; empty: on serving->channel.
  rpc_served::answer_fn through;
  /// The call is tracked in serving->table (an async handler's or a
  /// stream's: cancels reach it).
  bool tracked = false;
  std::atomic<bool> answered{false};

  void answer(const dict_builder& result);
  void answer(const dict_view& encoded);
  void answer_error(const error& err);
  /// Answers with a dict written in `encoded` (a stream's item).
  void answer_encoded(rpc_args& encoded);
  /// Answers with no payload at all: a stream's end (rpc_serve_calls.cpp).
  void answer_end();

 private:
  bool claim();
  void send(wire::body body, shared_bytes payload);
};

/// What the handler of an admitted call sees, or invalid_argument when
/// its arguments are not a dict (rpc_serve_calls.cpp).
result<rpc_request> make_request(client::impl& c, const std::string& method, wire::message& msg,
                                 const wire::rpc_call& call, std::shared_ptr<std::atomic<bool>> cancelled);
/// The handler_failed message for an exception a handler threw.
std::string threw(const std::string& method, std::exception_ptr e);

/// A watch or pull of `stream` was cancelled: the caller cancelled the
/// stream, went away, or its deadline passed (rpc_serve_calls.cpp).
void stream_call_cancelled(rpc_stream_writer::impl& stream);
/// Stops every stream `state` serves with `why` (its link broke, or the
/// endpoint closes): their writers' writes then fail with it.
void stop_streams(serve_state& state, const error& why);

}  // namespace sluice
