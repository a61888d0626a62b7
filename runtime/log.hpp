// Logging: spdlog loggers, one per component, named ("master", "owner",
// "tcp", ...). Library code asks for a logger by name and never changes
// global settings; whoever builds the process (the launcher, a test, the
// simulator) decides level and destination with configure_logging().
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/logger.h>

#include "sluice/result.hpp"

namespace sluice {

using logger_ptr = std::shared_ptr<spdlog::logger>;

/// The logger named `name`, created on first use with the process's
/// current sinks and level. Thread-safe.
logger_ptr get_logger(std::string_view name);

/// Sets the level of every Sluice logger, existing and future.
/// Levels: trace, debug, info, warn, error, off.
result<void> configure_logging(std::string_view level);

/// Sends every Sluice logger's output to `sink` from now on, in the sink's
/// own format (tests and the simulator capture or silence logs this way).
/// nullptr restores stderr.
void set_log_sink(std::shared_ptr<spdlog::sinks::sink> sink);

}  // namespace sluice
