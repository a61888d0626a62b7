#include "runtime/config/load.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <system_error>
#include <type_traits>
#include <vector>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "runtime/units.hpp"

namespace sluice {
namespace {

// A node's config is a few hundred bytes; a file past this bound is almost
// certainly the wrong file (a binary, a log), so it is refused unread.
constexpr std::uint64_t config_file_bytes_max = 1ULL << 20;
// Below this no envelope (header fields, ids, a key) fits, so every frame
// would be refused.
constexpr std::uint64_t envelope_bytes_min = 64;
// Keys and values are short words; a suggestion is offered only for a typo
// this close (edits: insert, delete, substitute one character).
constexpr std::size_t suggestion_distance_max = 2;
constexpr std::uint32_t threads_min = 0;
constexpr std::uint32_t threads_max = 64;
// Below this a transfer's pieces cost more in round trips than they move.
constexpr std::uint64_t transfer_chunk_bytes_min = 4096;
// Pieces of one transfer in flight: beyond this the window only holds memory.
constexpr std::int64_t transfer_window_max = 64;

constexpr std::array<std::string_view, 6> log_levels{"trace", "debug", "info",
                                                     "warn",  "error", "off"};
constexpr std::array<std::string_view, 3> placement_names{"local-first", "random", "most-free"};
constexpr std::array<std::string_view, 4> path_names{"shm", "rdma", "tcp", "relay"};

// ---- Error messages -------------------------------------------------------

/// Where a value sits in the file, for error messages.
struct key_ref {
  std::string_view source;   // the file name or "<string>"
  std::string path;          // "owner.capacity"
  toml::source_position at;  // line 0 when unknown
};

std::string location(std::string_view source, const toml::source_position& at) {
  if (at.line == 0) return fmt::format("{}: ", source);
  return fmt::format("{}:{}:{}: ", source, at.line, at.column);
}

std::string_view kind_of(const toml::node& value) {
  switch (value.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::array: return "an array";
    case toml::node_type::table: return "a table";
    case toml::node_type::none: break;
  }
  return "nothing";
}

error must_be(const key_ref& key, std::string_view expected, const toml::node& found) {
  return fail(errc::invalid_argument,
              fmt::format("{}key '{}' must be {}, found {}", location(key.source, key.at), key.path,
                          expected, kind_of(found)));
}

error invalid(const key_ref& key, std::string_view why) {
  return fail(errc::invalid_argument,
              fmt::format("{}key '{}': {}", location(key.source, key.at), key.path, why));
}

/// Levenshtein distance; inputs are short config words.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j < row.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t above = row[j];
      std::size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      row[j] = std::min({above + 1, row[j - 1] + 1, substitute});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// The candidate nearest to `word` within suggestion_distance_max, if any.
std::optional<std::string_view> closest(std::string_view word,
                                        std::span<const std::string_view> candidates) {
  std::optional<std::string_view> best;
  std::size_t best_distance = suggestion_distance_max + 1;
  for (auto candidate : candidates) {
    std::size_t d = edit_distance(word, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  auto near = closest(word, candidates);
  return near ? fmt::format("; did you mean '{}'?", *near) : std::string{};
}

// ---- Readers: one TOML value to one typed value ---------------------------

result<std::string> read_string(const toml::node& value, const key_ref& key) {
  if (const auto* s = value.as_string()) return s->get();
  return must_be(key, "a string", value);
}

result<std::int64_t> read_integer(const toml::node& value, const key_ref& key, std::int64_t min,
                                  std::int64_t max) {
  const auto* i = value.as_integer();
  if (i == nullptr) return must_be(key, "an integer", value);
  std::int64_t n = i->get();
  if (n < min && max == std::numeric_limits<std::int64_t>::max()) {
    return invalid(key, fmt::format("must be a non-negative integer, found {}", n));
  }
  if (n < min || n > max) {
    return invalid(key, fmt::format("must be from {} to {}, found {}", min, max, n));
  }
  return n;
}

/// A size: a string with a unit ("512MiB") or an integer number of bytes.
result<std::uint64_t> read_size(const toml::node& value, const key_ref& key,
                                std::uint64_t min_bytes) {
  std::uint64_t bytes = 0;
  if (const auto* i = value.as_integer()) {
    if (i->get() < 0) {
      return invalid(key, fmt::format("a size must not be negative, found {}", i->get()));
    }
    bytes = static_cast<std::uint64_t>(i->get());
  } else if (const auto* s = value.as_string()) {
    auto parsed = parse_size(s->get());
    if (!parsed) return invalid(key, parsed.error().message());
    bytes = *parsed;
  } else {
    return must_be(
        key, "a size (a string with a unit such as \"512MiB\", or an integer number of bytes)",
        value);
  }
  if (bytes >= min_bytes) return bytes;
  if (min_bytes == 1) return invalid(key, "must be greater than 0");
  return invalid(key, fmt::format("must be at least {}, found {}", format_size(min_bytes),
                                  format_size(bytes)));
}

/// A duration: a string with a unit ("500ms"), greater than zero.
result<microseconds> read_duration(const toml::node& value, const key_ref& key) {
  const auto* s = value.as_string();
  if (s == nullptr) {
    return must_be(key, "a duration (a string with a unit us, ms, s, m or h, such as \"500ms\")",
                   value);
  }
  auto parsed = parse_duration(s->get());
  if (!parsed) return invalid(key, parsed.error().message());
  if (parsed->count() == 0) return invalid(key, "must be greater than 0");
  return *parsed;
}

result<bool> read_bool(const toml::node& value, const key_ref& key) {
  if (const auto* b = value.as_boolean()) return b->get();
  return must_be(key, "true or false", value);
}

result<prefault_policy> read_prefault(const toml::node& value, const key_ref& key) {
  auto name = read_string(value, key);
  if (!name) return std::move(name).error();
  if (*name == "none") return prefault_policy::none;
  if (*name == "background") return prefault_policy::background;
  return invalid(key, fmt::format("unknown prefault '{}'; accepted: none, background", *name));
}

result<eviction_policy_kind> read_eviction(const toml::node& value, const key_ref& key) {
  auto name = read_string(value, key);
  if (!name) return std::move(name).error();
  if (*name == "lru") return eviction_policy_kind::lru;
  if (*name == "none") return eviction_policy_kind::none;
  return invalid(key, fmt::format("unknown eviction policy '{}'; accepted: lru, none", *name));
}

result<std::uint32_t> read_percent(const toml::node& value, const key_ref& key) {
  auto n = read_integer(value, key, 1, 100);
  if (!n) return std::move(n).error();
  return static_cast<std::uint32_t>(*n);
}

result<std::string> read_log_level(const toml::node& value, const key_ref& key) {
  auto level = read_string(value, key);
  if (!level) return level;
  if (std::find(log_levels.begin(), log_levels.end(), *level) != log_levels.end()) return level;
  return invalid(key,
                 fmt::format("unknown level '{}'; accepted: trace, debug, info, warn, error, off{}",
                             *level, did_you_mean(*level, log_levels)));
}

result<placement_policy> read_placement(const toml::node& value, const key_ref& key) {
  auto name = read_string(value, key);
  if (!name) return std::move(name).error();
  auto policy = parse_placement(*name);
  if (!policy) return invalid(key, policy.error().message());
  return policy;
}

/// The order of paths: an array of distinct path names that names tcp.
result<std::vector<std::string>> read_path_order(const toml::node& value, const key_ref& key) {
  const auto* list = value.as_array();
  if (list == nullptr) return must_be(key, "an array of path names such as [\"rdma\", \"tcp\", \"relay\"]", value);
  std::vector<std::string> out;
  for (const auto& item : *list) {
    auto name = read_string(item, key);
    if (!name) return std::move(name).error();
    if (std::find(path_names.begin(), path_names.end(), *name) == path_names.end()) {
      return invalid(key, fmt::format("unknown path '{}'; accepted: shm, rdma, tcp, relay{}", *name,
                                      did_you_mean(*name, path_names)));
    }
    if (std::find(out.begin(), out.end(), *name) != out.end()) {
      return invalid(key, fmt::format("path '{}' is listed twice", *name));
    }
    out.push_back(*name);
  }
  if (std::find(out.begin(), out.end(), "tcp") == out.end()) {
    return invalid(key, "must name \"tcp\": relays and RDMA set-up start from direct TCP links");
  }
  return out;
}

result<std::string> read_rdma_device(const toml::node& value, const key_ref& key) {
  auto name = read_string(value, key);
  if (!name) return name;
  if (*name == "auto" || *name == "off" || *name == "soft") return name;
  return invalid(key, fmt::format("unknown device '{}'; accepted: auto, off, soft", *name));
}

/// A duration that may be zero ("0ms").
result<microseconds> read_delay(const toml::node& value, const key_ref& key) {
  const auto* s = value.as_string();
  if (s == nullptr) return must_be(key, "a duration (a string with a unit us, ms, s, m or h, such as \"5ms\")", value);
  auto parsed = parse_duration(s->get());
  if (!parsed) return invalid(key, parsed.error().message());
  return *parsed;
}

result<std::uint64_t> read_count(const toml::node& value, const key_ref& key) {
  auto n = read_integer(value, key, 0, std::numeric_limits<std::int64_t>::max());
  if (!n) return std::move(n).error();
  return static_cast<std::uint64_t>(*n);
}

/// [owner.gpu] devices: a non-empty array of distinct device ordinals.
result<std::vector<std::uint32_t>> read_gpu_devices(const toml::node& value, const key_ref& key) {
  const auto* list = value.as_array();
  if (list == nullptr) return must_be(key, "an array of CUDA device ordinals such as [0, 1]", value);
  std::vector<std::uint32_t> out;
  for (const auto& item : *list) {
    auto n = read_integer(item, key, 0, gpu_ordinal_max);
    if (!n) return std::move(n).error();
    auto ordinal = static_cast<std::uint32_t>(*n);
    if (std::find(out.begin(), out.end(), ordinal) != out.end()) {
      return invalid(key, fmt::format("device {} is listed twice", ordinal));
    }
    out.push_back(ordinal);
  }
  if (out.empty()) return invalid(key, "must name at least one device; leave [owner.gpu] out for no GPU pools");
  return out;
}

// Readers with the bounds of one key, so the schema below stays one line a key.
result<std::uint64_t> read_nonzero_size(const toml::node& value, const key_ref& key) {
  return read_size(value, key, 1);
}
/// A size that may be 0 (what it bounds is then off).
result<std::uint64_t> read_any_size(const toml::node& value, const key_ref& key) {
  return read_size(value, key, 0);
}
result<std::uint64_t> read_envelope_size(const toml::node& value, const key_ref& key) {
  return read_size(value, key, envelope_bytes_min);
}
/// An array of "NAME=DIR" strings: the buckets [s3] exports.
result<std::vector<std::string>> read_bucket_list(const toml::node& value, const key_ref& key) {
  const auto* list = value.as_array();
  if (list == nullptr) return must_be(key, "an array of \"NAME=DIR\" strings", value);
  std::vector<std::string> out;
  for (const auto& item : *list) {
    auto spec = read_string(item, key);
    if (!spec) return std::move(spec).error();
    auto eq = spec->find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec->size()) {
      return invalid(key, fmt::format("a bucket is \"NAME=DIR\", found \"{}\"", *spec));
    }
    out.push_back(*spec);
  }
  return out;
}
result<std::uint64_t> read_s3_chunk_bytes(const toml::node& value, const key_ref& key) {
  constexpr std::uint64_t min_bytes = 64 << 10;
  constexpr std::uint64_t max_bytes = 64 << 20;
  auto bytes = read_size(value, key, min_bytes);
  if (bytes && *bytes > max_bytes) return invalid(key, fmt::format("at most 64MiB, found {}", *bytes));
  return bytes;
}
/// An array of bucket names ("*": every bucket).
result<std::vector<std::string>> read_bucket_names(const toml::node& value, const key_ref& key) {
  const auto* list = value.as_array();
  if (list == nullptr) return must_be(key, "an array of bucket names", value);
  std::vector<std::string> out;
  for (const auto& item : *list) {
    auto name = read_string(item, key);
    if (!name) return std::move(name).error();
    if (name->empty()) return invalid(key, "a bucket name is empty");
    out.push_back(*name);
  }
  return out;
}
result<std::uint64_t> read_s3_copies(const toml::node& value, const key_ref& key) {
  auto n = read_integer(value, key, 1, 255);
  if (!n) return std::move(n).error();
  return static_cast<std::uint64_t>(*n);
}
result<std::uint64_t> read_s3_dirty_objects(const toml::node& value, const key_ref& key) {
  auto n = read_integer(value, key, 1, 10'000'000);
  if (!n) return std::move(n).error();
  return static_cast<std::uint64_t>(*n);
}
result<std::int64_t> read_s3_threads(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, 1, 64);
}
result<std::int64_t> read_s3_connections(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, 1, 65536);
}

result<std::int64_t> read_seed(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, 0, std::numeric_limits<std::int64_t>::max());
}
result<std::int64_t> read_threads(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, threads_min, threads_max);
}
result<std::uint64_t> read_chunk_size(const toml::node& value, const key_ref& key) {
  return read_size(value, key, transfer_chunk_bytes_min);
}
result<std::uint64_t> read_gpu_capacity(const toml::node& value, const key_ref& key) {
  return read_size(value, key, gpu_capacity_bytes_min);
}
result<std::int64_t> read_repair_concurrency(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, 1, repair_concurrency_max);
}
result<std::int64_t> read_window(const toml::node& value, const key_ref& key) {
  return read_integer(value, key, 1, transfer_window_max);
}

// ---- The schema: one table per section ------------------------------------

using apply_fn = result<void> (*)(const toml::node&, const key_ref&, node_config&);

struct key_spec {
  std::string_view name;  // as written in TOML
  apply_fn apply;
};

struct section_spec {
  std::string_view name;
  std::span<const key_spec> keys;
};

/// Reads one value with `read` and stores it in `config.*section.*member`.
/// The readers have already bounded the value, so the cast cannot lose it.
template <auto section, auto member, auto read>
result<void> store(const toml::node& value, const key_ref& key, node_config& config) {
  auto read_value = read(value, key);
  if (!read_value) return std::move(read_value).error();
  auto& field = config.*section.*member;
  field = static_cast<std::remove_reference_t<decltype(field)>>(std::move(read_value).value());
  return {};
}

/// The same, for a key of a table inside a section ([owner.gpu]).
template <auto section, auto table, auto member, auto read>
result<void> store(const toml::node& value, const key_ref& key, node_config& config) {
  auto read_value = read(value, key);
  if (!read_value) return std::move(read_value).error();
  auto& field = config.*section.*table.*member;
  field = static_cast<std::remove_reference_t<decltype(field)>>(std::move(read_value).value());
  return {};
}

// Sizes drop the _bytes suffix in TOML: the unit is written in the value.
constexpr key_spec node_keys[] = {
    {"name", store<&node_config::node, &node_section::name, read_string>},
    {"listen", store<&node_config::node, &node_section::listen, read_string>},
    {"advertise", store<&node_config::node, &node_section::advertise, read_string>},
    {"seed", store<&node_config::node, &node_section::seed, read_seed>},
    {"threads", store<&node_config::node, &node_section::threads, read_threads>},
};
constexpr key_spec wire_keys[] = {
    {"max_envelope",
     store<&node_config::wire, &wire_section::max_envelope_bytes, read_envelope_size>},
    {"max_payload", store<&node_config::wire, &wire_section::max_payload_bytes, read_nonzero_size>},
};
constexpr key_spec master_keys[] = {
    {"heartbeat_interval",
     store<&node_config::master, &master_section::heartbeat_interval, read_duration>},
    {"heartbeat_timeout",
     store<&node_config::master, &master_section::heartbeat_timeout, read_duration>},
    {"placement", store<&node_config::master, &master_section::placement, read_placement>},
    {"data_dir", store<&node_config::master, &master_section::data_dir, read_string>},
    {"fsync", store<&node_config::master, &master_section::fsync, read_bool>},
    {"mq_orphan_grace", store<&node_config::master, &master_section::mq_orphan_grace, read_duration>},
    {"repair_after", store<&node_config::master, &master_section::repair_after, read_duration>},
    {"repair_rate", store<&node_config::master, &master_section::repair_rate_bytes, read_nonzero_size>},
    {"repair_concurrency",
     store<&node_config::master, &master_section::repair_concurrency, read_repair_concurrency>},
};
constexpr key_spec owner_keys[] = {
    {"master", store<&node_config::owner, &owner_section::master, read_string>},
    {"capacity", store<&node_config::owner, &owner_section::capacity_bytes, read_nonzero_size>},
    {"max_value", store<&node_config::owner, &owner_section::max_value_bytes, read_nonzero_size>},
    {"reconnect_interval",
     store<&node_config::owner, &owner_section::reconnect_interval, read_duration>},
    {"shm", store<&node_config::owner, &owner_section::shm, read_string>},
    {"segment", store<&node_config::owner, &owner_section::segment_bytes, read_nonzero_size>},
    {"huge_pages", store<&node_config::owner, &owner_section::huge_pages, read_bool>},
    {"prefault", store<&node_config::owner, &owner_section::prefault, read_prefault>},
    {"eviction", store<&node_config::owner, &owner_section::eviction, read_eviction>},
    {"evict_high", store<&node_config::owner, &owner_section::evict_high_percent, read_percent>},
    {"evict_low", store<&node_config::owner, &owner_section::evict_low_percent, read_percent>},
    {"client_timeout", store<&node_config::owner, &owner_section::client_timeout, read_duration>},
    {"fast_puts", store<&node_config::owner, &owner_section::fast_puts, read_bool>},
    {"commit_report_delay", store<&node_config::owner, &owner_section::commit_report_delay, read_duration>},
    {"transfer_chunk", store<&node_config::owner, &owner_section::transfer_chunk_bytes, read_chunk_size>},
    {"transfer_window", store<&node_config::owner, &owner_section::transfer_window, read_window>},
    {"transfer_piece_timeout", store<&node_config::owner, &owner_section::transfer_piece_timeout, read_duration>},
    {"cache_remote", store<&node_config::owner, &owner_section::cache_remote, read_bool>},
    {"mq_prefetch", store<&node_config::owner, &owner_section::mq_prefetch_bytes, read_any_size>},
};
/// [owner.gpu]: a table inside [owner]; writing it turns GPU pools on.
constexpr key_spec owner_gpu_keys[] = {
    {"devices", store<&node_config::owner, &owner_section::gpu, &gpu_section::devices, read_gpu_devices>},
    {"capacity", store<&node_config::owner, &owner_section::gpu, &gpu_section::capacity_bytes, read_gpu_capacity>},
};
constexpr key_spec links_keys[] = {
    {"order", store<&node_config::links, &links_section::order, read_path_order>},
    {"timeout", store<&node_config::links, &links_section::timeout, read_duration>},
    {"retry", store<&node_config::links, &links_section::retry, read_duration>},
    {"retry_max", store<&node_config::links, &links_section::retry_max, read_duration>},
};
constexpr key_spec rdma_keys[] = {
    {"device", store<&node_config::rdma, &rdma_section::device, read_rdma_device>},
    {"soft_fail_read", store<&node_config::rdma, &rdma_section::soft_fail_read, read_count>},
    {"soft_read_delay", store<&node_config::rdma, &rdma_section::soft_read_delay, read_delay>},
};
constexpr key_spec client_keys[] = {
    {"request_timeout",
     store<&node_config::client, &client_section::request_timeout, read_duration>},
    {"keepalive", store<&node_config::client, &client_section::keepalive, read_duration>},
};
constexpr key_spec s3_keys[] = {
    {"listen", store<&node_config::s3, &s3_section::listen, read_string>},
    {"buckets", store<&node_config::s3, &s3_section::buckets, read_bucket_list>},
    {"root", store<&node_config::s3, &s3_section::root, read_string>},
    {"anonymous", store<&node_config::s3, &s3_section::anonymous, read_bool>},
    {"access_key", store<&node_config::s3, &s3_section::access_key, read_string>},
    {"secret_key", store<&node_config::s3, &s3_section::secret_key, read_string>},
    {"users", store<&node_config::s3, &s3_section::users, read_string>},
    {"domain", store<&node_config::s3, &s3_section::domain, read_string>},
    {"region", store<&node_config::s3, &s3_section::region, read_string>},
    {"cache", store<&node_config::s3, &s3_section::cache, read_bool>},
    {"owner", store<&node_config::s3, &s3_section::owner, read_string>},
    {"chunk_bytes", store<&node_config::s3, &s3_section::chunk_bytes, read_s3_chunk_bytes>},
    {"threads", store<&node_config::s3, &s3_section::threads, read_s3_threads>},
    {"connections_max", store<&node_config::s3, &s3_section::connections_max, read_s3_connections>},
    {"request_timeout", store<&node_config::s3, &s3_section::request_timeout, read_duration>},
    {"idle_timeout", store<&node_config::s3, &s3_section::idle_timeout, read_duration>},
    {"write_back", store<&node_config::s3, &s3_section::write_back, read_bucket_names>},
    {"journal", store<&node_config::s3, &s3_section::journal, read_string>},
    {"write_back_copies", store<&node_config::s3, &s3_section::write_back_copies, read_s3_copies>},
    {"flush_delay", store<&node_config::s3, &s3_section::flush_delay, read_duration>},
    {"dirty_bytes_max", store<&node_config::s3, &s3_section::dirty_bytes_max, read_nonzero_size>},
    {"dirty_objects_max", store<&node_config::s3, &s3_section::dirty_objects_max, read_s3_dirty_objects>},
};
constexpr key_spec log_keys[] = {
    {"level", store<&node_config::log, &log_section::level, read_log_level>},
};

constexpr section_spec sections[] = {
    {"node", node_keys},   {"wire", wire_keys},     {"master", master_keys},
    {"owner", owner_keys}, {"links", links_keys},   {"client", client_keys},
    {"log", log_keys},     {"rdma", rdma_keys},     {"s3", s3_keys},
};

/// A table inside a section, such as [owner.gpu]: writing it (even empty)
/// is what `enable` records.
struct nested_spec {
  std::string_view parent;
  std::string_view name;
  section_spec section;
  void (*enable)(node_config&);
};

constexpr nested_spec nested_sections[] = {
    {"owner", "gpu", {"owner.gpu", owner_gpu_keys}, [](node_config& c) { c.owner.gpu.enabled = true; }},
};

const nested_spec* find_nested(std::string_view parent, std::string_view name) {
  for (const auto& n : nested_sections) {
    if (n.parent == parent && n.name == name) return &n;
  }
  return nullptr;
}

const section_spec* find_section(std::string_view name) {
  for (const auto& s : sections) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

const key_spec* find_key(const section_spec& section, std::string_view name) {
  for (const auto& k : section.keys) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::vector<std::string_view> key_names(const section_spec& section) {
  std::vector<std::string_view> out;
  for (const auto& k : section.keys) out.push_back(k.name);
  for (const auto& n : nested_sections) {
    if (n.parent == section.name) out.push_back(n.name);
  }
  return out;
}

// ---- Unknown names ---------------------------------------------------------

/// The key nearest to `name` in any section but `except`, as "section.key":
/// for a key written in the wrong section or outside any section.
std::optional<std::string> nearest_elsewhere(std::string_view name, std::string_view except) {
  std::optional<std::string> best;
  std::size_t best_distance = suggestion_distance_max + 1;
  for (const auto& s : sections) {
    if (s.name == except) continue;
    for (const auto& k : s.keys) {
      std::size_t d = edit_distance(name, k.name);
      if (d < best_distance) {
        best = fmt::format("{}.{}", s.name, k.name);
        best_distance = d;
      }
    }
  }
  return best;
}

error unknown_key(std::string_view source, const section_spec& section, const toml::key& key) {
  auto names = key_names(section);
  std::string hint;
  if (auto near = closest(key.str(), names)) {
    hint = fmt::format("; did you mean '{}.{}'?", section.name, *near);
  } else if (auto moved = nearest_elsewhere(key.str(), section.name)) {
    hint = fmt::format("; did you mean '{}'?", *moved);
  } else {
    hint = fmt::format("; the keys of [{}] are: {}", section.name, fmt::join(names, ", "));
  }
  return fail(errc::invalid_argument,
              fmt::format("{}unknown key '{}.{}'{}", location(source, key.source().begin),
                          section.name, key.str(), hint));
}

/// A top-level name that is not a section: a misspelt section, or a key
/// written outside its section.
error unknown_top_level(std::string_view source, const toml::key& key, const toml::node& value) {
  std::vector<std::string_view> names;
  for (const auto& s : sections) names.push_back(s.name);
  auto where = location(source, key.source().begin);
  if (value.is_table()) {
    // A [section] header's own region starts at its '['; the key's, after it.
    if (value.source().begin.line != 0) where = location(source, value.source().begin);
    auto hint = did_you_mean(key.str(), names);
    if (hint.empty()) hint = fmt::format("; the sections are: {}", fmt::join(names, ", "));
    return fail(errc::invalid_argument,
                fmt::format("{}unknown section '{}'{}", where, key.str(), hint));
  }
  auto moved = nearest_elsewhere(key.str(), "");
  std::string hint = moved ? fmt::format("; did you mean '{}'?", *moved) : std::string{};
  return fail(errc::invalid_argument,
              fmt::format("{}unknown key '{}': every key belongs to a section ({}){}", where,
                          key.str(), fmt::join(names, ", "), hint));
}

// ---- Walking the document ------------------------------------------------

result<void> apply_section(std::string_view source, const section_spec& section,
                           const toml::table& table, node_config& out);

result<void> apply_nested(std::string_view source, const nested_spec& nested, const toml::key& key,
                          const toml::node& value, node_config& out) {
  const auto* table = value.as_table();
  if (table == nullptr) {
    key_ref ref{source, std::string(nested.section.name), key.source().begin};
    return must_be(ref, fmt::format("a table (a [{}] section)", nested.section.name), value);
  }
  nested.enable(out);
  return apply_section(source, nested.section, *table, out);
}

result<void> apply_section(std::string_view source, const section_spec& section,
                           const toml::table& table, node_config& out) {
  for (auto&& [key, value] : table) {
    if (const nested_spec* nested = find_nested(section.name, key.str())) {
      if (auto applied = apply_nested(source, *nested, key, value, out); !applied) return applied;
      continue;
    }
    const key_spec* spec = find_key(section, key.str());
    if (spec == nullptr) return unknown_key(source, section, key);
    key_ref ref{source, fmt::format("{}.{}", section.name, key.str()), value.source().begin};
    if (auto applied = spec->apply(value, ref, out); !applied) return applied;
  }
  return {};
}

result<void> apply_document(std::string_view source, const toml::table& doc, node_config& out) {
  for (auto&& [key, value] : doc) {
    const section_spec* section = find_section(key.str());
    if (section == nullptr) return unknown_top_level(source, key, value);
    const auto* table = value.as_table();
    if (table == nullptr) {
      key_ref ref{source, std::string(key.str()), key.source().begin};
      return must_be(ref, fmt::format("a table (a [{}] section)", key.str()), value);
    }
    if (auto applied = apply_section(source, *section, *table, out); !applied) return applied;
  }
  return {};
}

// ---- Rules that span keys -------------------------------------------------

/// The position of the first of `paths` written in the document.
toml::source_position position_of(const toml::table& doc,
                                  std::initializer_list<std::string_view> paths) {
  for (auto path : paths) {
    if (const auto* n = toml::at_path(doc, path).node()) return n->source().begin;
  }
  return {};
}

result<void> check_across_keys(std::string_view source, const toml::table& doc,
                               const node_config& c) {
  if (c.master.heartbeat_timeout <= c.master.heartbeat_interval) {
    auto at = position_of(doc, {"master.heartbeat_timeout", "master.heartbeat_interval"});
    return fail(
        errc::invalid_argument,
        fmt::format(
            "{}master.heartbeat_timeout ({}) must be greater than master.heartbeat_interval "
            "({}); otherwise a healthy owner is marked down between two heartbeats",
            location(source, at), format_duration(c.master.heartbeat_timeout),
            format_duration(c.master.heartbeat_interval)));
  }
  if (c.owner.evict_low_percent >= c.owner.evict_high_percent) {
    auto at = position_of(doc, {"owner.evict_low", "owner.evict_high"});
    return fail(errc::invalid_argument,
                fmt::format("{}owner.evict_low ({}%) must be below owner.evict_high ({}%): the owner evicts "
                            "from the high mark down to the low one",
                            location(source, at), c.owner.evict_low_percent, c.owner.evict_high_percent));
  }
  if (c.owner.max_value_bytes > c.wire.max_payload_bytes) {
    auto at = position_of(doc, {"owner.max_value", "wire.max_payload"});
    return fail(
        errc::invalid_argument,
        fmt::format("{}owner.max_value ({}) must not exceed wire.max_payload ({}); a larger value "
                    "could never be sent in one frame",
                    location(source, at), format_size(c.owner.max_value_bytes),
                    format_size(c.wire.max_payload_bytes)));
  }
  if (c.links.retry_max < c.links.retry) {
    auto at = position_of(doc, {"links.retry_max", "links.retry"});
    return fail(errc::invalid_argument,
                fmt::format("{}links.retry_max ({}) must not be below links.retry ({}): the wait between retries "
                            "grows from retry up to retry_max",
                            location(source, at), format_duration(c.links.retry_max), format_duration(c.links.retry)));
  }
  if (c.owner.transfer_chunk_bytes > c.wire.max_payload_bytes) {
    auto at = position_of(doc, {"owner.transfer_chunk", "wire.max_payload"});
    return fail(errc::invalid_argument,
                fmt::format("{}owner.transfer_chunk ({}) must not exceed wire.max_payload ({}); each piece "
                            "travels as one frame",
                            location(source, at), format_size(c.owner.transfer_chunk_bytes),
                            format_size(c.wire.max_payload_bytes)));
  }
  return {};
}

// ---- Input -----------------------------------------------------------------

result<toml::table> parse_toml(std::string_view text, std::string_view source) {
  // toml++ reports syntax errors by exception; this is the boundary where
  // they become values.
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    return fail(
        errc::invalid_argument,
        fmt::format("{}invalid TOML: {}", location(source, e.source().begin), e.description()));
  }
}

result<std::string> read_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    return fail(errc::not_found, fmt::format("config file '{}' not found", path));
  }
  if (ec) {
    return fail(errc::invalid_argument,
                fmt::format("config file '{}' cannot be read: {}", path, ec.message()));
  }
  if (fs::is_directory(status)) {
    return fail(errc::invalid_argument,
                fmt::format("config file '{}' is a directory; give the path of a TOML file", path));
  }
  auto size = fs::file_size(path, ec);
  if (!ec && size > config_file_bytes_max) {
    return fail(errc::invalid_argument,
                fmt::format("config file '{}' is {}, more than the {} a config file may be; "
                            "is it the right file?",
                            path, format_size(size), format_size(config_file_bytes_max)));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    auto why = std::generic_category().message(errno);
    return fail(errc::invalid_argument,
                fmt::format("config file '{}' cannot be read: {}", path, why));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return fail(errc::invalid_argument, fmt::format("config file '{}' cannot be read", path));
  }
  return std::move(text).str();
}

}  // namespace

result<node_config> load_config_string(std::string_view text, std::string_view source) {
  auto doc = parse_toml(text, source);
  if (!doc) return std::move(doc).error();
  node_config config;
  if (auto applied = apply_document(source, *doc, config); !applied) return applied.error();
  if (auto checked = check_across_keys(source, *doc, config); !checked) return checked.error();
  return config;
}

result<node_config> load_config_file(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::move(text).error();
  return load_config_string(*text, path);
}

result<placement_policy> parse_placement(std::string_view text) {
  if (text == "local-first") return placement_policy::local_first;
  if (text == "random") return placement_policy::random;
  if (text == "most-free") return placement_policy::most_free;
  return fail(errc::invalid_argument,
              fmt::format("unknown placement policy '{}'; accepted: local-first, random, most-free{}", text,
                          did_you_mean(text, placement_names)));
}

std::string_view to_string(placement_policy p) noexcept {
  switch (p) {
    case placement_policy::local_first: return "local-first";
    case placement_policy::random: return "random";
    case placement_policy::most_free: return "most-free";
  }
  return "unknown";
}

}  // namespace sluice
