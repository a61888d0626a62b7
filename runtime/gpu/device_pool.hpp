// device_pool: the GPU memory an owner contributes on one device — one
// allocation made once at start, carved into values by the same allocator
// as the host pool (runtime/memory/allocator.hpp, which only hands out
// offsets and never touches the memory it manages), plus the copy stream
// and the event pool its copies complete through.
//
// open_device_pools() is what an owner runs at start for [owner.gpu]:
// probe, then one pool per listed device, all or none.
//
// Invariants:
//   1. the device allocation is made once, in create(), and given back
//      once, in the destructor; nothing in between resizes it;
//   2. every live region lies inside [0, capacity) and starts 64-byte
//      aligned; live regions never overlap (the allocator's invariant);
//   3. the allocator's metadata lives in the owner's heap, never on the
//      device.
//
// Thread safety: none; one thread (the owner actor) uses a pool.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/config/node_config.hpp"
#include "runtime/gpu/device.hpp"
#include "runtime/gpu/event_pool.hpp"
#include "runtime/memory/allocator.hpp"

namespace sluice::gpu {

/// Where a value lives in a GPU pool: a value type, like region.
struct device_region {
  std::uint32_t device = 0;  ///< the device's ordinal
  std::uint64_t offset = 0;  ///< from the pool's base; 64-byte aligned
  std::uint64_t length = 0;
  friend bool operator==(const device_region&, const device_region&) = default;
};

class device_pool {
 public:
  /// Allocates `capacity_bytes` (rounded down to a multiple of
  /// allocation_alignment_bytes) on `info.ordinal`, and a copy stream.
  /// REQUIRES: `dev` outlives the pool. Errors: the device's (no_capacity
  /// when it lacks the memory), invalid_argument for a capacity below 64.
  static result<std::unique_ptr<device_pool>> create(device& dev, const device_info& info,
                                                     std::uint64_t capacity_bytes);
  ~device_pool();
  device_pool(const device_pool&) = delete;
  device_pool& operator=(const device_pool&) = delete;

  /// `length` bytes of the pool. errc::no_capacity when there is no room.
  result<device_region> allocate(std::uint64_t length);
  /// REQUIRES: `r` came from allocate() on this pool and is live (checked:
  /// anything else stops the process).
  void free(const device_region& r);
  /// The device address of a region that may come from an untrusted peer:
  /// invalid_argument unless it names this device and lies within a live
  /// allocation.
  result<device_address> resolve(const device_region& r) const;

  const device_info& info() const noexcept { return info_; }
  std::uint64_t capacity_bytes() const noexcept { return offsets_.capacity_bytes(); }
  allocator_stats stats() const { return offsets_.stats(); }
  device_address base() const noexcept { return base_; }
  stream_handle stream() const noexcept { return stream_; }
  event_pool& events() noexcept { return *events_; }

 private:
  device_pool(device& dev, device_info info, device_address base, std::uint64_t capacity_bytes);

  device& device_;
  device_info info_;
  device_address base_;
  allocator offsets_;
  stream_handle stream_{};
  std::unique_ptr<event_pool> events_;
};

using device_pools = std::vector<std::unique_ptr<device_pool>>;

/// Probes `dev` and opens a pool of cfg.capacity_bytes on each of
/// cfg.devices — all of them, or none: errc::unavailable with the reason
/// a person can act on ("no CUDA driver", "no CUDA device", "device 2 is
/// not there: this host has 1 CUDA device", an allocation that failed).
result<device_pools> open_device_pools(device& dev, const gpu_section& cfg);

}  // namespace sluice::gpu
