// Logs of a simulated cluster: every line starts with the virtual time and
// the node whose step wrote it, so a run's log reads in the order of its
// trace (wall-clock stamps say nothing in a simulation).
#pragma once

#include <memory>
#include <string_view>

#include <spdlog/sinks/sink.h>

#include "sim/time.hpp"

namespace sluice::sim {

/// A stderr sink whose lines read "12.345678s owner-1 info [owner] ...".
std::shared_ptr<spdlog::sinks::sink> make_log_sink();

/// While alive, log lines name `node` and `now` (the world sets one around
/// each step it runs). Scopes nest; the outer one comes back after.
class log_scope {
 public:
  log_scope(sim_time now, std::string_view node);
  ~log_scope();
  log_scope(const log_scope&) = delete;
  log_scope& operator=(const log_scope&) = delete;

 private:
  sim_time now_;
  std::string_view node_;
};

}  // namespace sluice::sim
