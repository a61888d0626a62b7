// How many CPUs this thread may run on: its affinity, as taskset or a
// cgroup's cpuset sets it. For sizing thread pools: more threads than
// CPUs only hand work from thread to thread.
#pragma once

#include <sched.h>

namespace sluice {

/// The CPUs in this thread's affinity mask; `unknown` when it cannot be read.
inline int cpus_allowed(int unknown) {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  return ::sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : unknown;
}

}  // namespace sluice
