#include "runtime/gpu/device_pool.hpp"

#include <fmt/format.h>

#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice::gpu {

device_pool::device_pool(device& dev, device_info info, device_address base, std::uint64_t capacity_bytes)
    : device_(dev), info_(std::move(info)), base_(base), offsets_(capacity_bytes) {}

result<std::unique_ptr<device_pool>> device_pool::create(device& dev, const device_info& info,
                                                         std::uint64_t capacity_bytes) {
  auto usable = capacity_bytes - capacity_bytes % allocation_alignment_bytes;
  if (usable == 0) {
    return error{errc::invalid_argument, fmt::format("a GPU pool needs at least {} bytes", allocation_alignment_bytes)};
  }
  auto base = dev.allocate(info.ordinal, usable);
  if (!base) return base.error();
  SLUICE_ASSERT(*base != 0);
  std::unique_ptr<device_pool> pool{new device_pool{dev, info, *base, usable}};
  auto stream = dev.create_stream(info.ordinal);
  if (!stream) return stream.error();  // the destructor gives the memory back
  pool->stream_ = *stream;
  pool->events_ = std::make_unique<event_pool>(dev, info.ordinal);
  return pool;
}

device_pool::~device_pool() {
  // Events first, then the stream their work ran on, then the memory.
  events_.reset();
  if (stream_ != stream_handle{}) (void)device_.destroy_stream(stream_);
  (void)device_.free(base_);
}

result<device_region> device_pool::allocate(std::uint64_t length) {
  auto offset = offsets_.allocate(length);
  if (!offset) {
    auto s = offsets_.stats();
    return error{errc::no_capacity,
                 fmt::format("GPU pool on device {} has no room for {} ({} of {} used, largest free extent {})",
                             info_.ordinal, format_size(length), format_size(s.used_bytes),
                             format_size(s.capacity_bytes), format_size(s.largest_free_extent_bytes))};
  }
  SLUICE_ASSERT(*offset % allocation_alignment_bytes == 0);
  return device_region{.device = info_.ordinal, .offset = *offset, .length = length};
}

void device_pool::free(const device_region& r) {
  SLUICE_ASSERT(r.device == info_.ordinal);
  offsets_.free(r.offset);
}

result<device_address> device_pool::resolve(const device_region& r) const {
  if (r.device != info_.ordinal) {
    return error{errc::invalid_argument, fmt::format("region names device {}, not this pool's {}", r.device, info_.ordinal)};
  }
  auto size = offsets_.size_of(r.offset);
  if (!size || r.length > *size) {
    return error{errc::invalid_argument,
                 fmt::format("{} bytes at offset {} of the GPU pool on device {} are not a live value", r.length,
                             r.offset, r.device)};
  }
  return base_ + r.offset;
}

namespace {

/// The probe's entry for `ordinal`, or why it is not usable.
result<device_info> find_device(const probe_result& found, std::uint32_t ordinal) {
  for (auto& d : found.devices) {
    if (d.ordinal == ordinal) return d;
  }
  return error{errc::unavailable, fmt::format("device {} is not there: this host has {} CUDA device{}", ordinal,
                                              found.devices.size(), found.devices.size() == 1 ? "" : "s")};
}

}  // namespace

result<device_pools> open_device_pools(device& dev, const gpu_section& cfg) {
  auto found = dev.probe();
  if (!found.usable()) return error{errc::unavailable, found.why_not};
  device_pools pools;
  for (auto ordinal : cfg.devices) {
    auto info = find_device(found, ordinal);
    if (!info) return info.error();
    auto pool = device_pool::create(dev, *info, cfg.capacity_bytes);
    if (!pool) {
      // All or none: the pools opened so far give their memory back.
      return error{errc::unavailable, fmt::format("cannot allocate the {} GPU pool on device {} ({}): {}",
                                                  format_size(cfg.capacity_bytes), ordinal, info->name,
                                                  pool.error().message())};
    }
    pools.push_back(std::move(*pool));
  }
  return pools;
}

}  // namespace sluice::gpu
