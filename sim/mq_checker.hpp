// mq_checker: the reference model the MQ workload is judged against
// (docs/mq.md, "The delivery contract"). It keeps every payload the
// producers wrote, every produce the master acknowledged, every delivery a
// poll returned and every ack the master confirmed, and judges:
//
//  (a) every acknowledged produce is delivered to every group that existed
//      (its first join answered) before the produce began — by the end of
//      the run, once the faults healed and the members drained the topics
//      (except in a topic that drops its oldest messages when full, which
//      instead must never refuse a produce for being full);
//  (b) the first deliveries (delivery count 1) one member receives from
//      one partition under one generation come in increasing offsets;
//  (c) a delivery names a payload some producer wrote for that topic, of
//      its size; at an offset the master acknowledged a produce at, the
//      message of that produce; and a payload read back holds exactly the
//      bytes its producer wrote;
//  (d) an offset whose ack the master confirmed is not delivered to that
//      group again by a poll sent after the confirmation (the partition
//      the workload seeks in is exempt from (b) and (d) once a seek went
//      out; there such deliveries count as replays);
//  (e) memory stays bounded: no partition holds more shells or bytes than
//      its topic's bounds; the payloads the master holds under `~mq/` are
//      never more than those bounds allow plus what was written lately
//      (in flight, or orphaned and not yet past the grace); and once every
//      group consumed everything, none is left.
//
// What the contract does not promise is never reported:
//  - a master whose disk was wiped forgets topics, offsets and groups:
//    places are kept per *lineage* (the count of wipes), and a produce or
//    a group from an earlier lineage owes nothing in a later one;
//  - a master that crashed, or reloaded its durable state, forgets acks
//    above a group's committed offset and what was in flight: (b) and (d)
//    compare only what one *epoch* (world::master_epoch) of the master
//    saw, from the ack's sending to the poll's answer;
//  - a poll that was waiting at the master when an ack completed may
//    still return the acked offset (it was sent before the ack ended);
//  - a payload that cannot be read (its holders crashed) is counted, not
//    reported: the contract hands such a message with an error.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/memory/buffer.hpp"
#include "runtime/wire/messages.hpp"
#include "sim/checker.hpp"
#include "sim/time.hpp"

namespace sluice::sim {

/// One message as its producer means it. Its size and bytes follow from it.
struct mq_message_id {
  std::uint64_t producer = 0;
  std::uint64_t id = 0;
  friend auto operator<=>(const mq_message_id&, const mq_message_id&) = default;
};

/// The size of `m`'s payload: 16 to about 16 KiB, drawn from `m`.
std::size_t mq_payload_size(mq_message_id m);
/// `m`'s payload: its producer and id, then bytes worked out from them.
shared_bytes mq_payload(mq_message_id m);
/// Empty when `bytes` are exactly mq_payload(m); else what differs.
std::string mq_payload_mismatch(mq_message_id m, std::span<const std::byte> bytes);

/// What the master's state was when a request went out and came back.
struct mq_epochs {
  std::uint64_t lineage_sent = 0, lineage_answered = 0;
  std::uint64_t epoch_sent = 0, epoch_answered = 0;
};

/// One poll as its member made it.
struct mq_poll_record {
  std::string group;
  std::uint64_t session = 0;  ///< the member (its client's node id)
  sim_time sent{};
  mq_epochs epochs;
};

class mq_checker {
 public:
  /// Violations go to `c`. REQUIRES: `c` outlives the checker.
  explicit mq_checker(checker& c) : checker_(c) {}

  // --- what happened -------------------------------------------------------

  /// A producer began writing payload `key` of `m` for `topic`.
  void payload_written(const std::string& key, const std::string& topic, mq_message_id m);
  /// The master acknowledged a produce of `m` begun at `started`.
  void produce_acked(const std::string& topic, mq_message_id m, const wire::mq_produced_one& r, sim_time started,
                     const mq_epochs& e);
  /// The master answered a join of `group`.
  void group_joined(const std::string& group, std::uint64_t lineage, sim_time at);
  /// Judges one delivery of `poll`; returns the message, when known, so
  /// that its payload can be read and judged.
  std::optional<mq_message_id> delivered(const mq_poll_record& poll, const wire::mq_delivery& d);
  /// A read of the payload of `m` came back.
  void payload_read(const std::string& key, mq_message_id m, const result<shared_bytes>& bytes);
  /// The master confirmed an ack of `offset`, sent at epoch `epoch_sent`.
  void ack_completed(const std::string& group, std::uint64_t lineage, const wire::mq_partition_ref& p,
                     std::uint64_t offset, sim_time completed, std::uint64_t epoch_sent);
  void nacked() { stats_.nacked += 1; }
  void acked_upto() { stats_.acked_upto += 1; }
  /// A seek of `group` on partition 0 of `topic` went out in lineage
  /// `lineage`: from now on what it acked there may come again, first
  /// deliveries may go back, and (b) and (d) skip that partition.
  void seek_sent(const std::string& group, std::uint64_t lineage, const std::string& topic) {
    seeked_.insert({lineage, group, topic});
  }
  void seeked() { stats_.seeks += 1; }
  /// Messages of `topic` may be dropped before any group read them (its
  /// full policy is drop_oldest): (a) does not hold there.
  void topic_drops_oldest(const std::string& topic) { drops_oldest_.insert(topic); }
  /// The master refused a produce to `topic` with `code`: a topic that
  /// drops its oldest messages never refuses one for being full.
  void produce_refused(const std::string& topic, errc code, const std::string& why);
  /// A listing of the topics: every partition within its topic's bounds.
  void topics_listed(const wire::mq_topics& listed, sim_time at);

  // --- verdict -------------------------------------------------------------

  /// (a): after the drain, in master lineage `lineage` (the last one).
  void check_delivered(std::uint64_t lineage);

  /// The master counted `payloads` objects under `~mq/` (for the peak).
  void payloads_counted(std::uint64_t payloads);
  /// (e) at the end, with nothing produced or consumed any more and the
  /// master's orphan grace passed: the master holds no more payloads under
  /// `~mq/` than the topics hold shells (`shells`), each naming one.
  /// Either missing: the master did not answer the count.
  /// `some` names a few of the payloads, for the report.
  void check_freed(std::optional<std::uint64_t> payloads, std::optional<std::uint64_t> shells,
                   const std::vector<std::string>& some);

  struct counts {
    std::uint64_t produced = 0;     ///< produces acknowledged (not duplicates)
    std::uint64_t duplicates = 0;   ///< produces answered as duplicates of an earlier append
    std::uint64_t delivered = 0;    ///< deliveries polls returned
    std::uint64_t redelivered = 0;  ///< of them, with a delivery count above 1
    std::uint64_t acked = 0;        ///< acks the master confirmed
    std::uint64_t nacked = 0;
    std::uint64_t acked_upto = 0;  ///< ack_upto calls the master confirmed
    std::uint64_t refused_full = 0;  ///< produces refused overloaded (a full topic)
    std::uint64_t seeks = 0;         ///< seeks the master confirmed
    std::uint64_t replayed = 0;      ///< deliveries of offsets the group had acked, after a seek
    std::uint64_t payloads_read = 0, payloads_unreadable = 0;
    std::uint64_t listings = 0;
    std::uint64_t payloads_peak = 0;  ///< the most payloads the master held at a count
  };
  const counts& stats() const noexcept { return stats_; }

 private:
  /// A partition's offset in one lineage of the master.
  using place = std::tuple<std::uint64_t, std::string, std::uint32_t, std::uint64_t>;
  /// The same, in one group.
  using group_place = std::tuple<std::uint64_t, std::string, std::string, std::uint32_t, std::uint64_t>;
  /// (epoch, group, session, topic, partition, generation): one member's
  /// hold of a partition, as one epoch of the master saw it.
  using hold = std::tuple<std::uint64_t, std::string, std::uint64_t, std::string, std::uint32_t, std::uint64_t>;

  struct payload_record {
    std::string topic;
    mq_message_id message;
  };
  struct acked_produce {
    std::string topic;
    mq_message_id message;
    std::uint32_t partition = 0;
    std::uint64_t offset = 0;
    std::uint64_t lineage = 0;
    sim_time started{};
  };
  struct ack_record {
    sim_time completed{};
    std::uint64_t epoch_sent = 0;
  };

  void report(std::string text);

  checker& checker_;
  std::map<std::string, payload_record> payloads_;
  std::set<std::string> drops_oldest_;
  std::set<std::tuple<std::uint64_t, std::string, std::string>> seeked_;
  std::map<place, mq_message_id> at_place_;
  std::vector<acked_produce> acked_produces_;
  std::map<std::pair<std::uint64_t, std::string>, sim_time> group_since_;
  std::set<group_place> delivered_;
  std::map<group_place, ack_record> acks_;
  std::map<hold, std::uint64_t> last_first_delivery_;
  counts stats_;
  std::uint64_t reported_ = 0;
};

}  // namespace sluice::sim
