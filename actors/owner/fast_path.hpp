// The owner's fast path: requests of local clients answered without the
// owner actor and without the master — on the shm poller's thread in a
// real owner, at delivery in the simulator.
//
// Gets: a get of a key whose newest version this owner holds. It stays
// correct (linearizable) by a small protocol:
//  - the owner actor publishes a key into the fast index only when its
//    commit made this owner's version the key's current one, and takes
//    the key out before it commits or removes the key itself;
//  - the master, before another owner's version of the key becomes
//    current (or the key is removed through another owner), has this
//    owner take the key out (invalidate) and waits for the answer;
//  - the index answers only while the owner holds a fresh lease from the
//    master (a heartbeat answered within the lease, counted from when the
//    heartbeat was sent), so an owner cut off from the master stops
//    answering before the master could decide without it.
//
// Puts: a plain put (no condition, time to live, extra copies or other
// owner asked for) of a key in a slot the master handed this owner (see
// actors/master/homes.hpp). The fast path commits it itself: a version
// from the owner's block, the bytes into the store, the key into the
// index; then it answers, and keeps the commit as a numbered report the
// owner actor sends the master (owner_commits). Every other message the
// owner sends names the last report sent before it, and the master acts
// on it only once it applied that far, so nothing the owner asks can
// overtake its own commits.
//
// Plain code with no I/O of its own, so the simulator runs it too.
#pragma once

#include <atomic>
#include <bitset>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "actors/common/replay_window.hpp"
#include "actors/owner/object_store.hpp"
#include "runtime/keys.hpp"
#include "runtime/memory/buffer.hpp"
#include "runtime/node_id.hpp"
#include "runtime/wire/frame.hpp"
#include "runtime/wire/messages.hpp"
#include "transports/transport.hpp"

namespace sluice {

/// What the owner publishes for its fast path. Thread-safe: the owner
/// actor writes it, the shm poller reads it (and commits puts into it).
///
/// Invariants (asserted):
///   1. the reports not acknowledged are numbered one after the other:
///      reports_ holds first_unacknowledged() .. next_seq_ - 1, in order;
///   2. unsent_from_ never passes the end of reports_, and sent_through_
///      only grows and stays below next_seq_ (no report is sent before it
///      exists);
///   3. block_next_ never passes block_end_; a version the fast path
///      commits comes from the block, is never 0 and is above every
///      version of its key held here;
///   4. change tokens are never 0 (each begin_change takes a new one).
class fast_index {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  struct entry {
    std::uint64_t version = 0;
    shared_bytes bytes;
    /// Not served from the index from then on (the value's TTL).
    time_point expires = time_point::max();
    /// Read through the index since take_touched() last looked: reads
    /// answered here never reach the owner actor, whose eviction policy
    /// learns of them this way.
    bool touched = false;
  };

  /// A put the fast path committed, until the master acknowledged it.
  struct report {
    std::uint64_t seq = 0;
    wire::owner_commit commit;
  };

  /// Makes `version` of `key` servable, unless a newer one is.
  void publish(const std::string& key, std::uint64_t version, shared_bytes bytes,
               time_point expires = time_point::max());
  void erase(const std::string& key);
  /// Erases `key` only if `version` is the one published.
  void erase_version(const std::string& key, std::uint64_t version);
  void clear();

  /// The index may answer until `until` (on the owner's clock: the actor
  /// clock, which is the steady clock in a real node); an empty time
  /// point stops it at once. The check is made at each request against
  /// the caller's clock, not by a timer that could fire late.
  void set_lease(time_point until) noexcept {
    lease_until_ns_.store(until.time_since_epoch().count(), std::memory_order_release);
  }
  bool enabled(time_point now) const noexcept {
    return now.time_since_epoch().count() < lease_until_ns_.load(std::memory_order_acquire);
  }

  /// The entry of `key`; marks it touched.
  std::optional<entry> find(std::string_view key) const;
  /// Whether `key` was read through the index since the last call; clears
  /// the mark.
  bool take_touched(const std::string& key);
  /// Whether the index holds `version` of `key` (and so a reference to
  /// its bytes).
  bool holds(const std::string& key, std::uint64_t version) const;
  std::size_t size() const;

  // --- the owner actor's changes of a key ------------------------------

  /// The owner actor starts changing `key` (a commit or a remove through
  /// the master): the key leaves the index and the fast path leaves it
  /// alone until end_change(). Returns the change's token.
  std::uint64_t begin_change(const std::string& key);
  /// The change `token` of `key` is over. When no later change of the key
  /// began meanwhile, the change's outcome may be published (`publish`,
  /// when given) and true is returned.
  bool end_change(const std::string& key, std::uint64_t token, std::optional<entry> publish = std::nullopt);

  // --- slots handed to this owner ----------------------------------------

  /// The master handed these slots (grant number `generation`) and, when
  /// `block_count` is not 0, a fresh block of versions, which replaces
  /// the one in use. Slots an invalidation numbered at or above
  /// `generation` took back stay taken.
  void grant(const std::vector<key_slot>& slots, std::uint64_t generation, std::uint64_t block_first,
             std::uint64_t block_count);
  /// Gives `slot` back (an invalidation numbered `generation`).
  void give_up(key_slot slot, std::uint64_t generation);
  /// Gives every slot back and forgets what grants were seen: the owner
  /// registers with a master again.
  void give_up_all();
  bool homed(key_slot slot) const;
  std::size_t homed_count() const;
  /// Versions left in the block in use.
  std::uint64_t versions_left() const;
  /// Values larger than this are not put by the fast path.
  void set_max_value_bytes(std::uint64_t bytes) noexcept { max_value_bytes_.store(bytes, std::memory_order_relaxed); }

  // --- reports of the fast path's commits --------------------------------

  /// Commits `value` as a new version of `key` when the fast path may
  /// (see the header comment); the version, or nothing (the put then goes
  /// to the owner actor). `notify` says reports_batch reports wait now:
  /// the owner actor is to be told to send them.
  struct put_outcome {
    std::uint64_t version = 0;
    bool notify = false;
  };
  /// Unsent reports that make try_put() ask for a notification.
  static constexpr std::size_t reports_batch = 256;
  std::optional<put_outcome> try_put(const std::string& key, const shared_bytes& value, object_store& store,
                                     time_point now);
  /// Whether the owner actor is to be told that reports wait: true once
  /// for unsent reports, until take_unsent() takes them. Whoever runs the
  /// fast path asks when it goes idle (and after each request, in the
  /// simulator), so reports never wait for more work.
  bool notify_due();
  /// Up to `max` reports not sent yet, oldest first; they count as sent.
  std::vector<report> take_unsent(std::size_t max);
  /// The master applied the reports through `seq`: they are dropped.
  void acknowledged(std::uint64_t seq);
  /// Every report not acknowledged is to be sent again.
  void resend();
  /// The highest sequence number of a report sent (0: none).
  std::uint64_t sent_through() const;
  /// The sequence number of the oldest report not acknowledged (or of the
  /// next one, when all are).
  std::uint64_t first_unacknowledged() const;
  bool unsent() const;

  // --- repeats ---------------------------------------------------------------

  /// Repeat windows one link keeps (one per sender and top bit). A link
  /// between owners carries the requests of a few senders; a client's
  /// carries its own, whatever source its frames claim, so a client that
  /// claims many cannot grow the table: past the bound the fast path
  /// leaves a new sender's requests to the owner actor, whose endpoint
  /// keys repeats by the greeted peer.
  static constexpr std::size_t windows_per_link_max = 128;
  enum class arrival {
    first,      ///< recorded: serve it
    repeat,     ///< a frame delivered twice: drop it
    untracked,  ///< a sender past windows_per_link_max: not for the fast path
  };
  /// Whether request `id` of `sender` arrives on `link` for the first
  /// time; a repeat is dropped, like the endpoint drops repeats of what
  /// it serves. Per sender, and per the top bit of the id, as the endpoint
  /// keeps them: an owner's RPC relay numbers the calls it passes on with
  /// that bit set. A sender is tracked from its first request on, or
  /// never, so each of its requests goes through the same filter.
  arrival first_time(std::uint64_t link, std::uint64_t sender, std::uint64_t id);
  /// The link went down: its window goes.
  void forget_link(std::uint64_t link);

 private:
  /// Lets find() look a string_view up without building a string.
  struct key_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view key) const noexcept { return std::hash<std::string_view>{}(key); }
  };

  mutable std::mutex mutex_;  // guards everything below but the atomics
  mutable std::unordered_map<std::string, entry, key_hash, std::equal_to<>> entries_;
  std::unordered_map<std::string, std::uint64_t> changing_;  // key → token of its latest change
  std::uint64_t next_change_ = 1;
  std::bitset<key_slots> homes_;
  std::vector<std::uint64_t> given_up_at_ = std::vector<std::uint64_t>(key_slots);
  std::uint64_t block_next_ = 0;
  std::uint64_t block_end_ = 0;
  std::deque<report> reports_;   // not acknowledged, by seq
  std::size_t unsent_from_ = 0;  // index into reports_ of the first not sent
  std::uint64_t next_seq_ = 1;
  std::uint64_t sent_through_ = 0;
  bool notified_ = false;  // the actor was told of the unsent reports
  std::map<std::tuple<std::uint64_t, std::uint64_t, bool>, replay_window> seen_;  // by link, sender, top bit
  std::atomic<std::chrono::steady_clock::rep> lease_until_ns_{0};
  std::atomic<std::uint64_t> max_value_bytes_{0};
};

/// What the fast path answered.
struct fast_answer {
  /// None: the request was a repeat, dropped.
  std::optional<wire::outbound_frame> reply;
  /// Reports of the fast path's commits wait in a batch: the owner actor
  /// must be told (commits_atom).
  bool commits_waiting = false;
};

/// Answers `frame`, a request from a client of this owner (`self`) on `link`, from
/// `index` (and `store`, for puts) when it can: a kv_get of a published
/// key, or a plain kv_put of a key in a slot handed to this owner, while
/// the index is enabled; drops repeats of requests it saw. Returns the
/// answer, or nothing: the request then goes to the owner actor as usual.
/// When it leaves a request to the owner actor, the message it decoded
/// goes to `decoded` (when not null), so the frame is not decoded again.
std::optional<fast_answer> serve_fast(fast_index& index, object_store* store, node_id self, std::uint64_t link,
                                      const wire::inbound_frame& frame, fast_index::time_point now,
                                      std::optional<wire::message>* decoded = nullptr);

/// When the owner actor is told that reports of the fast path's commits
/// wait to be sent to the master.
enum class commit_notify {
  /// When a batch of reports waits, and when the transport's thread has
  /// nothing else to do (its on_idle): reports never wait for more work,
  /// and a busy poller does not wake the actor per put.
  when_idle,
  /// After every request the fast path served: for a transport whose
  /// thread never goes idle (the simulator's).
  after_each_request,
};

struct fast_path_deps {
  node_id self;
  /// Shared with the owner actor, which publishes into it.
  std::shared_ptr<fast_index> index;
  /// The owner's values (thread-safe: the fast path reads and writes it too).
  std::shared_ptr<object_store> store;
  /// The owner actor's clock (leases are checked against it).
  std::function<fast_index::time_point()> now;
  /// Tells the owner actor that reports wait (a commits_atom). Any thread.
  std::function<void()> report_commits;
  commit_notify notify = commit_notify::when_idle;
};

/// The fast path as its transports run it: serve_fast on each frame of a
/// local client, telling the owner actor of commits as `notify` says.
struct fast_path_hooks {
  transport::fast_path_fn fast_path;
  /// For transports that go idle; empty with commit_notify::after_each_request.
  std::function<void()> on_idle;
};

/// REQUIRES: every member of `deps` is set.
fast_path_hooks make_fast_path_hooks(fast_path_deps deps);

}  // namespace sluice
