#include "runtime/units.hpp"

#include <array>
#include <charconv>
#include <limits>
#include <optional>
#include <system_error>

#include <fmt/format.h>

namespace sluice {
namespace {

struct unit {
  std::string_view name;
  std::uint64_t factor;
};

constexpr std::uint64_t kib = 1ULL << 10;
constexpr std::uint64_t mib = 1ULL << 20;
constexpr std::uint64_t gib = 1ULL << 30;
constexpr std::uint64_t tib = 1ULL << 40;

constexpr std::array<unit, 9> size_units{{
    {"B", 1},
    {"KiB", kib},
    {"MiB", mib},
    {"GiB", gib},
    {"TiB", tib},
    {"KB", 1'000ULL},
    {"MB", 1'000'000ULL},
    {"GB", 1'000'000'000ULL},
    {"TB", 1'000'000'000'000ULL},
}};

// Factors are in microseconds, the resolution of every duration we keep.
constexpr std::array<unit, 5> duration_units{{
    {"us", 1},
    {"ms", 1'000},
    {"s", 1'000'000},
    {"m", 60'000'000},
    {"h", 3'600'000'000ULL},
}};

/// What the error messages say about one kind of quantity.
struct quantity_kind {
  std::string_view name;
  std::string_view units_text;
  std::string_view fraction_example;
};

constexpr quantity_kind size_kind{"size", "B, KiB, MiB, GiB, TiB, KB, MB, GB, TB",
                                  "'1536MiB' rather than '1.5GiB'"};
constexpr quantity_kind duration_kind{"duration", "us, ms, s, m, h", "'1500ms' rather than '1.5s'"};

/// A quantity as written: the digits and what follows them.
struct quantity {
  std::uint64_t number;
  std::string_view unit;  // empty when none was written
};

template <std::size_t n>
std::optional<std::uint64_t> find_factor(const std::array<unit, n>& units, std::string_view name) {
  for (const auto& u : units) {
    if (u.name == name) return u.factor;
  }
  return std::nullopt;
}

/// Splits "512 MiB" into 512 and "MiB"; `kind` only shapes the messages.
result<quantity> split_quantity(std::string_view text, const quantity_kind& kind) {
  auto bad = [&](std::string_view why) {
    return fail(errc::invalid_argument, fmt::format("invalid {} '{}': {}", kind.name, text, why));
  };
  if (text.empty()) return bad("it is empty; write a whole number followed by a unit");
  if (text.front() == '-') return bad("it is negative; only values of zero or more are accepted");
  const char* first = text.data();
  const char* last = first + text.size();
  std::uint64_t number = 0;
  auto [end, ec] = std::from_chars(first, last, number);
  if (ec == std::errc::invalid_argument) return bad("it does not start with a whole number");
  if (ec == std::errc::result_out_of_range) return bad("the number is too large");
  std::string_view rest{end, static_cast<std::size_t>(last - end)};
  if (!rest.empty() && (rest.front() == '.' || rest.front() == ',')) {
    return bad(
        fmt::format("fractions are not accepted; use a whole number of a smaller unit "
                    "(e.g. {})",
                    kind.fraction_example));
  }
  if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  if (rest.empty() && end != last) {
    return bad(fmt::format("a unit must follow the space; accepted units: {}", kind.units_text));
  }
  return quantity{number, rest};
}

/// number * factor, or nothing when the product does not fit in `limit`.
std::optional<std::uint64_t> scale(std::uint64_t number, std::uint64_t factor,
                                   std::uint64_t limit) {
  if (number > limit / factor) return std::nullopt;
  return number * factor;
}

}  // namespace

result<std::uint64_t> parse_size(std::string_view text) {
  auto q = split_quantity(text, size_kind);
  if (!q) return std::move(q).error();
  std::uint64_t factor = 1;
  if (!q->unit.empty()) {
    auto found = find_factor(size_units, q->unit);
    if (!found) {
      return fail(errc::invalid_argument,
                  fmt::format("invalid size '{}': unknown unit '{}'; accepted units: {}", text,
                              q->unit, size_kind.units_text));
    }
    factor = *found;
  }
  auto bytes = scale(q->number, factor, std::numeric_limits<std::uint64_t>::max());
  if (!bytes) {
    return fail(errc::invalid_argument,
                fmt::format("invalid size '{}': it is larger than 2^64 - 1 bytes", text));
  }
  return *bytes;
}

result<std::chrono::microseconds> parse_duration(std::string_view text) {
  auto q = split_quantity(text, duration_kind);
  if (!q) return std::move(q).error();
  if (q->unit.empty()) {
    return fail(errc::invalid_argument,
                fmt::format("invalid duration '{}': a unit is required ({}), e.g. '500ms' or '3s'",
                            text, duration_kind.units_text));
  }
  auto factor = find_factor(duration_units, q->unit);
  if (!factor) {
    return fail(errc::invalid_argument,
                fmt::format("invalid duration '{}': unknown unit '{}'; accepted units: {}", text,
                            q->unit, duration_kind.units_text));
  }
  using rep = std::chrono::microseconds::rep;
  auto us = scale(q->number, *factor, static_cast<std::uint64_t>(std::numeric_limits<rep>::max()));
  if (!us) {
    return fail(errc::invalid_argument,
                fmt::format("invalid duration '{}': it is too long to represent", text));
  }
  return std::chrono::microseconds{static_cast<rep>(*us)};
}

std::string format_size(std::uint64_t bytes) {
  // The largest binary unit not above the value, so the number shown is
  // at least 1. Fractions are truncated to one decimal, never rounded up:
  // a capacity shown as "1.9 GiB" is never really 1.89 GiB shown as "1.9".
  static constexpr std::array<unit, 5> binary{
      {{"TiB", tib}, {"GiB", gib}, {"MiB", mib}, {"KiB", kib}, {"B", 1}}};
  for (const auto& u : binary) {
    if (bytes < u.factor) continue;
    std::uint64_t whole = bytes / u.factor;
    std::uint64_t rest = bytes % u.factor;
    if (rest == 0) return fmt::format("{} {}", whole, u.name);
    // rest < 2^40, so rest * 10 cannot overflow.
    return fmt::format("{}.{} {}", whole, rest * 10 / u.factor, u.name);
  }
  return "0 B";
}

std::string format_duration(std::chrono::microseconds d) {
  if (d.count() == 0) return "0s";
  std::string out;
  // The magnitude as unsigned, so the most negative value has one too.
  auto count = d.count();
  std::uint64_t left =
      count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
  if (count < 0) out += '-';
  // Largest unit first: 90s → "1m30s", 1500ms → "1s500ms".
  for (auto it = duration_units.rbegin(); it != duration_units.rend(); ++it) {
    std::uint64_t n = left / it->factor;
    if (n == 0) continue;
    out += fmt::format("{}{}", n, it->name);
    left -= n * it->factor;
  }
  return out;
}

}  // namespace sluice
