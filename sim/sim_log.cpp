#include "sim/sim_log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "sim/trace.hpp"

namespace sluice::sim {
namespace {

// The simulator runs on one thread; a scope is that thread's.
thread_local sim_time scope_now{};
thread_local std::string_view scope_node{"world"};

class virtual_stamp final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    auto text = format_time(scope_now) + " " + std::string{scope_node};
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<virtual_stamp>(); }
};

}  // namespace

std::shared_ptr<spdlog::sinks::sink> make_log_sink() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  formatter->add_flag<virtual_stamp>('*').set_pattern("%* %l [%n] %v");
  sink->set_formatter(std::move(formatter));
  return sink;
}

log_scope::log_scope(sim_time now, std::string_view node) : now_(scope_now), node_(scope_node) {
  scope_now = now;
  scope_node = node;
}

log_scope::~log_scope() {
  scope_now = now_;
  scope_node = node_;
}

}  // namespace sluice::sim
