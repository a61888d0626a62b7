// stream_caller: the calling end of one stream of RPC results (the
// protocol is in stream_protocol.hpp): `window` pulls kept ahead of what
// was consumed, the answers that arrived (in any order) waiting by item,
// next() taking them in order, and how the stream ends here — its end,
// an error, the deadline, a cancel — and whom that must be told.
//
// Plain code: the time is passed in; nothing here locks, sleeps, reads a
// clock or does I/O. Each event appends to a `stream_caller_work` the
// calls to send and what to cancel; the owner of a stream_caller (the
// client library's rpc_stream under its mutex, the simulator's caller)
// sends them afterwards, outside its locks. The owner tracks its calls in
// flight itself (they are its resources); this says when to cancel them.
//
// `Item` is what a pull's answer carries (movable).
//
// Bounds and invariants (asserted):
//   1. window: 1 to rpc_stream_window_max;
//   2. once open, exactly `window` pulls are asked beyond what was
//      consumed (pull k + window goes out when item k is consumed);
//   3. answers wait only for pulls that were sent and not consumed, one
//      each: at most `window` of them;
//   4. a stream that is over holds nothing, and next() repeats how it ended.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sluice/error.hpp>
#include <sluice/result.hpp>

#include "actors/client/stream_protocol.hpp"
#include "runtime/assert.hpp"

namespace sluice {

/// What one event of a stream_caller asks its owner to do.
struct stream_caller_work {
  /// Send the watch.
  bool watch = false;
  /// Send these pulls.
  std::vector<std::int64_t> pulls;
  /// The stream is over here and its calls in flight will not be read:
  /// cancel them.
  bool cancel_calls = false;
  /// Tell the serving end (a cancel call): the stream ended on this side.
  bool tell_server = false;
};

struct stream_caller_options {
  /// The stream's name, for messages.
  std::string method;
  /// 1 to rpc_stream_window_max (anything else: the stream fails at once,
  /// invalid_argument).
  std::int64_t window = 16;
  stream_time deadline{};
};

template <class Item>
class stream_caller {
 public:
  /// An answer as next() gives it: an item, the end (nothing), or an error.
  using outcome = result<std::optional<Item>>;

  explicit stream_caller(stream_caller_options options)
      : method_(std::move(options.method)), window_(options.window), deadline_(options.deadline) {
    if (window_ < 1 || window_ > std::int64_t{rpc_stream_window_max}) {
      broken_ = error{errc::invalid_argument,
                      "a stream's window must be from 1 to " + std::to_string(rpc_stream_window_max)};
      window_ = 1;
    }
  }

  /// The opening call was answered with the stream's id: send the watch
  /// and the first `window` pulls (or, when the stream ended here first,
  /// tell the serving end).
  void opened(std::int64_t id, stream_caller_work& out) {
    SLUICE_ASSERT(id_ == 0);
    SLUICE_ASSERT(id != 0);
    id_ = id;
    if (over_) {
      out.tell_server = true;
      return;
    }
    out.watch = true;
    for (std::int64_t seq = 0; seq < window_; ++seq) out.pulls.push_back(seq);
    next_pull_ = window_;
    check();
  }

  /// The stream could not be opened (or its watch failed): next() ends it
  /// with `why` once the items that arrived were read.
  void broke(error why) {
    if (over_ || broken_) return;
    broken_ = std::move(why);
  }

  /// Pull `seq` was answered. REQUIRES: `seq` was sent (opened(), next())
  /// and this is its only answer.
  void pull_answered(std::int64_t seq, outcome answer) {
    if (over_) return;  // dropped: nobody reads the stream any more
    SLUICE_ASSERT(seq >= consumed_ && seq < next_pull_);
    auto [it, fresh] = arrived_.emplace(seq, std::move(answer));
    SLUICE_ASSERT(fresh);
    check();
  }

  /// The next item in order, the end, or the error that ended the stream;
  /// nothing while the next answer has not arrived (wait for one, or for
  /// the deadline). The deadline ends the stream even with items unread.
  std::optional<outcome> next(stream_time now, stream_caller_work& out) {
    if (over_) return final_outcome();
    if (now >= deadline_) {
      auto why = error{errc::timeout, "the deadline of the stream '" + method_ + "' passed"};
      close(why, ended_by::caller, out);
      return outcome{std::move(why)};
    }
    auto it = arrived_.find(consumed_);
    if (it == arrived_.end()) {
      if (!broken_) return std::nullopt;
      auto why = *broken_;
      close(why, by_code(why), out);
      return outcome{std::move(why)};
    }
    auto answer = std::move(it->second);
    arrived_.erase(it);
    // A pull that failed after the watch broke (the serving end went
    // away, then the pull found no instance) ends the stream with the
    // cause, which its watch told.
    if (!answer && broken_) answer = *broken_;
    if (!answer) {
      // An error of the handler's: the serving end ended the stream. A
      // timeout or a loss on the way: it may not know.
      close(answer.error(), by_code(answer.error()), out);
    } else if (!*answer) {
      close(std::nullopt, ended_by::server, out);
    } else {
      consumed_ += 1;
      out.pulls.push_back(next_pull_++);  // the credit for one more item
      check();
    }
    return answer;
  }

  /// Gives the stream up (next() answers cancelled from now on).
  void cancel(stream_caller_work& out) {
    if (over_) return;
    close(error{errc::cancelled, "the stream was cancelled"}, ended_by::caller, out);
  }

  /// False when the stream failed before it could open (a bad window).
  bool can_open() const noexcept { return !broken_ && !over_ && id_ == 0; }
  /// Whether next() would answer without waiting.
  bool ready(stream_time now) const noexcept {
    return over_ || now >= deadline_ || broken_.has_value() || arrived_.contains(consumed_);
  }
  bool over() const noexcept { return over_; }
  std::int64_t id() const noexcept { return id_; }
  std::int64_t window() const noexcept { return window_; }
  std::int64_t consumed() const noexcept { return consumed_; }
  std::size_t arrived() const noexcept { return arrived_.size(); }
  stream_time deadline() const noexcept { return deadline_; }
  const std::string& method() const noexcept { return method_; }

 private:
  /// Who ended the stream, as far as its serving end is concerned.
  enum class ended_by {
    /// It did (the end, the handler's error): it answers what is in flight.
    server,
    /// It is gone (its process, an owner on the way): nothing to tell it.
    loss,
    /// This side (cancel, the deadline): it is told, and what is in flight
    /// is cancelled.
    caller,
  };

  static ended_by by_code(const error& err) noexcept {
    return err.code() == errc::timeout ? ended_by::caller : ended_by::loss;
  }

  void close(std::optional<error> err, ended_by by, stream_caller_work& out) {
    SLUICE_ASSERT(!over_);
    over_ = true;
    final_error_ = std::move(err);
    arrived_.clear();
    if (by == ended_by::server) return;
    out.cancel_calls = true;
    if (by == ended_by::caller && id_ != 0) out.tell_server = true;
    check();
  }

  outcome final_outcome() const {
    SLUICE_ASSERT(arrived_.empty());
    if (final_error_) return *final_error_;
    return std::optional<Item>{};
  }

  void check() const {
    SLUICE_ASSERT(arrived_.size() <= static_cast<std::size_t>(window_));
    SLUICE_ASSERT(over_ || id_ == 0 || next_pull_ - consumed_ == window_);
    SLUICE_ASSERT(!over_ || arrived_.empty());
  }

  std::string method_;
  std::int64_t window_;
  stream_time deadline_;
  std::int64_t id_ = 0;  // 0 until opened
  std::int64_t consumed_ = 0;
  std::int64_t next_pull_ = 0;
  /// Answers of pulls by item.
  std::map<std::int64_t, outcome> arrived_;
  /// Why the stream broke outside of a pull (opening it, its watch).
  std::optional<error> broken_;
  bool over_ = false;
  std::optional<error> final_error_;  // over with an error: next() repeats it
};

}  // namespace sluice
