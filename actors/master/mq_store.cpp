#include "actors/master/mq_store.hpp"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "actors/master/mq_records.hpp"

namespace sluice::master {
namespace {

using namespace mq_records;

error corrupt(std::string_view key, std::string_view what) {
  std::string shown;
  for (char c : key.substr(0, 300)) shown += (c >= 0x20 && c < 0x7f) ? c : '?';
  return error{errc::internal, "the master's stored MQ record '" + shown + "' is corrupt: " + std::string{what}};
}

/// Erases every key in `keys`; stops at the first store error.
result<void> erase_all(durable_store& store, const std::vector<std::string>& keys) {
  for (auto& key : keys) {
    if (auto ok = store.erase(key); !ok) return ok;
  }
  return {};
}

/// Erases every log start and shell of `topic`. Collects the keys first,
/// since nothing may change a store while it scans. The shells are kept as
/// (partition, offset) pairs, 16 bytes each, so a topic at
/// mq_shells_max costs 32 MiB here rather than its keys' length.
result<void> erase_topic_records(durable_store& store, const std::string& topic) {
  std::vector<std::string> odd;  // keys under the topic's prefixes that do not parse: erased as they are
  std::vector<std::string> starts;
  auto scanned = store.scan(start_prefix(topic), [&](std::string_view key, std::string_view) {
    starts.emplace_back(key);
  });
  if (!scanned) return scanned;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> shells;
  scanned = store.scan(shell_prefix(topic), [&](std::string_view key, std::string_view) {
    auto parsed = parse_shell_key(key);
    if (parsed && parsed->topic == topic) {
      shells.emplace_back(parsed->partition, parsed->offset);
    } else {
      odd.emplace_back(key);
    }
  });
  if (!scanned) return scanned;
  for (auto& [partition, offset] : shells) {
    if (auto ok = store.erase(shell_key(topic, partition, offset)); !ok) return ok;
  }
  if (auto ok = erase_all(store, odd); !ok) return ok;
  return erase_all(store, starts);
}

/// Erases the shells of a partition below `start`, given the start its
/// record held before (0 when there was none; nothing when it would not
/// decode).
result<void> erase_shells_below(durable_store& store, const std::string& topic, std::uint32_t partition,
                                std::optional<std::uint64_t> stored_start, std::uint64_t start) {
  if (stored_start && *stored_start >= start) return {};
  // A record in step with the log makes [stored_start, start) what the
  // move dropped: at most the partition's shells, each erased by its key.
  // Past that the record is not in step (a corrupt store), and a scan
  // finds what is really there.
  if (stored_start && start - *stored_start <= mq_partition_shells_max) {
    for (auto offset = *stored_start; offset < start; ++offset) {
      if (auto ok = store.erase(shell_key(topic, partition, offset)); !ok) return ok;
    }
    return {};
  }
  std::vector<std::uint64_t> below;
  auto scanned = store.scan(shell_partition_prefix(topic, partition), [&](std::string_view key, std::string_view) {
    auto parsed = parse_shell_key(key);
    if (parsed && parsed->offset < start) below.push_back(parsed->offset);
  });
  if (!scanned) return scanned;
  for (auto offset : below) {
    if (auto ok = store.erase(shell_key(topic, partition, offset)); !ok) return ok;
  }
  return {};
}

result<void> journal_one(durable_store& store, const mq_topic_created& c) {
  check_name(c.topic);
  // Leftovers of a delete a crash cut short go before the config returns.
  if (auto ok = erase_topic_records(store, c.topic); !ok) return ok;
  return store.put(topic_key(c.topic), encode_topic_config(c.config));
}

result<void> journal_one(durable_store& store, const mq_topic_deleted& c) {
  check_name(c.topic);
  // The config first: from then on every other record of it is a leftover.
  if (auto ok = store.erase(topic_key(c.topic)); !ok) return ok;
  return erase_topic_records(store, c.topic);
}

result<void> journal_one(durable_store& store, const mq_shell_appended& c) {
  check_name(c.topic);
  return store.put(shell_key(c.topic, c.partition, c.shell.offset), encode_shell(c.shell));
}

result<void> journal_one(durable_store& store, const mq_log_start_moved& c) {
  check_name(c.topic);
  auto key = start_key(c.topic, c.partition);
  auto stored = store.get(key);
  if (!stored) return std::move(stored).error();
  std::optional<std::uint64_t> stored_start = std::uint64_t{0};
  if (*stored) stored_start = decode_start(**stored);
  // The start first, the shells after: a crash between them leaves
  // shells below the start, which mq_load passes over and erases. The
  // other order could lose every shell and keep the old start, and the
  // restored partition would hand out their offsets again.
  if (auto ok = store.put(key, encode_start(c.start)); !ok) return ok;
  return erase_shells_below(store, c.topic, c.partition, stored_start, c.start);
}

result<void> erase_group_offsets(durable_store& store, const std::string& group) {
  // At most mq_group_topics_max * mq_partitions_max keys (and leftovers).
  std::vector<std::string> keys;
  auto scanned = store.scan(offset_prefix(group), [&](std::string_view key, std::string_view) {
    keys.emplace_back(key);
  });
  if (!scanned) return scanned;
  return erase_all(store, keys);
}

result<void> journal_one(durable_store& store, const mq_group_created& c) {
  check_name(c.group);
  if (auto ok = erase_group_offsets(store, c.group); !ok) return ok;
  return store.put(group_key(c.group), encode_group_config(c.config));
}

result<void> journal_one(durable_store& store, const mq_group_deleted& c) {
  check_name(c.group);
  if (auto ok = store.erase(group_key(c.group)); !ok) return ok;
  return erase_group_offsets(store, c.group);
}

result<void> journal_one(durable_store& store, const mq_offset_changed& c) {
  check_name(c.group);
  check_name(c.partition.topic);
  return store.put(offset_key(c.group, c.partition), encode_offset(c.committed, c.generation));
}

result<void> journal_one(durable_store& store, const mq_offset_removed& c) {
  check_name(c.group);
  check_name(c.partition.topic);
  return store.erase(offset_key(c.group, c.partition));
}

/// What a load passed over, to erase once the scans are done (nothing
/// may change a store while it scans). Kept by name and offset rather than
/// by key: a cut topic delete may leave a whole topic's shells.
struct leftovers {
  std::set<std::string> topics;  ///< records of a topic with no config
  std::map<std::pair<std::string, std::uint32_t>, std::vector<std::uint64_t>> shells;  ///< below their log start
  std::set<std::string> groups;  ///< offsets of a group with no config
};

/// One load's progress. A scan cannot stop, so after the first bad
/// record the rest are passed over and `bad` is returned.
struct load_state {
  durable_store& store;
  mq_log& log;
  mq_groups& groups;
  mq_load_stats stats;
  leftovers left;
  std::optional<error> bad;

  /// Scans `prefix`, handing each record to `visit` until one fails.
  result<void> scan(std::string_view prefix,
                    const std::function<result<void>(std::string_view, std::string_view)>& visit) {
    auto scanned = store.scan(prefix, [&](std::string_view key, std::string_view value) {
      if (bad) return;
      if (auto ok = visit(key, value); !ok) bad = corrupt(key, ok.error().message());
    });
    if (!scanned) return scanned;
    if (bad) return *bad;
    return {};
  }
};

result<void> load_topic(load_state& s, std::string_view key, std::string_view value) {
  auto config = decode_topic_config(value);
  if (!config) return fail(errc::internal, "not a topic config");
  if (auto ok = s.log.restore_topic(std::string{key.substr(topics_prefix.size())}, *config); !ok) return ok;
  s.stats.topics += 1;
  return {};
}

result<void> load_start(load_state& s, std::string_view key, std::string_view value) {
  auto parsed = parse_start_key(key);
  if (!parsed) return fail(errc::internal, "not a log start key");
  std::string topic{parsed->topic};
  if (s.log.config_of(topic) == nullptr) {
    s.stats.leftovers += 1;
    s.left.topics.insert(std::move(topic));
    return {};
  }
  auto start = decode_start(value);
  if (!start) return fail(errc::internal, "not a log start");
  return s.log.restore_log_start(topic, parsed->partition, *start);
}

result<void> load_shell(load_state& s, std::string_view key, std::string_view value) {
  auto parsed = parse_shell_key(key);
  if (!parsed) return fail(errc::internal, "not a shell key");
  std::string topic{parsed->topic};
  if (s.log.config_of(topic) == nullptr) {
    s.stats.leftovers += 1;
    s.left.topics.insert(std::move(topic));
    return {};
  }
  auto start = s.log.start_offset(topic, parsed->partition);
  if (!start) return std::move(start).error();
  if (parsed->offset < *start) {
    s.stats.leftovers += 1;
    s.left.shells[{std::move(topic), parsed->partition}].push_back(parsed->offset);
    return {};
  }
  auto shell = decode_shell(value, parsed->offset);
  if (!shell) return fail(errc::internal, "not a shell");
  if (auto ok = s.log.restore_shell(topic, parsed->partition, std::move(*shell)); !ok) return ok;
  s.stats.shells += 1;
  return {};
}

result<void> load_group(load_state& s, std::string_view key, std::string_view value) {
  auto config = decode_group_config(value);
  if (!config) return fail(errc::internal, "not a group config");
  if (auto ok = s.groups.restore_group(std::string{key.substr(groups_prefix.size())}, *config); !ok) return ok;
  s.stats.groups += 1;
  return {};
}

result<void> load_offset(load_state& s, std::string_view key, std::string_view value) {
  auto parsed = parse_offset_key(key);
  if (!parsed) return fail(errc::internal, "not an offset key");
  std::string group{parsed->group};
  if (s.groups.config_of(group) == nullptr) {
    s.stats.leftovers += 1;
    s.left.groups.insert(std::move(group));
    return {};
  }
  auto offset = decode_offset(value);
  if (!offset) return fail(errc::internal, "not an offset");
  mq_partition_id id{std::string{parsed->topic}, parsed->partition};
  if (auto ok = s.groups.restore_offset(group, id, offset->committed, offset->generation); !ok) return ok;
  s.stats.offsets += 1;
  return {};
}

result<void> erase_leftovers(durable_store& store, const leftovers& left) {
  for (auto& topic : left.topics) {
    if (auto ok = erase_topic_records(store, topic); !ok) return ok;
  }
  for (auto& [id, offsets] : left.shells) {
    for (auto offset : offsets) {
      if (auto ok = store.erase(shell_key(id.first, id.second, offset)); !ok) return ok;
    }
  }
  for (auto& group : left.groups) {
    if (auto ok = erase_group_offsets(store, group); !ok) return ok;
  }
  return {};
}

}  // namespace

result<void> mq_journal(durable_store& store, const std::vector<mq_log_change>& changes) {
  for (auto& change : changes) {
    auto ok = std::visit([&store](const auto& c) { return journal_one(store, c); }, change);
    if (!ok) return ok;
  }
  return {};
}

result<void> mq_journal(durable_store& store, const std::vector<mq_group_change>& changes) {
  for (auto& change : changes) {
    auto ok = std::visit([&store](const auto& c) { return journal_one(store, c); }, change);
    if (!ok) return ok;
  }
  return {};
}

result<mq_load_stats> mq_load(durable_store& store, mq_log& log, mq_groups& groups) {
  load_state s{store, log, groups, {}, {}, std::nullopt};
  using loader = result<void> (*)(load_state&, std::string_view, std::string_view);
  // The cores' restore order: topics, log starts, shells; groups, offsets.
  const std::pair<std::string_view, loader> phases[] = {
      {topics_prefix, load_topic}, {starts_prefix, load_start}, {shells_prefix, load_shell},
      {groups_prefix, load_group}, {offsets_prefix, load_offset},
  };
  for (auto& phase : phases) {
    auto load = phase.second;
    auto ok = s.scan(phase.first,
                     [&s, load](std::string_view key, std::string_view value) { return load(s, key, value); });
    if (!ok) return ok.error();
  }
  log.restore_done();
  if (auto ok = erase_leftovers(store, s.left); !ok) return ok.error();
  return s.stats;
}

}  // namespace sluice::master
