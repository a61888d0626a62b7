#include "runtime/memory/pool.hpp"

#include <algorithm>

#include "runtime/assert.hpp"
#include "runtime/units.hpp"

namespace sluice {

namespace {

std::string describe(const region& r) {
  return "region {segment " + std::to_string(r.segment) + ", offset " + std::to_string(r.offset) +
         ", length " + std::to_string(r.length) + "}";
}

result<std::uint64_t> segment_count_for(const pool_options& options) {
  if (options.pool_bytes == 0)
    return fail(errc::invalid_argument, "a pool needs a size above 0 bytes");
  if (options.segment_bytes == 0 || options.segment_bytes > segment_bytes_max) {
    return fail(errc::invalid_argument, "segment_bytes must be in (0, " +
                                            format_size(segment_bytes_max) + "], got " +
                                            std::to_string(options.segment_bytes));
  }
  const std::uint64_t count = options.pool_bytes / options.segment_bytes +
                              (options.pool_bytes % options.segment_bytes != 0 ? 1 : 0);
  if (count > pool_segment_count_max) {
    return fail(errc::invalid_argument,
                "a pool of " + format_size(options.pool_bytes) + " in segments of " +
                    format_size(options.segment_bytes) + " needs " + std::to_string(count) +
                    " segments; the limit is " + std::to_string(pool_segment_count_max) +
                    ", so raise segment_bytes");
  }
  return count;
}

}  // namespace

result<std::unique_ptr<pool>> pool::create(const pool_options& options) {
  auto count = segment_count_for(options);
  if (!count) return std::move(count).error();
  std::unique_ptr<pool> out{new pool(options.name)};
  out->parts_.reserve(*count);
  for (std::uint64_t i = 0; i < *count; ++i) {
    segment_options part_options;
    part_options.name = options.name + "-" + std::to_string(i);
    part_options.size_bytes =
        std::min(options.segment_bytes, options.pool_bytes - i * options.segment_bytes);
    part_options.huge_pages = options.huge_pages;
    part_options.prefault = options.prefault;
    auto memory = segment::create(part_options);
    if (!memory) {
      return fail(memory.code(), "pool '" + options.name + "', segment " + std::to_string(i) +
                                     " of " + std::to_string(*count) + ": " +
                                     memory.error().message());
    }
    // Segments are page multiples, hence multiples of the 64-byte granule.
    const std::uint64_t capacity_bytes = (*memory)->size_bytes();
    out->parts_.push_back(part{std::move(*memory), allocator(capacity_bytes)});
  }
  return out;
}

pool::~pool() = default;

result<region> pool::allocate(std::uint64_t length) {
  for (std::uint32_t i = 0; i < parts_.size(); ++i) {
    if (auto offset = parts_[i].offsets.allocate(length)) return region{i, *offset, length};
  }
  std::uint64_t segment_bytes_largest = 0;
  for (const part& p : parts_)
    segment_bytes_largest = std::max(segment_bytes_largest, p.offsets.capacity_bytes());
  if (length > segment_bytes_largest) {
    return fail(errc::no_capacity,
                "a value of " + format_size(length) + " does not fit in a segment of pool '" +
                    name_ + "' (" + format_size(segment_bytes_largest) + "); raise segment_bytes");
  }
  const pool_stats now = stats();
  return fail(errc::no_capacity,
              "no room for " + format_size(length) + " in pool '" + name_ +
                  "': " + format_size(now.used_bytes) + " of " + format_size(now.capacity_bytes) +
                  " used, largest free extent " + format_size(now.largest_free_extent_bytes) +
                  "; free values or evict");
}

void pool::free(const region& r) {
  SLUICE_ASSERT(r.segment < parts_.size());
  allocator& offsets = parts_[r.segment].offsets;
  const std::optional<std::uint64_t> size_bytes = offsets.size_of(r.offset);
  SLUICE_ASSERT(size_bytes.has_value());
  SLUICE_ASSERT(r.length <= *size_bytes);
  offsets.free(r.offset);
}

result<std::span<std::byte>> pool::resolve(const region& r) const {
  if (r.segment >= parts_.size()) {
    return fail(errc::invalid_argument, describe(r) + " names a segment pool '" + name_ +
                                            "' does not have (it has " +
                                            std::to_string(parts_.size()) + ")");
  }
  const part& p = parts_[r.segment];
  const std::optional<std::uint64_t> size_bytes = p.offsets.size_of(r.offset);
  if (!size_bytes) {
    return fail(errc::invalid_argument,
                describe(r) + " does not start a live allocation in pool '" + name_ + "'");
  }
  if (r.length > *size_bytes) {
    return fail(errc::invalid_argument, describe(r) + " is longer than the " +
                                            std::to_string(*size_bytes) + " bytes allocated there");
  }
  // size_of() only answers for offsets inside the segment, and the
  // allocation there is at least size_bytes long: the span is in bounds.
  return std::span<std::byte>{p.memory->base() + r.offset, r.length};
}

const segment& pool::segment_at(std::uint32_t index) const {
  SLUICE_ASSERT(index < parts_.size());
  return *parts_[index].memory;
}

allocator_stats pool::segment_stats(std::uint32_t index) const {
  SLUICE_ASSERT(index < parts_.size());
  return parts_[index].offsets.stats();
}

pool_stats pool::stats() const {
  pool_stats out;
  out.segment_count = parts_.size();
  for (const part& p : parts_) {
    const allocator_stats s = p.offsets.stats();
    out.capacity_bytes += s.capacity_bytes;
    out.used_bytes += s.used_bytes;
    out.requested_bytes += s.requested_bytes;
    out.live_allocations += s.live_allocations;
    out.free_bytes += s.free_bytes;
    out.largest_free_extent_bytes =
        std::max(out.largest_free_extent_bytes, s.largest_free_extent_bytes);
  }
  if (out.free_bytes > 0) {
    out.fragmentation = 1.0 - static_cast<double>(out.largest_free_extent_bytes) /
                                  static_cast<double>(out.free_bytes);
  }
  return out;
}

}  // namespace sluice
