// checker: the reference model a KV workload is checked against. It keeps
// every put and remove the clients made, with when they started and
// ended and what they were told, and judges every read:
//
//  - a read returns bytes some put wrote to that key, whole (never bytes
//    that were never written, never another key's, never torn);
//  - with the version that put was acknowledged with;
//  - never a value whose put was acknowledged before an acknowledged
//    remove began (acknowledged deletes stay deleted);
//  - never an older version once a newer put was acknowledged, unless the
//    master restarted in between without its storage (the directory and
//    the version counter persist; a wiped disk loses them);
//  - not_found for a key with an acknowledged put only when a remove
//    may have intervened, an owner crashed since (values live in owner
//    memory: a crash may lose them), the master lost its storage, or the
//    master took the key out since (an owner evicted it), or a put with
//    a time to live that may have overwritten it expired;
//  - a put acknowledged with two copies survives owner crashes one at a
//    time: its copy lost with one owner is made again (repair) before the
//    next crash, when the crashes are at least the recovery window apart;
//    so a crash excuses its loss only when another came within that
//    window, or when a put that may have replaced it kept one copy;
//  - never a value whose time to live ran out before the read began (it
//    counts from the commit, which comes before the acknowledgement).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "sim/time.hpp"
#include "sluice/result.hpp"

namespace sluice::sim {

/// Identifies one put: the client that made it and its sequence number.
struct put_id {
  std::uint32_t client = 0;
  std::uint64_t seq = 0;
  friend auto operator<=>(const put_id&, const put_id&) = default;
};

/// The bytes a put writes: a self-describing header (who wrote it, for
/// which key, how long, a checksum) and a body derived from the put's id.
shared_bytes make_value(const std::string& key, put_id id, std::size_t body_bytes);
/// Reads back what make_value wrote; an error says why the bytes are not
/// a whole value of `key`.
result<put_id> parse_value(const std::string& key, std::span<const std::byte> bytes);

class checker {
 public:
  enum class outcome { pending, acked, failed };

  // --- what happened -------------------------------------------------------

  /// A put of `key` began; with a time to live when `ttl` is not zero.
  void put_started(const std::string& key, put_id id, sim_time at, sim_duration ttl = sim_duration::zero(),
                   std::uint32_t copies = 1);
  void put_ended(const std::string& key, put_id id, sim_time at, const result<std::uint64_t>& r);
  std::size_t remove_started(const std::string& key, sim_time at);
  void remove_ended(const std::string& key, std::size_t index, sim_time at, const result<bool>& r);
  /// Judges a get of `key` that started at `start`.
  void get_ended(const std::string& key, sim_time start, sim_time end,
                 const result<std::pair<std::uint64_t, shared_bytes>>& r);
  void exists_ended(const std::string& key, sim_time start, sim_time end, const result<bool>& r);

  /// The master crashed; it comes back without its durable state when
  /// `storage_lost`. A crash that keeps the storage excuses nothing.
  void master_crashed(sim_time at, bool storage_lost) {
    if (storage_lost) master_crashes_.push_back(at);
  }
  void owner_crashed(sim_time at) { owner_crashes_.push_back(at); }
  /// An owner evicted one of the copies of `key`: from then on it has one
  /// fewer, and one crash may take its last.
  void copy_evicted(const std::string& key, sim_time at) { copies_evicted_[key].push_back(at); }
  /// Owner crashes closer together than this may lose a value with two
  /// copies (repair had no time to restore the first crash's copy).
  void set_recovery_window(sim_duration window) { recovery_window_ = window; }
  /// The master took `key` out on its own (its owner evicted it).
  void forgotten(const std::string& key, sim_time at) {
    forgotten_[key].push_back(at);
    stats_.forgotten += 1;
  }

  /// Keys that must read back whole at `now`: an acknowledged put with two
  /// copies wrote them, and nothing since may have removed, replaced
  /// (with one copy), expired or lost it. Ordered.
  std::vector<std::string> durable_keys(sim_time now) const;

  // --- verdict ---------------------------------------------------------------

  /// Violations found so far, each a sentence.
  const std::vector<std::string>& violations() const noexcept { return violations_; }
  void violation(std::string text) { violations_.push_back(std::move(text)); }

  struct counts {
    std::uint64_t puts_acked = 0, puts_failed = 0, gets_found = 0, gets_not_found = 0,
                  gets_failed = 0, removes = 0, exists = 0, forgotten = 0;
  };
  const counts& stats() const noexcept { return stats_; }

 private:
  struct put_record {
    sim_time start, end;
    outcome state = outcome::pending;
    std::uint64_t version = 0;
    std::optional<std::uint64_t> observed;  // a version reads saw it under
    sim_duration ttl{};                      // zero: no time to live
    std::uint32_t copies = 1;
  };
  struct remove_record {
    sim_time start, end;
    outcome state = outcome::pending;
  };
  struct history {
    std::map<put_id, put_record> puts;
    std::vector<remove_record> removes;
    // Indexes over the records above, so that a read is judged by looking
    // at the records that can matter to it rather than at every record of
    // the key (a long run makes thousands per key):
    /// Acknowledged puts by the version they were acknowledged with.
    std::multimap<std::uint64_t, put_id> acked_by_version;
    /// Acknowledged puts by when they ended.
    std::vector<std::pair<sim_time, put_id>> acked_by_end;
    /// The earliest time a put with a time to live may have expired by.
    std::optional<sim_time> earliest_expiry;
    /// removes are in the order they began (they are recorded as they
    /// begin, at the simulation's time), so searches may bisect them.
    bool removes_in_order = true;
  };

  bool crash_between(const std::vector<sim_time>& crashes, sim_time from, sim_time to) const;
  /// Two owner crashes in [from, to] less than the recovery window apart.
  bool crashes_close(sim_time from, sim_time to) const;
  /// Whether `p`'s value may be gone by `end` for a reason the workload
  /// cannot see: the master lost its storage, or the owners holding its
  /// copies crashed (see the rule for two copies above).
  bool may_be_lost(const std::string& key, const history& h, const put_record& p, sim_time end) const;
  void check_found(const std::string& key, history& h, sim_time start, sim_time end,
                   std::uint64_t version, const shared_bytes& bytes);
  void check_absent(const std::string& key, const history& h, sim_time start, sim_time end,
                    const char* what);

  std::map<std::string, history> keys_;
  std::vector<sim_time> master_crashes_;  // those that lost the master's storage
  std::vector<sim_time> owner_crashes_;
  /// Down within the heartbeat timeout (3 s), copied after the simulator's
  /// repair_after (2 s), with room for the faults in between.
  sim_duration recovery_window_ = std::chrono::seconds{15};
  std::map<std::string, std::vector<sim_time>> forgotten_;
  std::map<std::string, std::vector<sim_time>> copies_evicted_;
  std::vector<std::string> violations_;
  counts stats_;
};

}  // namespace sluice::sim
