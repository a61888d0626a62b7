// mq_records: the keys and values of the master's MQ records, as
// mq_store.hpp lays them out — building, parsing, encoding and decoding
// them, nothing else. A parse or decode returns nothing for bytes that are
// not such a record; ranges are checked by the cores when restoring.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "actors/master/mq_groups.hpp"
#include "actors/master/mq_log.hpp"

namespace sluice::master::mq_records {

/// The format byte every MQ record's value starts with. Persisted: a new
/// layout gets a new number, and readers keep reading the old ones.
inline constexpr std::uint8_t format = 1;

inline constexpr std::string_view topics_prefix = "q/t/";
inline constexpr std::string_view starts_prefix = "q/l/";
inline constexpr std::string_view shells_prefix = "q/s/";
inline constexpr std::string_view groups_prefix = "q/g/";
inline constexpr std::string_view offsets_prefix = "q/o/";

/// Stops the process when `name` would break the key layout: every name
/// in a change record was checked by the core that made it.
void check_name(std::string_view name);

std::string topic_key(std::string_view topic);
/// "q/l/<topic>/": every log start of the topic.
std::string start_prefix(std::string_view topic);
std::string start_key(std::string_view topic, std::uint32_t partition);
/// "q/s/<topic>/": every shell of the topic.
std::string shell_prefix(std::string_view topic);
/// "q/s/<topic>/<p>/": every shell of one partition.
std::string shell_partition_prefix(std::string_view topic, std::uint32_t partition);
std::string shell_key(std::string_view topic, std::uint32_t partition, std::uint64_t offset);
std::string group_key(std::string_view group);
/// "q/o/<group>/": every offset of the group.
std::string offset_prefix(std::string_view group);
std::string offset_key(std::string_view group, const mq_partition_id& partition);

// Parsed keys view into the key they were parsed from.
struct start_key_parts {
  std::string_view topic;
  std::uint32_t partition = 0;
};
struct shell_key_parts {
  std::string_view topic;
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
};
struct offset_key_parts {
  std::string_view group;
  std::string_view topic;
  std::uint32_t partition = 0;
};
std::optional<start_key_parts> parse_start_key(std::string_view key);
std::optional<shell_key_parts> parse_shell_key(std::string_view key);
std::optional<offset_key_parts> parse_offset_key(std::string_view key);

std::string encode_topic_config(const mq_topic_config& config);
std::optional<mq_topic_config> decode_topic_config(std::string_view value);
std::string encode_start(std::uint64_t start);
std::optional<std::uint64_t> decode_start(std::string_view value);
/// The offset is the key's; the value holds the rest.
std::string encode_shell(const mq_shell& shell);
std::optional<mq_shell> decode_shell(std::string_view value, std::uint64_t offset);
std::string encode_group_config(const mq_group_config& config);
std::optional<mq_group_config> decode_group_config(std::string_view value);

struct stored_offset {
  std::uint64_t committed = 0;
  std::uint64_t generation = 0;
};
std::string encode_offset(std::uint64_t committed, std::uint64_t generation);
std::optional<stored_offset> decode_offset(std::string_view value);

}  // namespace sluice::master::mq_records
