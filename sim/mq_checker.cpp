#include "sim/mq_checker.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/assert.hpp"
#include "runtime/rng.hpp"

namespace sluice::sim {
namespace {

constexpr std::size_t payload_header_bytes = 16;
constexpr std::size_t payload_sizes[] = {payload_header_bytes, 100, 1000, 4000, 16'000};
/// Violations of one run reported at most: the rest are counted.
constexpr std::uint64_t reports_max = 50;

std::uint64_t payload_seed(mq_message_id m) { return mix_seed(m.producer * 0x9e3779b97f4a7c15ULL ^ m.id); }

/// The byte at `at` of `m`'s payload, past the header.
std::byte body_byte(std::uint64_t seed, std::size_t at) {
  return static_cast<std::byte>(mix_seed(seed + at / 8) >> (8 * (at % 8)));
}

std::string where(const std::string& group, const wire::mq_partition_ref& p, std::uint64_t offset) {
  return fmt::format("{}/{} offset {} in group '{}'", p.topic, p.partition, offset, group);
}

}  // namespace

std::size_t mq_payload_size(mq_message_id m) {
  return payload_sizes[payload_seed(m) % std::size(payload_sizes)];
}

shared_bytes mq_payload(mq_message_id m) {
  auto size = mq_payload_size(m);
  auto buf = byte_buffer::allocate(size);
  std::memcpy(buf.data(), &m.producer, 8);
  std::memcpy(buf.data() + 8, &m.id, 8);
  auto seed = payload_seed(m);
  for (std::size_t i = payload_header_bytes; i < size; ++i) buf.data()[i] = body_byte(seed, i);
  return std::move(buf).freeze();
}

std::string mq_payload_mismatch(mq_message_id m, std::span<const std::byte> bytes) {
  auto size = mq_payload_size(m);
  if (bytes.size() != size) return fmt::format("{} bytes, not {}", bytes.size(), size);
  mq_message_id named;
  std::memcpy(&named.producer, bytes.data(), 8);
  std::memcpy(&named.id, bytes.data() + 8, 8);
  if (named != m) return fmt::format("the bytes of message {} of producer {}", named.id, named.producer);
  auto seed = payload_seed(m);
  for (std::size_t i = payload_header_bytes; i < size; ++i) {
    if (bytes[i] != body_byte(seed, i)) return fmt::format("a wrong byte at {}", i);
  }
  return {};
}

void mq_checker::report(std::string text) {
  if (++reported_ <= reports_max) checker_.violation("mq: " + std::move(text));
}

void mq_checker::payload_written(const std::string& key, const std::string& topic, mq_message_id m) {
  auto inserted = payloads_.emplace(key, payload_record{topic, m}).second;
  SLUICE_ASSERT(inserted);  // the workload names every payload afresh
}

void mq_checker::payloads_counted(std::uint64_t payloads) {
  stats_.payloads_peak = std::max(stats_.payloads_peak, payloads);
}

void mq_checker::check_freed(std::optional<std::uint64_t> payloads, std::optional<std::uint64_t> shells,
                             const std::vector<std::string>& some) {
  if (!payloads || !shells) return report("memory: the master did not answer a count of the payloads after the drain");
  payloads_counted(*payloads);
  if (*payloads <= *shells) return;
  report(fmt::format("memory: {} payloads under ~mq/ are still held once nothing was produced or consumed any "
                     "more and the orphan grace passed, but the topics hold only {} shells (among them {})",
                     *payloads, *shells, fmt::join(some, ", ")));
}

void mq_checker::produce_acked(const std::string& topic, mq_message_id m, const wire::mq_produced_one& r,
                               sim_time started, const mq_epochs& e) {
  SLUICE_ASSERT(r.code == errc::ok);
  if (r.duplicate) {
    stats_.duplicates += 1;
  } else {
    stats_.produced += 1;
  }
  // A wipe while it ran: the acknowledgement may name a log that is gone.
  if (e.lineage_sent != e.lineage_answered) return;
  place at{e.lineage_answered, topic, r.partition, r.offset};
  auto [it, inserted] = at_place_.emplace(at, m);
  if (!inserted && it->second != m) {
    report(fmt::format("produces of message {} of producer {} and of message {} of producer {} were both "
                       "acknowledged at {}/{} offset {}",
                       m.id, m.producer, it->second.id, it->second.producer, topic, r.partition, r.offset));
  }
  acked_produces_.push_back({topic, m, r.partition, r.offset, e.lineage_answered, started});
}

void mq_checker::group_joined(const std::string& group, std::uint64_t lineage, sim_time at) {
  group_since_.emplace(std::pair{lineage, group}, at);
}

std::optional<mq_message_id> mq_checker::delivered(const mq_poll_record& poll, const wire::mq_delivery& d) {
  stats_.delivered += 1;
  if (d.delivery_count > 1) stats_.redelivered += 1;
  auto& p = d.partition;
  auto payload = payloads_.find(d.payload);
  if (payload == payloads_.end() || payload->second.topic != p.topic) {
    report(fmt::format("{} was delivered naming payload '{}', which no producer wrote for that topic",
                       where(poll.group, p, d.offset), d.payload));
    return std::nullopt;
  }
  auto m = payload->second.message;
  if (d.size_bytes != mq_payload_size(m)) {
    report(fmt::format("{} was delivered as {} bytes; its producer wrote {}", where(poll.group, p, d.offset),
                       d.size_bytes, mq_payload_size(m)));
  }
  auto& e = poll.epochs;
  if (e.lineage_sent != e.lineage_answered) return m;  // a wipe while it ran: another log
  auto lineage = e.lineage_answered;
  if (auto at = at_place_.find({lineage, p.topic, p.partition, d.offset}); at != at_place_.end() && at->second != m) {
    report(fmt::format("{} was delivered as message {} of producer {}, but the produce acknowledged there was of "
                       "message {} of producer {}",
                       where(poll.group, p, d.offset), m.id, m.producer, at->second.id, at->second.producer));
  }
  group_place gp{lineage, poll.group, p.topic, p.partition, d.offset};
  delivered_.insert(gp);
  if (seeked_.contains({lineage, poll.group, p.topic})) {
    if (acks_.contains(gp)) stats_.replayed += 1;
    return m;
  }
  if (e.epoch_sent != e.epoch_answered) return m;  // the master restarted or reloaded while it ran
  if (auto ack = acks_.find(gp); ack != acks_.end() && ack->second.completed < poll.sent &&
                                 ack->second.epoch_sent == e.epoch_answered) {
    report(fmt::format("{} was delivered again (delivery {}) to a poll sent at {}, after its ack completed at {}",
                       where(poll.group, p, d.offset), d.delivery_count, format_time(poll.sent),
                       format_time(ack->second.completed)));
  }
  if (d.delivery_count == 1) {
    hold h{e.epoch_answered, poll.group, poll.session, p.topic, p.partition, d.generation};
    auto [last, first] = last_first_delivery_.emplace(h, d.offset);
    if (!first && d.offset <= last->second) {
      report(fmt::format("{} was first delivered to member {} after offset {}, under the same generation {}",
                         where(poll.group, p, d.offset), poll.session, last->second, d.generation));
    }
    if (!first) last->second = std::max(last->second, d.offset);
  }
  return m;
}

void mq_checker::payload_read(const std::string& key, mq_message_id m, const result<shared_bytes>& bytes) {
  if (!bytes) {
    stats_.payloads_unreadable += 1;
    return;
  }
  stats_.payloads_read += 1;
  if (auto wrong = mq_payload_mismatch(m, bytes->span()); !wrong.empty()) {
    report(fmt::format("payload '{}' of message {} of producer {} read back as {}", key, m.id, m.producer, wrong));
  }
}

void mq_checker::ack_completed(const std::string& group, std::uint64_t lineage, const wire::mq_partition_ref& p,
                               std::uint64_t offset, sim_time completed, std::uint64_t epoch_sent) {
  stats_.acked += 1;
  // The first confirmation counts: a later one of the same offset (after
  // a redelivery the contract allowed) only repeats it.
  acks_.emplace(group_place{lineage, group, p.topic, p.partition, offset}, ack_record{completed, epoch_sent});
}

void mq_checker::topics_listed(const wire::mq_topics& listed, sim_time at) {
  stats_.listings += 1;
  for (auto& t : listed.topics) {
    for (std::size_t i = 0; i < t.partitions.size(); ++i) {
      auto& p = t.partitions[i];
      auto shells = p.end - p.start;
      if (p.end < p.start || (t.config.max_messages != 0 && shells > t.config.max_messages)) {
        report(fmt::format("at {} partition {} of topic '{}' held offsets {} to {}, more than its {} messages",
                           format_time(at), i, t.topic, p.start, p.end, t.config.max_messages));
      }
      if (t.config.max_bytes != 0 && p.bytes > t.config.max_bytes) {
        report(fmt::format("at {} partition {} of topic '{}' held {} bytes, more than its {}", format_time(at), i,
                           t.topic, p.bytes, t.config.max_bytes));
      }
    }
  }
}

void mq_checker::produce_refused(const std::string& topic, errc code, const std::string& why) {
  if (code == errc::overloaded) stats_.refused_full += 1;
  if (code != errc::overloaded || !drops_oldest_.contains(topic)) return;
  report(fmt::format("topic '{}' drops its oldest messages when full, yet refused a produce: {}", topic, why));
}

void mq_checker::check_delivered(std::uint64_t lineage) {
  std::uint64_t missing = 0;
  std::string first;
  for (auto& a : acked_produces_) {
    if (a.lineage != lineage) continue;  // a wipe since: that log is gone
    if (drops_oldest_.contains(a.topic)) continue;  // it may have been dropped unread
    for (auto& [since_of, since] : group_since_) {
      auto& [group_lineage, group] = since_of;
      if (group_lineage != lineage || since >= a.started) continue;
      if (delivered_.contains({lineage, group, a.topic, a.partition, a.offset})) continue;
      if (++missing == 1) {
        first = fmt::format("message {} of producer {}, acknowledged at {}/{} offset {} (produced from {}), was "
                            "never delivered to group '{}', which existed since {}",
                            a.message.id, a.message.producer, a.topic, a.partition, a.offset, format_time(a.started),
                            group, format_time(since));
      }
    }
  }
  if (missing == 0) return;
  report(fmt::format("liveness: {} acknowledged messages were not delivered to a group after the faults healed; "
                     "the first: {}",
                     missing, first));
}

}  // namespace sluice::sim
