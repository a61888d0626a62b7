// Reading node configuration from TOML with strict validation: unknown
// sections and keys are rejected (with a suggestion when one is close),
// wrong types and out-of-range values are rejected, and every error names
// the file, the key and, where known, the line.
#pragma once

#include <string>
#include <string_view>

#include "runtime/config/node_config.hpp"
#include "sluice/result.hpp"

namespace sluice {

/// Parses `text` (TOML). `source` names it in error messages (a path, or
/// "<string>"). Keys absent from the text keep their defaults.
result<node_config> load_config_string(std::string_view text, std::string_view source = "<string>");

/// Reads and parses the file at `path`.
result<node_config> load_config_file(const std::string& path);

/// Parses a placement policy name ("local-first", "random").
result<placement_policy> parse_placement(std::string_view text);
std::string_view to_string(placement_policy p) noexcept;

}  // namespace sluice
