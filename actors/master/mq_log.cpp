#include "actors/master/mq_log.hpp"

#include <algorithm>
#include <utility>

// Header-only: the hash must not depend on which xxhash library a build
// links, and inline it costs no call.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runtime/assert.hpp"

namespace sluice::master {

namespace {

bool name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

std::string partition_name(const std::string& topic, std::uint32_t partition) {
  return "topic '" + topic + "' partition " + std::to_string(partition);
}

}  // namespace

result<void> check_mq_name(std::string_view name, std::string_view what) {
  if (name.empty() || name.size() > mq_name_bytes_max) {
    return fail(errc::invalid_argument, std::string{what} + " names are 1 to " + std::to_string(mq_name_bytes_max) +
                                            " bytes; this one is " + std::to_string(name.size()));
  }
  if (!std::all_of(name.begin(), name.end(), name_char)) {
    return fail(errc::invalid_argument,
                std::string{what} + " '" + std::string{name} + "' has a character outside [A-Za-z0-9._-]");
  }
  return {};
}

result<void> check_topic_config(const mq_topic_config& c) {
  auto bad = [](const std::string& why) { return fail(errc::invalid_argument, "topic config: " + why); };
  if (c.partitions < 1 || c.partitions > mq_partitions_max) {
    return bad("partitions must be 1 to " + std::to_string(mq_partitions_max));
  }
  if (c.max_age_ms < 0 || c.max_age_ms > mq_window_ms_max) {
    return bad("max_age_ms must be 0 to " + std::to_string(mq_window_ms_max));
  }
  if (c.payload_replicas < 1 || c.payload_replicas > mq_payload_replicas_max) {
    return bad("payload_replicas must be 1 to " + std::to_string(mq_payload_replicas_max));
  }
  if (c.max_message_bytes < 1 || c.max_message_bytes > mq_message_bytes_max) {
    return bad("max_message_bytes must be 1 to " + std::to_string(mq_message_bytes_max));
  }
  if (c.max_bytes != 0 && c.max_message_bytes > c.max_bytes) {
    return bad("max_message_bytes exceeds max_bytes: such a message could never be appended");
  }
  if (c.max_messages > mq_partition_shells_max) {
    return bad("max_messages must be at most " + std::to_string(mq_partition_shells_max));
  }
  if (c.full != mq_full_policy::block && c.full != mq_full_policy::reject && c.full != mq_full_policy::drop_oldest) {
    return bad("the full policy is unknown");
  }
  if (c.dedupe_window_ms < 0 || c.dedupe_window_ms > mq_window_ms_max) {
    return bad("dedupe_window_ms must be 0 to " + std::to_string(mq_window_ms_max));
  }
  if (c.dedupe_window_ms == 0 && c.dedupe_entries_max != 0) {
    return bad("dedupe_entries_max needs a dedupe_window_ms");
  }
  if (c.dedupe_window_ms > 0 && (c.dedupe_entries_max < 1 || c.dedupe_entries_max > mq_dedupe_entries_max)) {
    return bad("dedupe_entries_max must be 1 to " + std::to_string(mq_dedupe_entries_max) + " with a window");
  }
  if (!c.dead_letter.empty()) {
    if (auto ok = check_mq_name(c.dead_letter, "dead-letter topic"); !ok) return ok.error();
  }
  return {};
}

std::uint32_t mq_log::partition_of_key(std::string_view key, std::uint32_t partitions) noexcept {
  SLUICE_ASSERT(partitions > 0);
  return static_cast<std::uint32_t>(XXH64(key.data(), key.size(), 0) % partitions);
}

result<bool> mq_log::create(const std::string& topic, const mq_topic_config& config) {
  if (auto ok = check_mq_name(topic, "topic"); !ok) return ok.error();
  if (auto ok = check_topic_config(config); !ok) return ok.error();
  if (config.dead_letter == topic) return fail(errc::invalid_argument, "a topic cannot be its own dead-letter topic");
  if (auto it = topics_.find(topic); it != topics_.end()) {
    if (it->second.config == config) return false;
    return fail(errc::conflict, "topic '" + topic + "' exists with another config; delete it first");
  }
  if (topics_.size() >= mq_topics_max) {
    return fail(errc::overloaded, "the master holds " + std::to_string(mq_topics_max) +
                                      " topics, its limit; delete one first");
  }
  if (dedupe_reserved_ + config.dedupe_entries_max > mq_dedupe_entries_total_max) {
    return fail(errc::overloaded, "the dedupe windows of all topics would hold more than " +
                                      std::to_string(mq_dedupe_entries_total_max) + " entries; ask for fewer");
  }
  auto ok = restore_topic(topic, config);
  SLUICE_ASSERT(ok.ok());
  record(mq_topic_created{topic, config});
  return true;
}

result<std::vector<std::string>> mq_log::remove(const std::string& topic) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return fail(errc::not_found, "no topic '" + topic + "'");
  std::vector<std::string> payloads;
  for (auto& p : it->second.partitions) {
    for (auto& s : p.shells) {
      if (release(s.shell.payload)) payloads.push_back(s.shell.payload);
    }
    SLUICE_ASSERT(shells_ >= p.shells.size());
    shells_ -= p.shells.size();
  }
  SLUICE_ASSERT(dedupe_reserved_ >= it->second.config.dedupe_entries_max);
  dedupe_reserved_ -= it->second.config.dedupe_entries_max;
  topics_.erase(it);
  record(mq_topic_deleted{topic});
  return payloads;
}

std::vector<std::string> mq_log::list() const {
  std::vector<std::string> out;
  out.reserve(topics_.size());
  for (auto& [name, t] : topics_) out.push_back(name);
  return out;
}

result<mq_topic_info> mq_log::describe(const std::string& topic) const {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return fail(errc::not_found, "no topic '" + topic + "'");
  mq_topic_info out{it->second.config, {}};
  for (auto& p : it->second.partitions) out.partitions.push_back({p.start, p.end(), p.bytes});
  return out;
}

const mq_topic_config* mq_log::config_of(const std::string& topic) const {
  auto it = topics_.find(topic);
  return it == topics_.end() ? nullptr : &it->second.config;
}

result<mq_log::topic_state*> mq_log::find_topic(const std::string& topic) {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return fail(errc::not_found, "no topic '" + topic + "'");
  return &it->second;
}

result<const mq_log::partition_log*> mq_log::find_partition(const std::string& topic, std::uint32_t partition) const {
  auto it = topics_.find(topic);
  if (it == topics_.end()) return fail(errc::not_found, "no topic '" + topic + "'");
  if (partition >= it->second.partitions.size()) {
    return fail(errc::invalid_argument, "topic '" + topic + "' has " + std::to_string(it->second.partitions.size()) +
                                            " partitions; there is no partition " + std::to_string(partition));
  }
  return &it->second.partitions[partition];
}

result<void> mq_log::check_message(const topic_state& t, const mq_message& m) const {
  if (m.payload.empty() || m.payload.size() > mq_payload_key_bytes_max) {
    return fail(errc::invalid_argument, "a message names its payload by a key of 1 to " +
                                            std::to_string(mq_payload_key_bytes_max) + " bytes");
  }
  if (m.message_id.size() > mq_message_id_bytes_max) {
    return fail(errc::invalid_argument, "a message id is at most " + std::to_string(mq_message_id_bytes_max) + " bytes");
  }
  if (m.key.size() > mq_partition_key_bytes_max) {
    return fail(errc::invalid_argument,
                "a partition key is at most " + std::to_string(mq_partition_key_bytes_max) + " bytes");
  }
  if (m.size_bytes > t.config.max_message_bytes) {
    return fail(errc::invalid_argument, "the message is " + std::to_string(m.size_bytes) +
                                            " bytes; the topic takes at most " +
                                            std::to_string(t.config.max_message_bytes));
  }
  return {};
}

result<std::uint32_t> mq_log::choose_partition(const topic_state& t, const mq_message& m) const {
  if (m.partition) {
    if (*m.partition >= t.config.partitions) {
      return fail(errc::invalid_argument, "the topic has " + std::to_string(t.config.partitions) +
                                              " partitions; there is no partition " + std::to_string(*m.partition));
    }
    return *m.partition;
  }
  if (!m.key.empty()) return partition_of_key(m.key, t.config.partitions);
  return t.next_partition;
}

bool mq_log::fits(const topic_state& t, const partition_log& p, std::uint64_t size) const noexcept {
  auto count_max = t.config.max_messages == 0 ? mq_partition_shells_max : t.config.max_messages;
  if (p.shells.size() + 1 > count_max) return false;
  if (t.config.max_bytes != 0 && p.bytes + size > t.config.max_bytes) return false;
  return shells_ + 1 <= mq_shells_max;
}

void mq_log::forget_dedupe_before(topic_state& t, std::int64_t now_ms) {
  // Oldest first: stop at the first entry still inside the window.
  while (!t.dedupe_order.empty()) {
    auto first = t.dedupe_order.begin();
    if (std::get<0>(first->first) > now_ms - t.config.dedupe_window_ms) break;
    t.dedupe.erase(first->second);
    t.dedupe_order.erase(first);
  }
}

void mq_log::remember_dedupe(topic_state& t, const dedupe_key& key, const dedupe_hit& hit) {
  if (auto old = t.dedupe.find(key); old != t.dedupe.end()) {
    // Only from restore: the same id appended twice, outside the window
    // of the first. The later append is the one a retry matches.
    if (old->second.append_ms > hit.append_ms) return;
    t.dedupe_order.erase({old->second.append_ms, old->second.partition, old->second.offset});
    t.dedupe.erase(old);
  }
  t.dedupe.emplace(key, hit);
  t.dedupe_order.emplace(std::tuple{hit.append_ms, hit.partition, hit.offset}, key);
  while (t.dedupe.size() > t.config.dedupe_entries_max) {
    auto first = t.dedupe_order.begin();
    t.dedupe.erase(first->second);
    t.dedupe_order.erase(first);
  }
  SLUICE_ASSERT(t.dedupe.size() == t.dedupe_order.size());
}

void mq_log::restore_done() { restored_payloads_ = {}; }

bool mq_log::release(const std::string& payload) {
  auto it = shared_.find(payload);
  if (it == shared_.end()) return true;
  if (--it->second == 0) shared_.erase(it);
  return false;
}

std::string mq_log::drop_front(partition_log& p) {
  SLUICE_ASSERT(!p.shells.empty());
  auto& front = p.shells.front();
  SLUICE_ASSERT(front.shell.offset == p.start);
  SLUICE_ASSERT(p.bytes >= front.shell.size_bytes);
  p.bytes -= front.shell.size_bytes;
  auto payload = std::move(front.shell.payload);
  p.shells.pop_front();
  p.start += 1;
  shells_ -= 1;
  return payload;
}

result<mq_appended> mq_log::append(const std::string& topic, const mq_message& m, std::int64_t now_ms) {
  auto found = find_topic(topic);
  if (!found) return std::move(found).error();
  auto& t = **found;
  if (auto ok = check_message(t, m); !ok) return ok.error();
  auto chosen = choose_partition(t, m);
  if (!chosen) return std::move(chosen).error();
  auto at_ms = std::max(now_ms, t.last_append_ms);
  bool dedupe = t.config.dedupe_window_ms > 0 && !m.message_id.empty();
  if (dedupe) {
    forget_dedupe_before(t, at_ms);
    if (auto hit = t.dedupe.find(dedupe_key{m.producer, m.message_id}); hit != t.dedupe.end()) {
      return mq_appended{hit->second.partition, hit->second.offset, true, {}};
    }
  }
  auto index = *chosen;
  auto& p = t.partitions[index];
  mq_appended out{index, 0, false, {}};
  while (!fits(t, p, m.size_bytes)) {
    if (t.config.full != mq_full_policy::drop_oldest || p.shells.empty()) {
      // Dropping one shell always makes room for one (a message is never
      // larger than max_bytes), so a refusal never follows a drop.
      SLUICE_ASSERT(out.dropped.empty());
      return fail(errc::overloaded, partition_name(topic, index) + " is full; retry when consumers have acked");
    }
    if (auto payload = drop_front(p); release(payload)) out.dropped.push_back(std::move(payload));
  }
  if (!out.dropped.empty()) record(mq_log_start_moved{topic, index, p.start});
  out.offset = p.end();
  mq_shell shell{out.offset, m.payload, m.size_bytes, m.producer, m.message_id, at_ms};
  if (!restored_payloads_.empty()) restore_done();
  if (m.shares_payload) shared_[m.payload] += 1;
  p.shells.push_back(stored_shell{shell, p.bytes_appended});
  p.bytes += m.size_bytes;
  p.bytes_appended += m.size_bytes;
  shells_ += 1;
  t.last_append_ms = at_ms;
  if (!m.partition && m.key.empty()) t.next_partition = (t.next_partition + 1) % t.config.partitions;
  if (dedupe) remember_dedupe(t, dedupe_key{m.producer, m.message_id}, dedupe_hit{index, out.offset, at_ms});
  record(mq_shell_appended{topic, index, std::move(shell)});
  return out;
}

result<std::vector<result<mq_appended>>> mq_log::append_batch(const std::string& topic,
                                                              const std::vector<mq_message>& messages,
                                                              std::int64_t now_ms) {
  if (!topics_.contains(topic)) return fail(errc::not_found, "no topic '" + topic + "'");
  if (messages.size() > mq_append_batch_max) {
    return fail(errc::invalid_argument, "a batch carries at most " + std::to_string(mq_append_batch_max) +
                                            " messages; this one " + std::to_string(messages.size()));
  }
  std::vector<result<mq_appended>> out;
  out.reserve(messages.size());
  for (auto& m : messages) out.push_back(append(topic, m, now_ms));
  return out;
}

mq_pruned mq_log::prune(std::int64_t now_ms, const std::map<mq_partition_id, std::uint64_t>& consumed_upto) {
  mq_pruned out;
  for (auto& [name, t] : topics_) {
    bool freed = false;
    auto count_max = t.config.max_messages == 0 ? mq_partition_shells_max : t.config.max_messages;
    for (std::uint32_t i = 0; i < t.partitions.size(); ++i) {
      auto& p = t.partitions[i];
      auto consumed = consumed_upto.find(mq_partition_id{name, i});
      auto floor = consumed == consumed_upto.end() ? std::uint64_t{0} : consumed->second;
      auto drops = [&] {
        if (p.shells.empty()) return false;
        auto& front = p.shells.front().shell;
        if (front.offset < floor) return true;
        if (t.config.max_age_ms != 0 && front.append_ms <= now_ms - t.config.max_age_ms) return true;
        if (p.shells.size() > count_max) return true;
        return t.config.max_bytes != 0 && p.bytes > t.config.max_bytes;
      };
      auto start = p.start;
      while (drops()) {
        if (auto payload = drop_front(p); release(payload)) out.payloads.push_back(std::move(payload));
      }
      if (p.start != start) {
        record(mq_log_start_moved{name, i, p.start});
        freed = true;
      }
    }
    if (freed) out.topics.push_back(name);
  }
  return out;
}

result<std::uint64_t> mq_log::start_offset(const std::string& topic, std::uint32_t partition) const {
  auto p = find_partition(topic, partition);
  if (!p) return std::move(p).error();
  return (*p)->start;
}

result<std::uint64_t> mq_log::end_offset(const std::string& topic, std::uint32_t partition) const {
  auto p = find_partition(topic, partition);
  if (!p) return std::move(p).error();
  return (*p)->end();
}

result<std::uint64_t> mq_log::bytes_between(const std::string& topic, std::uint32_t partition, std::uint64_t from,
                                            std::uint64_t to) const {
  auto found = find_partition(topic, partition);
  if (!found) return std::move(found).error();
  auto& p = **found;
  // bytes_appended before offset `o` (start <= o <= end).
  auto before = [&p](std::uint64_t o) {
    return o == p.end() ? p.bytes_appended : p.shells[o - p.start].bytes_before;
  };
  from = std::clamp(from, p.start, p.end());
  to = std::clamp(to, p.start, p.end());
  if (to <= from) return std::uint64_t{0};
  return before(to) - before(from);
}

result<std::uint64_t> mq_log::offset_at_time(const std::string& topic, std::uint32_t partition,
                                             std::int64_t time_ms) const {
  auto found = find_partition(topic, partition);
  if (!found) return std::move(found).error();
  auto& p = **found;
  // Append times never decrease (invariant 3): a binary search.
  auto it = std::partition_point(p.shells.begin(), p.shells.end(),
                                 [time_ms](const stored_shell& s) { return s.shell.append_ms < time_ms; });
  return p.start + static_cast<std::uint64_t>(it - p.shells.begin());
}

const mq_shell* mq_log::find(const std::string& topic, std::uint32_t partition, std::uint64_t offset) const {
  auto found = find_partition(topic, partition);
  if (!found) return nullptr;
  auto& p = **found;
  if (offset < p.start || offset >= p.end()) return nullptr;
  auto& s = p.shells[offset - p.start].shell;
  SLUICE_ASSERT(s.offset == offset);
  return &s;
}

std::vector<mq_log_change> mq_log::drain_changes() { return std::exchange(changes_, {}); }

void mq_log::record(mq_log_change change) {
  SLUICE_ASSERT(changes_.size() < mq_changes_max);
  changes_.push_back(std::move(change));
}

result<void> mq_log::restore_topic(const std::string& topic, const mq_topic_config& config) {
  if (auto ok = check_mq_name(topic, "topic"); !ok) return ok.error();
  if (auto ok = check_topic_config(config); !ok) return ok.error();
  if (topics_.contains(topic)) return fail(errc::invalid_argument, "topic '" + topic + "' restored twice");
  if (topics_.size() >= mq_topics_max) return fail(errc::invalid_argument, "more topics stored than the limit");
  topic_state t;
  t.config = config;
  t.partitions.resize(config.partitions);
  topics_.emplace(topic, std::move(t));
  dedupe_reserved_ += config.dedupe_entries_max;
  return {};
}

result<void> mq_log::restore_log_start(const std::string& topic, std::uint32_t partition, std::uint64_t start) {
  auto found = find_topic(topic);
  if (!found) return fail(errc::invalid_argument, "a stored log start names no topic: '" + topic + "'");
  auto& t = **found;
  if (partition >= t.partitions.size() || !t.partitions[partition].shells.empty() ||
      start < t.partitions[partition].start) {
    return fail(errc::invalid_argument, "the stored log start of " + partition_name(topic, partition) +
                                            " does not fit its log");
  }
  t.partitions[partition].start = start;
  return {};
}

result<void> mq_log::restore_shell(const std::string& topic, std::uint32_t partition, mq_shell shell) {
  auto found = find_topic(topic);
  if (!found) return fail(errc::invalid_argument, "a stored shell names no topic: '" + topic + "'");
  auto& t = **found;
  if (partition >= t.partitions.size()) {
    return fail(errc::invalid_argument, "a stored shell names " + partition_name(topic, partition) + ", which is out of range");
  }
  auto& p = t.partitions[partition];
  if (shell.offset != p.end()) {
    return fail(errc::invalid_argument, "the stored shells of " + partition_name(topic, partition) +
                                            " are not contiguous at offset " + std::to_string(shell.offset));
  }
  if (!p.shells.empty() && shell.append_ms < p.shells.back().shell.append_ms) {
    return fail(errc::invalid_argument, "the stored shells of " + partition_name(topic, partition) +
                                            " go back in time at offset " + std::to_string(shell.offset));
  }
  if (p.shells.size() >= mq_partition_shells_max || shells_ >= mq_shells_max) {
    return fail(errc::invalid_argument, "more shells stored than the limit");
  }
  t.last_append_ms = std::max(t.last_append_ms, shell.append_ms);
  if (t.config.dedupe_window_ms > 0 && !shell.message_id.empty()) {
    remember_dedupe(t, dedupe_key{shell.producer, shell.message_id}, dedupe_hit{partition, shell.offset, shell.append_ms});
  }
  if (!restored_payloads_.insert(shell.payload).second) shared_[shell.payload] += 1;
  p.bytes += shell.size_bytes;
  p.shells.push_back(stored_shell{std::move(shell), p.bytes_appended});
  p.bytes_appended += p.shells.back().shell.size_bytes;
  shells_ += 1;
  return {};
}

}  // namespace sluice::master
