// Virtual time in the simulator: the actor clock's time point, starting at
// the epoch, shared by every node of a world.
#pragma once

#include <chrono>
#include <string>

#include "actors/common/endpoint.hpp"

namespace sluice::sim {

using sim_time = clock_time;
using sim_duration = clock_duration;
using namespace std::chrono_literals;

/// Seconds since the epoch, for reports: "12.345678s".
std::string format_time(sim_time t);

inline double seconds(sim_duration d) {
  return std::chrono::duration<double>(d).count();
}

template <class Rep, class Period>
sim_duration as_sim(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration_cast<sim_duration>(d);
}

}  // namespace sluice::sim
