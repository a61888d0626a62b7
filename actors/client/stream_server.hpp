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
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <sluice/error.hpp>
#include <sluice/result.hpp>

#include "actors/client/stream_protocol.hpp"
#include "runtime/assert.hpp"

namespace sluice {

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
