#include "actors/master/mq_records.hpp"

#include "runtime/assert.hpp"

namespace sluice::master::mq_records {
namespace {

constexpr std::size_t partition_digits = 8;
constexpr std::size_t offset_digits = 16;

void put_hex(std::string& out, std::uint64_t v, std::size_t digits) {
  constexpr std::string_view hex = "0123456789abcdef";
  for (std::size_t i = digits; i-- > 0;) out += hex[(v >> (4 * i)) & 0xf];
}

/// Exactly `s.size()` lowercase hex digits, as put_hex writes them.
std::optional<std::uint64_t> parse_hex(std::string_view s) {
  std::uint64_t v = 0;
  for (char c : s) {
    std::uint64_t digit = 0;
    if (c >= '0' && c <= '9') {
      digit = static_cast<std::uint64_t>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<std::uint64_t>(c - 'a' + 10);
    } else {
      return std::nullopt;
    }
    v = (v << 4) | digit;
  }
  return v;
}

/// A name as a key field: not empty, no separator in it.
bool name_field(std::string_view s) { return !s.empty() && s.find('/') == std::string_view::npos; }

/// Splits "<head>/<hex of `digits`>" off the end of `rest`.
bool split_hex_tail(std::string_view& rest, std::size_t digits, std::uint64_t& value) {
  if (rest.size() < digits + 1 || rest[rest.size() - digits - 1] != '/') return false;
  auto parsed = parse_hex(rest.substr(rest.size() - digits));
  if (!parsed) return false;
  value = *parsed;
  rest.remove_suffix(digits + 1);
  return true;
}

void put_u8(std::string& out, std::uint8_t v) { out += static_cast<char>(v); }

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (8 * i));
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (8 * i));
}

void put_i64(std::string& out, std::int64_t v) { put_u64(out, static_cast<std::uint64_t>(v)); }

void put_bytes(std::string& out, std::string_view bytes) {
  SLUICE_ASSERT(bytes.size() <= UINT32_MAX);
  put_u32(out, static_cast<std::uint32_t>(bytes.size()));
  out += bytes;
}

/// Reads little-endian integers and length-prefixed byte strings off the
/// front of a value; any read past its end clears `ok`.
struct reader {
  std::string_view rest;
  bool ok = true;

  std::uint8_t u8() { return static_cast<std::uint8_t>(uint(1)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint(4)); }
  std::uint64_t u64() { return uint(8); }
  std::int64_t i64() { return static_cast<std::int64_t>(uint(8)); }
  std::string bytes() { return std::string{take(u32())}; }
  /// The value began with the known format byte.
  bool format_known() { return u8() == format && ok; }
  /// Everything was read, and nothing was left over.
  bool done() const { return ok && rest.empty(); }

 private:
  std::string_view take(std::size_t n) {
    if (!ok || rest.size() < n) {
      ok = false;
      return {};
    }
    auto out = rest.substr(0, n);
    rest.remove_prefix(n);
    return out;
  }
  std::uint64_t uint(std::size_t n) {
    auto b = take(n);
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < b.size(); ++i) v |= std::uint64_t{static_cast<unsigned char>(b[i])} << (8 * i);
    return v;
  }
};

std::string with_format() {
  std::string out;
  put_u8(out, format);
  return out;
}

}  // namespace

void check_name(std::string_view name) { SLUICE_ASSERT(check_mq_name(name, "name").ok()); }

std::string topic_key(std::string_view topic) { return std::string{topics_prefix}.append(topic); }

std::string start_prefix(std::string_view topic) { return std::string{starts_prefix}.append(topic).append("/"); }

std::string start_key(std::string_view topic, std::uint32_t partition) {
  auto key = start_prefix(topic);
  put_hex(key, partition, partition_digits);
  return key;
}

std::string shell_prefix(std::string_view topic) { return std::string{shells_prefix}.append(topic).append("/"); }

std::string shell_partition_prefix(std::string_view topic, std::uint32_t partition) {
  auto key = shell_prefix(topic);
  put_hex(key, partition, partition_digits);
  key += '/';
  return key;
}

std::string shell_key(std::string_view topic, std::uint32_t partition, std::uint64_t offset) {
  auto key = shell_partition_prefix(topic, partition);
  put_hex(key, offset, offset_digits);
  return key;
}

std::string group_key(std::string_view group) { return std::string{groups_prefix}.append(group); }

std::string offset_prefix(std::string_view group) { return std::string{offsets_prefix}.append(group).append("/"); }

std::string offset_key(std::string_view group, const mq_partition_id& partition) {
  auto key = offset_prefix(group);
  key += partition.topic;
  key += '/';
  put_hex(key, partition.partition, partition_digits);
  return key;
}

std::optional<start_key_parts> parse_start_key(std::string_view key) {
  if (!key.starts_with(starts_prefix)) return std::nullopt;
  auto rest = key.substr(starts_prefix.size());
  std::uint64_t partition = 0;
  if (!split_hex_tail(rest, partition_digits, partition) || !name_field(rest)) return std::nullopt;
  return start_key_parts{rest, static_cast<std::uint32_t>(partition)};
}

std::optional<shell_key_parts> parse_shell_key(std::string_view key) {
  if (!key.starts_with(shells_prefix)) return std::nullopt;
  auto rest = key.substr(shells_prefix.size());
  std::uint64_t offset = 0;
  std::uint64_t partition = 0;
  if (!split_hex_tail(rest, offset_digits, offset) || !split_hex_tail(rest, partition_digits, partition) ||
      !name_field(rest)) {
    return std::nullopt;
  }
  return shell_key_parts{rest, static_cast<std::uint32_t>(partition), offset};
}

std::optional<offset_key_parts> parse_offset_key(std::string_view key) {
  if (!key.starts_with(offsets_prefix)) return std::nullopt;
  auto rest = key.substr(offsets_prefix.size());
  std::uint64_t partition = 0;
  if (!split_hex_tail(rest, partition_digits, partition)) return std::nullopt;
  auto slash = rest.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto group = rest.substr(0, slash);
  auto topic = rest.substr(slash + 1);
  if (!name_field(group) || !name_field(topic)) return std::nullopt;
  return offset_key_parts{group, topic, static_cast<std::uint32_t>(partition)};
}

std::string encode_topic_config(const mq_topic_config& c) {
  auto out = with_format();
  put_u32(out, c.partitions);
  put_i64(out, c.max_age_ms);
  put_u64(out, c.max_bytes);
  put_u64(out, c.max_messages);
  put_u8(out, static_cast<std::uint8_t>(c.full));
  put_u32(out, c.payload_replicas);
  put_u64(out, c.max_message_bytes);
  put_i64(out, c.dedupe_window_ms);
  put_u64(out, c.dedupe_entries_max);
  put_bytes(out, c.dead_letter);
  return out;
}

std::optional<mq_topic_config> decode_topic_config(std::string_view value) {
  reader r{value};
  if (!r.format_known()) return std::nullopt;
  mq_topic_config c;
  c.partitions = r.u32();
  c.max_age_ms = r.i64();
  c.max_bytes = r.u64();
  c.max_messages = r.u64();
  c.full = static_cast<mq_full_policy>(r.u8());  // check_topic_config refuses an unknown one
  c.payload_replicas = r.u32();
  c.max_message_bytes = r.u64();
  c.dedupe_window_ms = r.i64();
  c.dedupe_entries_max = r.u64();
  // Written before dead-letter topics existed, a record ends here.
  if (!r.done()) c.dead_letter = r.bytes();
  if (!r.done()) return std::nullopt;
  return c;
}

std::string encode_start(std::uint64_t start) {
  auto out = with_format();
  put_u64(out, start);
  return out;
}

std::optional<std::uint64_t> decode_start(std::string_view value) {
  reader r{value};
  if (!r.format_known()) return std::nullopt;
  auto start = r.u64();
  if (!r.done()) return std::nullopt;
  return start;
}

std::string encode_shell(const mq_shell& shell) {
  auto out = with_format();
  put_u64(out, shell.size_bytes);
  put_u64(out, shell.producer);
  put_i64(out, shell.append_ms);
  put_bytes(out, shell.payload);
  put_bytes(out, shell.message_id);
  return out;
}

std::optional<mq_shell> decode_shell(std::string_view value, std::uint64_t offset) {
  reader r{value};
  if (!r.format_known()) return std::nullopt;
  mq_shell s;
  s.offset = offset;
  s.size_bytes = r.u64();
  s.producer = r.u64();
  s.append_ms = r.i64();
  s.payload = r.bytes();
  s.message_id = r.bytes();
  if (!r.done() || s.payload.empty() || s.payload.size() > mq_payload_key_bytes_max ||
      s.message_id.size() > mq_message_id_bytes_max) {
    return std::nullopt;
  }
  return s;
}

std::string encode_group_config(const mq_group_config& c) {
  auto out = with_format();
  put_i64(out, c.ack_timeout_ms);
  put_u32(out, c.max_deliveries);
  put_u32(out, c.prefetch);
  put_u8(out, static_cast<std::uint8_t>(c.start));
  SLUICE_ASSERT(c.topics.size() <= mq_group_topics_max);
  put_u32(out, static_cast<std::uint32_t>(c.topics.size()));
  for (auto& topic : c.topics) put_bytes(out, topic);
  return out;
}

std::optional<mq_group_config> decode_group_config(std::string_view value) {
  reader r{value};
  if (!r.format_known()) return std::nullopt;
  mq_group_config c;
  c.ack_timeout_ms = r.i64();
  c.max_deliveries = r.u32();
  c.prefetch = r.u32();
  c.start = static_cast<mq_start>(r.u8());  // check_group_config refuses an unknown one
  auto topics = r.u32();
  if (!r.ok || topics > mq_group_topics_max) return std::nullopt;
  c.topics.reserve(topics);
  for (std::uint32_t i = 0; i < topics && r.ok; ++i) c.topics.push_back(r.bytes());
  if (!r.done()) return std::nullopt;
  return c;
}

std::string encode_offset(std::uint64_t committed, std::uint64_t generation) {
  auto out = with_format();
  put_u64(out, committed);
  put_u64(out, generation);
  return out;
}

std::optional<stored_offset> decode_offset(std::string_view value) {
  reader r{value};
  if (!r.format_known()) return std::nullopt;
  stored_offset o;
  o.committed = r.u64();
  o.generation = r.u64();
  if (!r.done()) return std::nullopt;
  return o;
}

}  // namespace sluice::master::mq_records
