// serve_table: the serving side of one client — the names it serves, how
// many calls each runs at once, the calls in progress that a cancel can
// reach, and the streams open here — and the decisions made on them:
// which calls are admitted, which are answered `not_found` or
// `overloaded`, what a cancel reaches, what to serve again on a new link.
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
#include <utility>
#include <vector>

#include <absl/container/flat_hash_map.h>

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

}  // namespace sluice
