// serve_table: the serving side of one client — the names it serves, how
// many calls each runs at once, the calls in progress that a cancel can
// reach, and the streams open here — and the decisions made on them:
// which calls are admitted, which are answered `not_found` or
// `overloaded`, what a cancel reaches, what to serve again on a new link.
// Each open stream's own state machine, stream_server, is below (its
// protocol: stream_protocol.hpp).
//
// Plain code: nothing here locks, sleeps, reads a clock or starts a
// thread. The library's serving shell (api/src/rpc_serve_calls.cpp) keeps one
// under its mutex and runs handlers outside it; the simulator's clients
// keep one per incarnation (sim/rpc_workload.cpp). What a handler is, what
// a call in progress holds and what a stream is are theirs: `Handler`,
// `Call` and `Stream`.
//
// Invariants (asserted):
//   1. a name's in_flight counts the calls admitted to it and not yet
//      released, and never passes its max_concurrent; a name replaced or
//      unserved keeps counting its own calls down (the calls hold it);
//   2. at most names_max names, calls_max calls in progress and
//      streams_max streams; beyond, serve() is refused `invalid_argument`
//      and track() and open_stream() `overloaded`;
//   3. stream ids are handed out once, growing from 1;
//   4. every open stream has exactly one entry in the deadline index, and
//      the index holds nothing else.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include <sluice/error.hpp>
#include <sluice/result.hpp>

#include "actors/client/stream_protocol.hpp"
#include "runtime/assert.hpp"
#include "runtime/rpc_limits.hpp"

namespace sluice {

/// What a served name answers: plain calls (its handler answers each, now
/// or later) or streams (each call opens one).
enum class served_kind : std::uint8_t { call, stream };

/// How a name is served (serve_options, validated).
struct served_limits {
  /// Calls (or open streams) it runs at once; more are answered `overloaded`.
  std::uint32_t max_concurrent = 1;
  /// How long the thread that takes its calls spins before it sleeps.
  std::chrono::microseconds spin{0};
};

/// Bounds of served_limits::max_concurrent.
inline constexpr std::uint32_t served_concurrent_max = 65536;

/// What serving a name again tells the owner.
struct served_again {
  std::string name;
  std::uint32_t max_concurrent = 0;
  bool stream = false;
};

template <class Handler, class Call, class Stream>
class serve_table {
 public:
  /// Names one client serves at most: names are served by hand, a
  /// thousand is far past any service's need and keeps serving again
  /// after a lost link one round trip per name.
  static constexpr std::size_t names_max = 1024;
  /// Calls in progress that a cancel can reach, at most: each is held by
  /// an admitted call (at most max_concurrent per name) or by a watch or
  /// pull of an open stream (at most its window plus one).
  static constexpr std::size_t calls_max = 1 << 20;
  /// Streams open here at most (each also counts against its name's
  /// max_concurrent until it is retired).
  static constexpr std::size_t streams_max = 1 << 16;

  /// One served name. Calls admitted to it hold it (shared), so that a
  /// name served again or unserved while they run still counts them down.
  struct name_entry {
    std::string name;
    Handler handler;
    served_kind kind = served_kind::call;
    served_limits limits;
    std::uint32_t in_flight = 0;
  };
  using name_ref = std::shared_ptr<name_entry>;

  /// `self`: how the client names itself in its answers.
  explicit serve_table(std::string self) : self_(std::move(self)) {}

  // --- names ------------------------------------------------------------------------

  /// Serves `name` (replacing what served it): the entry to keep until
  /// the owner acknowledged it, or invalid_argument for a bad name or
  /// limits, or names_max names served already.
  result<name_ref> serve(std::string_view name, Handler handler, served_kind kind, served_limits limits) {
    if (auto ok = check(name, limits); !ok) return ok.error();
    auto it = names_.find(name);
    if (it == names_.end() && names_.size() >= names_max) {
      return fail(errc::invalid_argument,
                  "this client serves " + std::to_string(names_max) + " names already; unserve one first");
    }
    auto entry = std::make_shared<name_entry>(name_entry{std::string{name}, std::move(handler), kind, limits, 0});
    if (it == names_.end()) {
      names_.emplace(std::string{name}, entry);
    } else {
      it->second = entry;
    }
    return entry;
  }

  /// Whether serve() would take `name` and `limits` (invalid_argument if not).
  static result<void> check(std::string_view name, served_limits limits) {
    if (auto ok = check_rpc_name(name); !ok) return ok.error();
    if (limits.max_concurrent < 1 || limits.max_concurrent > served_concurrent_max) {
      return fail(errc::invalid_argument, "max_concurrent must be from 1 to " + std::to_string(served_concurrent_max));
    }
    if (limits.spin.count() < 0) return fail(errc::invalid_argument, "a negative spin");
    return {};
  }

  /// Stops serving `name`; false when it was not served.
  bool unserve(std::string_view name) {
    auto it = names_.find(name);
    if (it == names_.end()) return false;
    names_.erase(it);
    return true;
  }
  /// Takes back a serve() the owner refused, unless `name` was served
  /// again since (by `entry`'s successor).
  void withdraw(const name_ref& entry) {
    auto it = names_.find(entry->name);
    if (it != names_.end() && it->second == entry) names_.erase(it);
  }

  /// What to tell a new link: every name served, with its limits.
  std::vector<served_again> to_serve_again() const {
    std::vector<served_again> out;
    out.reserve(names_.size());
    for (auto& [name, e] : names_) out.push_back({name, e->limits.max_concurrent, e->kind == served_kind::stream});
    return out;
  }
  /// The longest spin any served name asks for.
  std::chrono::microseconds spin() const {
    std::chrono::microseconds most{0};
    for (auto& [name, e] : names_) most = std::max(most, e->limits.spin);
    return most;
  }
  std::size_t names() const noexcept { return names_.size(); }

  // --- admission --------------------------------------------------------------------

  /// The entry serving `method`, or not_found.
  result<name_ref> find(std::string_view method) const {
    auto it = names_.find(method);
    if (it == names_.end()) return fail(errc::not_found, "client " + self_ + " does not serve '" + std::string{method} + "'");
    return it->second;
  }
  /// Counts one more call (or stream) of `entry`, or answers `overloaded`
  /// when it runs max_concurrent already. Each admit() that succeeds is
  /// matched by one release().
  result<void> admit(name_entry& entry) {
    SLUICE_ASSERT(entry.in_flight <= entry.limits.max_concurrent);
    if (entry.in_flight >= entry.limits.max_concurrent) {
      return fail(errc::overloaded, "'" + entry.name + "' runs " + std::to_string(entry.limits.max_concurrent) +
                                        " calls at once already (its max_concurrent); retry later");
    }
    ++entry.in_flight;
    return {};
  }
  /// An admitted call was answered (or its stream retired).
  void release(name_entry& entry) {
    SLUICE_ASSERT(entry.in_flight > 0);
    --entry.in_flight;
  }

  // --- calls a cancel reaches -------------------------------------------------------

  /// Remembers the call with `request` id so that a cancel of it reaches
  /// `call`; `overloaded` beyond calls_max.
  result<void> track(std::uint64_t request, Call call) {
    if (!calls_.contains(request) && calls_.size() >= calls_max) {
      return fail(errc::overloaded, "this client has " + std::to_string(calls_max) + " calls in progress already");
    }
    calls_.insert_or_assign(request, std::move(call));
    return {};
  }
  /// The call a cancel of `request` reaches, or null (it finished, or was
  /// never tracked).
  Call* tracked(std::uint64_t request) {
    auto it = calls_.find(request);
    return it == calls_.end() ? nullptr : &it->second;
  }
  /// The call with `request` id finished: a cancel no longer reaches it.
  void untrack(std::uint64_t request) { calls_.erase(request); }
  std::size_t calls() const noexcept { return calls_.size(); }

  // --- streams ----------------------------------------------------------------------

  /// A new stream's id, `stream` kept under it until close_stream();
  /// `overloaded` beyond streams_max. Past `deadline` it is due
  /// (streams_due): whoever drives the table expires it then, so that a
  /// stream whose caller went away without a word still ends.
  result<std::int64_t> open_stream(Stream stream, stream_time deadline) {
    if (streams_.size() >= streams_max) {
      return fail(errc::overloaded, "this client serves " + std::to_string(streams_max) + " open streams already");
    }
    auto id = next_stream_++;
    SLUICE_ASSERT(id > 0);
    auto [it, inserted] = streams_.emplace(id, open{std::move(stream), deadline});
    SLUICE_ASSERT(inserted);
    auto [at, fresh] = deadlines_.emplace(deadline, id);
    SLUICE_ASSERT(fresh);
    SLUICE_ASSERT(deadlines_.size() == streams_.size());
    return id;
  }
  Stream* stream(std::int64_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : &it->second.stream;
  }
  void close_stream(std::int64_t id) {
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    auto erased = deadlines_.erase({it->second.deadline, id});
    SLUICE_ASSERT(erased == 1);
    streams_.erase(it);
    SLUICE_ASSERT(deadlines_.size() == streams_.size());
  }
  /// The open streams whose deadline is `now` or earlier, earliest first
  /// (they stay open until closed: expiring them is the caller's).
  std::vector<std::int64_t> streams_due(stream_time now) const {
    std::vector<std::int64_t> due;
    for (auto it = deadlines_.begin(); it != deadlines_.end() && it->first <= now; ++it) due.push_back(it->second);
    return due;
  }
  /// The earliest deadline of an open stream.
  std::optional<stream_time> next_stream_deadline() const {
    if (deadlines_.empty()) return std::nullopt;
    return deadlines_.begin()->first;
  }
  /// Every open stream (to stop them all when the link breaks).
  template <class Fn>
  void each_stream(Fn&& fn) {
    for (auto& [id, s] : streams_) fn(id, s.stream);
  }
  std::size_t streams() const noexcept { return streams_.size(); }

 private:
  std::string self_;
  std::map<std::string, name_ref, std::less<>> names_;
  absl::flat_hash_map<std::uint64_t, Call> calls_;
  struct open {
    Stream stream;
    stream_time deadline;
  };
  std::map<std::int64_t, open> streams_;
  std::set<std::pair<stream_time, std::int64_t>> deadlines_;  // of the open streams
  std::int64_t next_stream_ = 1;
};

// --- each stream: stream_server ----------------------------------------------------
//
// stream_server: the serving end of one stream of RPC results (the
// protocol is in stream_protocol.hpp): the credit the caller granted, the
// pulls waiting for their items, the items written and not pulled yet,
// the watch, and how the stream ends — finished, failed, cancelled, past
// its deadline, its link lost — and when it is retired.
//
// Plain code: the time is passed in; nothing here locks, sleeps, reads a
// clock or does I/O. Each event is a method that appends to a `work` the
// answers to give and the items to drop; the owner of a stream_server
// (the client library's writer under its mutex, the simulator's serving
// client) carries them out afterwards, outside its locks.
//
// `Item` is an encoded item (movable); `Handle` is where the answer to a
// pull, the watch or a cancel goes (movable).
//
// Bounds (asserted after every event):
//   1. window: 1 to rpc_stream_window_max, fixed at opening;
//   2. items held (written, not pulled) plus items being encoded <= window,
//      whatever pulls the caller sends: a write needs credit and room;
//   3. pulls held <= window (more are refused).
// Invariants (asserted):
//   4. every pull taken is held or answered, once;
//   5. every item given a place is being encoded, held, delivered,
//      dropped or failed to encode, exactly one of them;
//   6. a retired stream holds nothing, and nothing it held is answered
//      after it retired (a call that arrives later gets the end or the
//      stream's error at once).

/// One answer to give: `item` with kind item, `err` with kind error.
template <class Item, class Handle>
struct stream_answer {
  Handle to;
  stream_answer_kind kind = stream_answer_kind::done;
  std::optional<Item> item;
  std::optional<error> err;
};

/// What one event of a stream_server asks its owner to carry out.
template <class Item, class Handle>
struct stream_server_work {
  std::vector<stream_answer<Item, Handle>> answers;
  /// Items nobody will read: their buffers go back.
  std::vector<Item> dropped;
  /// The stream stopped (cancelled, past its deadline, its link lost):
  /// its writer is to be woken and its request marked cancelled.
  bool stopped = false;
  /// The stream is over here: its owner forgets it.
  bool retired = false;
};

struct stream_server_options {
  /// The stream's name, for messages.
  std::string method;
  /// REQUIRES: 1 to rpc_stream_window_max (window_for() makes one).
  std::int64_t window = 16;
  stream_time deadline{};
  /// A planted bug, for the simulator's tests of its own checks only: a
  /// pull that comes before the writer reached its item (its credit raced
  /// the writer) is answered at once with the item delivered last — an
  /// item delivered twice. Only for copyable items.
  bool plant_repeat_after_credit_race = false;
};

template <class Item, class Handle>
class stream_server {
 public:
  using work = stream_server_work<Item, Handle>;

  /// The window an opening call's `asked` value gives (clamped to the bound).
  static std::int64_t window_for(std::int64_t asked) noexcept {
    return std::clamp<std::int64_t>(asked, 1, rpc_stream_window_max);
  }

  explicit stream_server(stream_server_options options)
      : method_(std::move(options.method)),
        window_(options.window),
        deadline_(options.deadline),
        plant_repeat_(options.plant_repeat_after_credit_race),
        granted_(options.window) {
    SLUICE_ASSERT(window_ >= 1);
    SLUICE_ASSERT(window_ <= std::int64_t{rpc_stream_window_max});
    SLUICE_ASSERT(!plant_repeat_ || std::is_copy_constructible_v<Item>);
  }

  // --- the caller's calls ---------------------------------------------------

  /// Pull `seq`: credit for items up to it, answered with item `seq`, the
  /// end or the stream's error. Refused (invalid_argument) when `seq` is
  /// negative, pulled already, or past the pulls a window allows held.
  void pull(std::int64_t seq, Handle to, work& out) {
    if (retired_) return answer_late(std::move(to), out);
    auto held = static_cast<std::int64_t>(pulls_.size());
    if (seq < 0 || held >= window_ || pulls_.contains(seq)) {
      return refuse(std::move(to), error{errc::invalid_argument, "a bad pull of a stream"}, out);
    }
    granted_ = std::max(granted_, seq + 1);
    ++pulls_taken_;
    if (plant_repeat_ && seq >= reserved_ && repeat_planted(to, out)) return;
    pulls_.emplace(seq, std::move(to));
    settle(out);
  }

  /// The watch: held for the stream's life, answered when it ends. A
  /// second watch replaces the first, which is refused.
  void watch(Handle to, work& out) {
    if (retired_) return answer_late(std::move(to), out);
    if (watch_) refuse(std::move(*watch_), error{errc::invalid_argument, "watched twice"}, out);
    watch_.emplace(std::move(to));
    check();
  }

  /// The caller's cancel: stops the stream, then answers the cancel.
  void cancel(Handle to, stream_time now, work& out) {
    stop(now >= deadline_ ? past_deadline()
                          : error{errc::cancelled, "the caller cancelled the stream '" + method_ + "'"},
         out);
    out.answers.push_back({std::move(to), stream_answer_kind::done, std::nullopt, std::nullopt});
  }

  /// A watch or pull of the stream was cancelled on the way: the caller
  /// cancelled, went away (its owner cancels what it had open), or its
  /// deadline passed (its calls outlast the deadline, so a cancel before
  /// it is the caller's).
  void call_cancelled(stream_time now, work& out) {
    stop(now >= deadline_ ? past_deadline()
                          : error{errc::cancelled, "the caller of the stream '" + method_ +
                                                        "' cancelled it or went away"},
         out);
  }

  // --- the serving end --------------------------------------------------------

  /// The serving end cannot go on (its link broke, it closes): stops the
  /// stream with `why`.
  void lost(error why, work& out) { stop(std::move(why), out); }

  /// Stops the stream with timeout once `now` reached its deadline.
  void expire(stream_time now, work& out) {
    if (!stopped_ && !retired_ && now >= deadline_) stop(past_deadline(), out);
  }

  // --- the writer -------------------------------------------------------------

  /// A place for one more item: its number; nothing while there is no
  /// credit or no room (the writer waits, or gives up); an error when the
  /// stream cannot take items any more (stopped, past its deadline, ended).
  result<std::optional<std::int64_t>> reserve(stream_time now, work& out) {
    expire(now, out);
    if (stopped_) return *stopped_;
    if (end_at_) return error{errc::invalid_argument, "the stream '" + method_ + "' was ended already"};
    SLUICE_ASSERT(!retired_);
    if (reserved_ >= granted_ || held_and_encoding() >= window_) return std::optional<std::int64_t>{};
    ++encoding_;
    auto seq = reserved_++;
    check();
    return std::optional<std::int64_t>{seq};
  }

  /// Item `seq` (reserved) is encoded: held until its pull, or answered at
  /// once. An error when the stream stopped or ended meanwhile (the item
  /// is dropped).
  result<void> ready(std::int64_t seq, Item item, work& out) {
    SLUICE_ASSERT(encoding_ > 0);
    SLUICE_ASSERT(seq >= 0 && seq < reserved_ && !items_.contains(seq));
    --encoding_;
    std::optional<error> refused;
    if (stopped_) {
      refused = *stopped_;
    } else if (retired_ || (end_at_ && seq >= *end_at_)) {
      refused = error{errc::invalid_argument, "the stream '" + method_ + "' was ended already"};
    }
    if (refused) {
      ++dropped_;
      out.dropped.push_back(std::move(item));
      settle(out);
      return *refused;
    }
    items_.emplace(seq, std::move(item));
    settle(out);
    return {};
  }

  /// Item `seq` (reserved) could not be encoded: the stream cannot go on
  /// past a hole, so it ends there with `why`.
  void unencodable(std::int64_t seq, const error& why, work& out) {
    SLUICE_ASSERT(encoding_ > 0);
    SLUICE_ASSERT(seq >= 0 && seq < reserved_);
    --encoding_;
    ++failed_;
    if (!stopped_ && !retired_ && (!end_at_ || (*end_at_ > seq && !end_delivered_))) {
      end_at_ = seq;
      end_error_ = error{why.code(), "an item could not be sent: " + why.message()};
    }
    settle(out);
  }

  /// Ends the stream after the items given a place so far.
  void finish(work& out) { end(std::nullopt, out); }
  /// The same, with `err` after them.
  void fail(error err, work& out) { end(std::move(err), out); }

  // --- what the writer asks -----------------------------------------------------

  /// Items reserve() would give a place now.
  std::uint32_t credit() const noexcept {
    if (stopped_ || end_at_ || retired_) return 0;
    auto room = window_ - held_and_encoding();
    return static_cast<std::uint32_t>(std::max<std::int64_t>(0, std::min(granted_ - reserved_, room)));
  }
  /// Cancelled, its link lost, or past its deadline.
  bool cancelled(stream_time now) const noexcept { return stopped_.has_value() || now >= deadline_; }
  bool retired() const noexcept { return retired_; }
  bool stopped() const noexcept { return stopped_.has_value(); }
  std::size_t items_held() const noexcept { return items_.size(); }
  std::size_t pulls_held() const noexcept { return pulls_.size(); }
  std::int64_t window() const noexcept { return window_; }
  stream_time deadline() const noexcept { return deadline_; }
  const std::string& method() const noexcept { return method_; }

 private:
  std::int64_t held_and_encoding() const noexcept { return static_cast<std::int64_t>(items_.size()) + encoding_; }

  error past_deadline() const {
    return error{errc::timeout, "the deadline of the stream '" + method_ + "' passed"};
  }
  error named(const error& err) const { return error{err.code(), "'" + method_ + "': " + err.message()}; }

  /// Answers a call that is not held (a bad one, a replaced watch).
  void refuse(Handle to, error why, work& out) {
    out.answers.push_back({std::move(to), stream_answer_kind::error, std::nullopt, std::move(why)});
  }
  /// Answers a call that came after the stream retired: its stop, or the end.
  void answer_late(Handle to, work& out) {
    SLUICE_ASSERT(retired_);
    if (stopped_) return refuse(std::move(to), *stopped_, out);
    out.answers.push_back({std::move(to), stream_answer_kind::end, std::nullopt, std::nullopt});
  }
  /// Answers a held pull or the watch. REQUIRES: not retired.
  void give(Handle to, stream_answer_kind kind, std::optional<Item> item, std::optional<error> err, work& out) {
    SLUICE_ASSERT(!retired_);
    SLUICE_ASSERT((kind == stream_answer_kind::item) == item.has_value());
    out.answers.push_back({std::move(to), kind, std::move(item), std::move(err)});
  }

  void end(std::optional<error> err, work& out) {
    if (stopped_ || end_at_ || retired_) return;
    end_at_ = reserved_;
    end_error_ = std::move(err);
    settle(out);
  }

  void stop(error why, work& out) {
    if (stopped_ || retired_) return;
    stopped_ = std::move(why);
    out.stopped = true;
    settle(out);
  }

  /// Answers the held pulls that can be answered, and retires the stream
  /// when it is over.
  void settle(work& out) {
    for (auto it = pulls_.begin(); it != pulls_.end();) {
      if (!answer_pull(it->first, it->second, out)) {
        ++it;
        continue;
      }
      ++pulls_answered_;
      it = pulls_.erase(it);
    }
    retire_if_over(out);
    check();
  }

  /// Answers held pull `seq` if it can be answered now.
  bool answer_pull(std::int64_t seq, Handle& to, work& out) {
    if (auto item = items_.find(seq); item != items_.end() && !stopped_) {
      if constexpr (std::is_copy_constructible_v<Item>) {
        if (plant_repeat_) last_delivered_.emplace(item->second);
      }
      give(std::move(to), stream_answer_kind::item, std::move(item->second), std::nullopt, out);
      items_.erase(item);
      ++delivered_;
      return true;
    }
    if (stopped_) {
      give(std::move(to), stream_answer_kind::error, std::nullopt, *stopped_, out);
      return true;
    }
    if (!end_at_ || seq < *end_at_) return false;
    if (end_error_) {
      give(std::move(to), stream_answer_kind::error, std::nullopt, named(*end_error_), out);
    } else {
      give(std::move(to), stream_answer_kind::end, std::nullopt, std::nullopt, out);
    }
    if (seq == *end_at_) end_delivered_ = true;
    return true;
  }

  /// Over: stopped, or its end was delivered with no item still being
  /// encoded (a writer that raced finish() still gets its item read).
  void retire_if_over(work& out) {
    if (retired_ || !(stopped_ || (end_at_ && end_delivered_ && encoding_ == 0))) return;
    // Pulls left (asked twice, or past an end) and the watch end with it.
    auto kind = stopped_ ? stream_answer_kind::error : stream_answer_kind::end;
    for (auto& [seq, to] : pulls_) {
      give(std::move(to), kind, std::nullopt, stopped_, out);
      ++pulls_answered_;
    }
    pulls_.clear();
    if (watch_) give(std::move(*watch_), kind, std::nullopt, stopped_, out);
    watch_.reset();
    for (auto& [seq, item] : items_) out.dropped.push_back(std::move(item));
    dropped_ += static_cast<std::int64_t>(items_.size());
    items_.clear();
    last_delivered_.reset();
    retired_ = true;
    out.retired = true;
  }

  /// The planted bug (stream_server_options): true when it answered `to`.
  bool repeat_planted(Handle& to, work& out) {
    if constexpr (std::is_copy_constructible_v<Item>) {
      if (!last_delivered_ || stopped_ || end_at_) return false;
      ++pulls_answered_;
      give(std::move(to), stream_answer_kind::item, *last_delivered_, std::nullopt, out);
      check();
      return true;
    } else {
      (void)to;
      (void)out;
      return false;
    }
  }

  void check() const {
    SLUICE_ASSERT(held_and_encoding() <= window_);
    SLUICE_ASSERT(static_cast<std::int64_t>(pulls_.size()) <= window_);
    SLUICE_ASSERT(pulls_taken_ == pulls_answered_ + pulls_.size());
    SLUICE_ASSERT(reserved_ == encoding_ + static_cast<std::int64_t>(items_.size()) + delivered_ + dropped_ + failed_);
    SLUICE_ASSERT(!retired_ || (pulls_.empty() && items_.empty() && !watch_));
  }

  std::string method_;
  std::int64_t window_;
  stream_time deadline_;
  bool plant_repeat_;
  /// One past the last item the caller granted credit for.
  std::int64_t granted_;
  /// Items given a place (numbered from 0), and those still being encoded.
  std::int64_t reserved_ = 0;
  std::int64_t encoding_ = 0;
  /// finish(), fail() or a failed encoding: the items before it are the stream.
  std::optional<std::int64_t> end_at_;
  std::optional<error> end_error_;  // none: finish()
  bool end_delivered_ = false;
  /// Cancelled, past its deadline, its link lost: every pull gets this.
  std::optional<error> stopped_;
  bool retired_ = false;
  /// Pulls waiting for their item, and items waiting for their pull.
  std::map<std::int64_t, Handle> pulls_;
  std::map<std::int64_t, Item> items_;
  std::optional<Handle> watch_;
  // Counts for the invariants.
  std::size_t pulls_taken_ = 0;
  std::size_t pulls_answered_ = 0;
  std::int64_t delivered_ = 0;
  std::int64_t dropped_ = 0;
  std::int64_t failed_ = 0;
  /// Only with the planted bug.
  std::optional<Item> last_delivered_;
};

}  // namespace sluice
