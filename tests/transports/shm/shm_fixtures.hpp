// What the shm transport's tests share: socket names of their own, an
// owner's server options with small rings (and the pool handed to its
// clients), payloads that count their release.
#pragma once

#include <unistd.h>

#include <atomic>
#include <memory>
#include <span>
#include <string>

#include "runtime/memory/pool.hpp"
#include "transports/shm/shm_server.hpp"

namespace sluice::transport::testing {

/// An abstract socket name no other test (or process) uses.
inline std::string unique_name(const char* stem) {
  static std::atomic<int> counter{0};
  return "@sluice-test-" + std::string{stem} + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter++);
}

inline shm_server_options small_rings() {
  shm_server_options o;
  o.ring_bytes = 1u << 20;
  return o;
}

/// small_rings() handing clients the pool's first segment.
inline shm_server_options rings_with_pool(const pool& p) {
  auto o = small_rings();
  o.segments.push_back({p.segment_at(0).fd(), p.segment_at(0).size_bytes(), p.segment_at(0).base()});
  return o;
}

/// `bytes` as a payload that counts in `released` when its last copy goes.
inline shared_bytes counted(std::span<std::byte> bytes, std::atomic<int>& released) {
  std::shared_ptr<const void> keeper{nullptr, [&released](const void*) { ++released; }};
  return shared_bytes{std::move(keeper), bytes};
}

}  // namespace sluice::transport::testing
