// Sizes and durations as people write them: "512MiB", "4GiB", "500ms", "3s".
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "sluice/result.hpp"

namespace sluice {

/// Parses a byte size: a non-negative integer with an optional unit
/// B, KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of
/// 1000), case-sensitive, optional space between number and unit.
/// Errors (invalid_argument) name the text and say what is accepted.
result<std::uint64_t> parse_size(std::string_view text);

/// Parses a duration: a non-negative integer with a unit us, ms, s, m, h.
/// A unit is required: "500" is rejected because it is ambiguous.
result<std::chrono::microseconds> parse_duration(std::string_view text);

/// "512 MiB", "1.5 GiB", "17 B": for logs and status output.
std::string format_size(std::uint64_t bytes);
/// "500ms", "3s", "1m30s".
std::string format_duration(std::chrono::microseconds d);

}  // namespace sluice
