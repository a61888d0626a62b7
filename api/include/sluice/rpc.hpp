// sluice/rpc.hpp: named handlers. A client serves a name; any client of
// the cluster calls it, on this host or another, with a deadline, and gets
// a typed result or a typed error (docs/rpc.md).
//
//   auto& rpc = (*c)->rpc();
//   rpc.serve("embed", [](const sluice::rpc_request& req) -> sluice::result<sluice::dict_builder> {
//     auto text = req.args().find("text")->as_string();
//     sluice::dict_builder out;
//     out.add_int64("length", static_cast<std::int64_t>(text->size()));
//     return out;
//   });
//
//   sluice::dict_builder args;
//   args.add_string("text", "hello");
//   auto r = (*other)->rpc().call(sluice::rpc_target::any(), "embed", args);
//   // r->dict().find("length")->as_int64() == 5
//
// A handler may also answer with a stream of items, read with
// backpressure (serve_stream, call_stream; docs/rpc.md, "Streams"):
//
//   auto stream = (*other)->rpc().call_stream(sluice::rpc_target::any(), "generate", args);
//   while (true) {
//     auto item = stream.next();
//     if (!item || !*item) break;  // an error (item.error() says why), or the end
//     // (*item)->dict() ...
//   }
//
// Arguments and results are dicts (sluice/dict.hpp). On the owner's host a
// large one (64 KiB or more encoded) is written once into the owner's pool
// and read there in place by the other side; across hosts it is sent once,
// between the owners.
//
// Thread safety: an rpc_endpoint may be used from many threads at once.
// Handlers run on a Sluice thread of the serving client, one call after
// another (see serve()); callbacks of call_async run on a Sluice thread:
// keep them short, never wait in them for another call of this client.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "sluice/client.hpp"
#include "sluice/dict.hpp"
#include "sluice/result.hpp"
#include "sluice/value.hpp"

namespace sluice {

/// Who a call goes to.
struct rpc_target {
  /// Empty: any live instance of the name (see rpc_call_options::routing).
  /// Otherwise the id of the serving client (its rpc_endpoint::id(), 16
  /// hex digits, as `sluice rpc ls` lists it).
  std::string client{};

  static rpc_target any() { return {}; }
  static rpc_target of(std::string client_id) { return {std::move(client_id)}; }
};

/// How a call to any instance picks one.
enum class rpc_routing : std::uint8_t {
  /// Each live instance in turn.
  round_robin = 0,
  /// The instance with the fewest calls in flight from the caller's owner
  /// (ties in turn).
  least_outstanding = 1,
};

struct rpc_call_options {
  /// The call's deadline, which the handler sees too; 0: the client's
  /// default (client_options::timeout).
  std::chrono::milliseconds timeout{0};
  rpc_routing routing = rpc_routing::round_robin;
};

/// Where bytes lie in the owner's pool: its segment, the offset in it and
/// the length. Two processes on the owner's host that see the same
/// location see the same memory.
struct pool_location {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  friend bool operator==(const pool_location&, const pool_location&) = default;
};

/// One call, as its handler sees it. Move-only; it holds the arguments'
/// bytes (in the owner's pool when they are large and local) until it is
/// destroyed.
class rpc_request {
 public:
  rpc_request(rpc_request&&) noexcept;
  rpc_request& operator=(rpc_request&&) noexcept;
  ~rpc_request();

  /// The name called.
  const std::string& method() const noexcept;
  /// The arguments, read in place.
  const dict_view& args() const noexcept;
  /// The calling client's id.
  const std::string& caller() const noexcept;
  /// When the caller stops waiting (its deadline, as it arrived here).
  std::chrono::steady_clock::time_point deadline() const noexcept;
  /// True once the caller cancelled the call or its deadline passed: the
  /// answer will not be read, so a long handler may stop early. (A cancel
  /// reaches an async handler's call; a sync handler sees its deadline.)
  bool cancelled() const noexcept;
  /// Where the arguments lie in the owner's pool, when they are read there
  /// in place; nothing when they came with the call.
  std::optional<pool_location> args_location() const noexcept;

  struct impl;
  explicit rpc_request(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

/// An answer to give later (an asynchronous handler). Move-only; any
/// thread may answer. The first answer counts; later ones are ignored. A
/// promise destroyed without an answer answers `handler_failed`.
class rpc_promise {
 public:
  rpc_promise(rpc_promise&&) noexcept;
  rpc_promise& operator=(rpc_promise&&) noexcept;
  ~rpc_promise();

  /// Answers with `result`, encoded now: the buffers it borrows need to
  /// stay valid only during this call.
  void reply(const dict_builder& result);
  /// Answers with a dict already encoded (another call's result, a KV
  /// value holding a dict), copied once.
  void reply(const dict_view& result);
  /// Answers with an error: the caller gets its code and message.
  void reply_error(const error& err);
  bool answered() const noexcept;

  struct impl;
  explicit rpc_promise(std::shared_ptr<impl> state);

 private:
  std::shared_ptr<impl> impl_;
};

/// A handler answering at once. It returns the result or an error; an
/// error reaches the caller with its own code and message, an exception
/// as `handler_failed` with its what().
using rpc_handler = std::function<result<dict_builder>(const rpc_request&)>;
/// A handler answering later, through the promise.
using rpc_async_handler = std::function<void(rpc_request, rpc_promise)>;

struct serve_options {
  /// Calls this handler has at once, started and not answered; more are
  /// answered `overloaded` without running it. 1 to 65536.
  std::uint32_t max_concurrent = 64;
  /// How long the thread that runs this client's handlers spins for the
  /// next call before it sleeps (the largest of the served names counts).
  /// It spins yielding the core at each turn, so it never keeps the owner
  /// (or anything else on its core) from running: next to its owner on a
  /// small machine the owner passes the next call on meanwhile; on a core
  /// of its own it finds the call without a wake-up. 0: sleep at once
  /// (no idle CPU; each call then costs a wake-up).
  std::chrono::microseconds spin{50};
};

/// A call's result. Move-only; it holds the result's bytes until it is
/// destroyed.
class rpc_result {
 public:
  rpc_result(rpc_result&&) noexcept;
  rpc_result& operator=(rpc_result&&) noexcept;
  ~rpc_result();

  const dict_view& dict() const noexcept;
  /// Where the result lies in the owner's pool, when it is read there in
  /// place; nothing when it came with the answer.
  std::optional<pool_location> location() const noexcept;

  struct impl;
  explicit rpc_result(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

/// A call in flight, to cancel it. Copyable; cancelling a finished call
/// does nothing.
class rpc_call_handle {
 public:
  rpc_call_handle() = default;
  /// Gives the call up: its result becomes `cancelled` (unless it came
  /// already), and the handler learns of it (rpc_request::cancelled()).
  void cancel() const;

  struct state;
  explicit rpc_call_handle(std::shared_ptr<state> s) : state_(std::move(s)) {}

 private:
  std::shared_ptr<state> state_;
};

/// A call in flight with a future of its result.
class rpc_future {
 public:
  rpc_future(std::future<result<rpc_result>> future, rpc_call_handle handle)
      : future_(std::move(future)), handle_(std::move(handle)) {}

  /// Waits for the result (the call's deadline bounds the wait).
  result<rpc_result> get() { return future_.get(); }
  /// Whether the result came within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) const {
    return future_.wait_for(timeout) == std::future_status::ready;
  }
  void cancel() const { handle_.cancel(); }
  const rpc_call_handle& handle() const noexcept { return handle_; }

 private:
  std::future<result<rpc_result>> future_;
  rpc_call_handle handle_;
};

/// A call's arguments written in place: on the owner's host, room in the
/// owner's pool that the handler then reads where it is, with no copy at
/// all after the caller's own write; elsewhere, a buffer of the client's.
/// Encode a dict into bytes() (dict_builder::encode_into), then pass it to
/// call(). Move-only; a call consumes it. REQUIRES: the client outlives it.
class rpc_args {
 public:
  rpc_args(rpc_args&&) noexcept;
  rpc_args& operator=(rpc_args&&) noexcept;
  ~rpc_args();

  /// Exactly the size asked for, 64-byte aligned.
  std::span<std::byte> bytes() const noexcept;
  /// Where bytes() lies in the owner's pool; nothing when it is the
  /// client's own buffer.
  std::optional<pool_location> location() const noexcept;

  struct impl;
  explicit rpc_args(std::unique_ptr<impl> state);

 private:
  friend struct rpc_args_access;
  std::unique_ptr<impl> impl_;
};

/// The serving end of one stream (serve_stream): each write() is one item
/// for the caller, in the order written, then finish() or fail() ends it.
/// Move-only; any thread may write, during the handler or after it
/// returned. Thread safety: one writer at a time per stream.
///
/// Backpressure: the caller grants credit for `window` items
/// (rpc_stream_options::window) and grants one more for each it consumes.
/// write() takes one credit, waiting for it while the caller lags (until
/// the stream's deadline); try_write() does not wait. So at most `window`
/// items of a stream are written and not yet consumed, anywhere.
///
/// A writer destroyed before finish() or fail() fails the stream with
/// `handler_failed` (after the items written). REQUIRES: the client
/// outlives it (when the client closes, writes fail `unavailable`).
class rpc_stream_writer {
 public:
  rpc_stream_writer(rpc_stream_writer&&) noexcept;
  rpc_stream_writer& operator=(rpc_stream_writer&&) noexcept;
  ~rpc_stream_writer();

  /// Sends `item`, encoded now (the buffers it borrows need to stay valid
  /// only during this call); large ones go through the owner's pool as
  /// results do. Waits for credit up to the stream's deadline. Errors:
  /// cancelled (the caller cancelled the stream or went away); timeout
  /// (the deadline passed); invalid_argument (after finish() or fail());
  /// overloaded (no credit, and this is the thread that runs the
  /// client's handlers, which must not wait: it is the one that takes the
  /// caller's credit); unavailable (this client's link to its owner broke).
  result<void> write(const dict_builder& item);
  /// The same without waiting: overloaded when the caller has not granted
  /// credit for another item yet.
  result<void> try_write(const dict_builder& item);
  /// Ends the stream: the caller gets every item written, then the end.
  void finish();
  /// Ends the stream with `err`: the caller gets every item written, then
  /// `err` (its code; the message after the name, as for a call).
  void fail(const error& err);
  /// True once the caller cancelled or went away, or the deadline passed.
  bool cancelled() const noexcept;
  /// Items write() may send now without waiting.
  std::uint32_t credit() const noexcept;

  struct impl;
  explicit rpc_stream_writer(std::shared_ptr<impl> state);

 private:
  std::shared_ptr<impl> impl_;
};

/// A handler of a stream: it gets the request and the writer, and returns
/// at once (it runs on the thread that takes the client's calls); items
/// are written from a thread of its own, or from here while there is
/// credit (try_write, or write() that then does not wait).
using rpc_stream_handler = std::function<void(rpc_request, rpc_stream_writer)>;

struct rpc_stream_options {
  /// The whole stream's deadline; 0: the client's default
  /// (client_options::timeout). When it passes, both ends see `timeout`.
  std::chrono::milliseconds timeout{0};
  rpc_routing routing = rpc_routing::round_robin;
  /// Items the handler may write ahead of what next() consumed: the
  /// credit window. 1 to 1024.
  std::uint32_t window = 16;
};

/// The calling end of a stream (call_stream). Move-only; one reader at a
/// time. Destroying it before the end cancels the stream.
class rpc_stream {
 public:
  rpc_stream(rpc_stream&&) noexcept;
  rpc_stream& operator=(rpc_stream&&) noexcept;
  ~rpc_stream();

  /// The next item, in the order the handler wrote them; nothing at the
  /// end of the stream (and on every later call). Errors end the stream:
  /// the handler's own (after the items it wrote before it failed);
  /// timeout (the stream's deadline passed); unavailable (the serving
  /// process or an owner on the way went away); cancelled; and the errors
  /// of a call when it could not start (not_found, overloaded, ...).
  /// `wait` > 0 bounds this wait alone: when it ends first, the result is
  /// `timeout` and the stream goes on (a later next() gets the item).
  result<std::optional<rpc_result>> next(std::chrono::milliseconds wait = std::chrono::milliseconds{0});
  /// Gives the stream up: the handler's writer then fails `cancelled`;
  /// next() answers `cancelled`. Does nothing after the end.
  void cancel();

  struct impl;
  explicit rpc_stream(std::shared_ptr<impl> state);

 private:
  std::shared_ptr<impl> impl_;
};

/// An instance as the master lists it.
struct rpc_instance_info {
  std::string name;
  std::string client_id;
  std::string client_name;
  std::string owner_id;
  std::string owner_address;
  std::uint32_t max_concurrent = 0;
  bool stream = false;  ///< served with serve_stream: call it with call_stream
};

/// A client's RPC side: (*client)->rpc().
class rpc_endpoint {
 public:
  ~rpc_endpoint();
  rpc_endpoint(const rpc_endpoint&) = delete;
  rpc_endpoint& operator=(const rpc_endpoint&) = delete;

  /// This client's id: what callers name in rpc_target::of() to reach its
  /// instances.
  std::string id() const;

  /// Serves `name` with `handler` until unserve() or the client's end
  /// (then, or when the process dies, the instance leaves the registry and
  /// calls in progress fail `unavailable` at their callers). Serving a
  /// name again replaces its handler. Handlers run one at a time on this
  /// client's serving thread: a handler that blocks delays the next call
  /// (give long work an async handler).
  result<void> serve(std::string_view name, rpc_handler handler, serve_options options = {});
  result<void> serve_async(std::string_view name, rpc_async_handler handler, serve_options options = {});
  /// Serves `name` with a handler that answers with a stream of items
  /// (rpc_stream_writer). max_concurrent counts the streams open at once.
  result<void> serve_stream(std::string_view name, rpc_stream_handler handler, serve_options options = {});
  /// Stops serving `name`; not_found when this client does not serve it.
  result<void> unserve(std::string_view name);

  /// Calls `method` on `target` and waits for the result. Errors: the
  /// handler's own; not_found (no live instance, or the target does not
  /// serve it); timeout; unavailable (the instance went away mid-call);
  /// overloaded (it runs max_concurrent calls already); handler_failed;
  /// invalid_argument (a bad name or target).
  result<rpc_result> call(const rpc_target& target, std::string_view method, const dict_builder& args,
                          rpc_call_options options = {});
  /// Calls with arguments already written in place (args_buffer()).
  result<rpc_result> call(const rpc_target& target, std::string_view method, rpc_args args,
                          rpc_call_options options = {});
  /// Room for `size` bytes of encoded arguments (see rpc_args).
  /// invalid_argument for 0 or more than the owner's max_value.
  result<rpc_args> args_buffer(std::uint64_t size);

  /// The same, without waiting: a future, and a way to cancel.
  rpc_future call_async(const rpc_target& target, std::string_view method, const dict_builder& args,
                        rpc_call_options options = {});
  /// The same with a callback, which runs exactly once.
  rpc_call_handle call_async(const rpc_target& target, std::string_view method, const dict_builder& args,
                             std::function<void(result<rpc_result>)> done, rpc_call_options options = {});

  /// Calls `method`, served by serve_stream(), and reads its items with
  /// the stream returned (errors, including those of starting it, come
  /// from its next()). Starting waits for the handler's client to take the
  /// stream, not for an item.
  rpc_stream call_stream(const rpc_target& target, std::string_view method, const dict_builder& args,
                         rpc_stream_options options = {});

  /// Instances of `name` (with prefix: of every name starting with it;
  /// "" lists all) whose owner is up, as the master knows them.
  result<std::vector<rpc_instance_info>> instances(std::string_view name, bool prefix = false,
                                                   call_options options = {});

  struct impl;
  explicit rpc_endpoint(std::unique_ptr<impl> state);

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace sluice
