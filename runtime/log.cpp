#include "runtime/log.hpp"

#include <mutex>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace sluice {
namespace {

// The one place that knows every logger Sluice made, so level and sink
// changes reach all of them. Guarded by its mutex; loggers themselves are
// thread-safe.
struct log_registry {
  std::mutex mutex;
  std::vector<logger_ptr> loggers;
  spdlog::sink_ptr sink;
  spdlog::level::level_enum level = spdlog::level::info;
};

log_registry& registry() {
  static log_registry r;
  return r;
}

spdlog::sink_ptr default_sink() {
  auto sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  sink->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
  return sink;
}

}  // namespace

logger_ptr get_logger(std::string_view name) {
  auto& r = registry();
  std::lock_guard guard{r.mutex};
  for (auto& l : r.loggers) {
    if (l->name() == name) return l;
  }
  if (!r.sink) r.sink = default_sink();
  auto l = std::make_shared<spdlog::logger>(std::string{name}, r.sink);
  l->set_level(r.level);
  // The sink formats (set_log_sink keeps the format of the sink it is given).
  r.loggers.push_back(l);
  return l;
}

result<void> configure_logging(std::string_view level) {
  auto parsed = spdlog::level::from_str(std::string{level});
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (parsed == spdlog::level::off && level != "off") {
    return fail(errc::invalid_argument,
                "unknown log level '" + std::string{level} +
                    "'; use trace, debug, info, warn, error or off");
  }
  auto& r = registry();
  std::lock_guard guard{r.mutex};
  r.level = parsed;
  for (auto& l : r.loggers) l->set_level(parsed);
  return {};
}

void set_log_sink(std::shared_ptr<spdlog::sinks::sink> sink) {
  auto& r = registry();
  std::lock_guard guard{r.mutex};
  r.sink = sink ? std::move(sink) : default_sink();
  for (auto& l : r.loggers) {
    l->sinks().clear();
    l->sinks().push_back(r.sink);
  }
}

}  // namespace sluice
