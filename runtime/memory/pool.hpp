// pool: the shared memory an owner contributes to its host — several
// segments of segment_bytes (one when the pool is small), each with its own
// allocator. Values live in regions of it; local clients map the segments
// (their fds go out through segment_at(i).fd()) and read values in place.
//
// Invariants:
//   1. Every live region lies inside one segment and starts 64-byte
//      aligned; live regions never overlap.
//   2. Allocator metadata lives in this process's heap, never in a
//      segment, so nothing a client writes into shared memory can corrupt
//      the pool's bookkeeping.
//
// Thread safety: none; one thread (the owner actor) uses a pool. The
// segments' bytes are shared with clients; which side may write a region
// when is the protocol's business.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/memory/allocator.hpp"
#include "runtime/memory/region.hpp"
#include "runtime/memory/segment.hpp"
#include "sluice/result.hpp"

namespace sluice {

/// Most segments in one pool. Why: every segment is an fd passed to, and a
/// mapping held by, every local client; 1024 segments of 1 GiB is 1 TiB.
inline constexpr std::uint64_t pool_segment_count_max = 1024;

struct pool_options {
  /// Names the segments "<name>-<index>" (seen in /proc/<pid>/maps).
  std::string name = "sluice-pool";
  /// Total size; the last segment takes what is left after the full ones.
  /// REQUIRES: pool_bytes > 0.
  std::uint64_t pool_bytes = 0;
  /// Size of each segment. REQUIRES: 0 < segment_bytes <= segment_bytes_max,
  /// and pool_bytes / segment_bytes (rounded up) <= pool_segment_count_max.
  std::uint64_t segment_bytes = std::uint64_t{1} << 30;
  bool huge_pages = false;
  prefault_mode prefault = prefault_mode::none;
};

struct pool_stats {
  std::uint64_t segment_count = 0;
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;       ///< Granted (rounded) bytes of live regions.
  std::uint64_t requested_bytes = 0;  ///< Lengths asked for, for the same regions.
  std::uint64_t live_allocations = 0;
  std::uint64_t free_bytes = 0;                 ///< In free extents, all segments.
  std::uint64_t largest_free_extent_bytes = 0;  ///< Over all segments.
  /// 1 - largest_free_extent_bytes / free_bytes; 0 when nothing is free.
  double fragmentation = 0.0;
};

class pool {
 public:
  /// Creates and maps every segment. Errors: those of segment::create
  /// (a huge-page refusal is errc::unavailable), invalid_argument for bad
  /// options.
  static result<std::unique_ptr<pool>> create(const pool_options& options);

  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;
  ~pool();

  /// A region of `length` bytes in the first segment with room for it.
  /// errc::no_capacity when no segment has room; the message names the
  /// length and the pool's state.
  result<region> allocate(std::uint64_t length);

  /// Gives a region back. REQUIRES: `r` came from allocate() on this pool
  /// and is live (checked: anything else stops the process). Untrusted
  /// regions are resolve()d first.
  void free(const region& r);

  /// The bytes of a region that may come from an untrusted peer. Checks the
  /// segment exists, the offset starts a live allocation and the length is
  /// within the length allocated there; errc::invalid_argument otherwise,
  /// never a crash. The span stays valid until the region is freed.
  result<std::span<std::byte>> resolve(const region& r) const;

  std::uint32_t segment_count() const noexcept { return static_cast<std::uint32_t>(parts_.size()); }
  /// REQUIRES: index < segment_count().
  const segment& segment_at(std::uint32_t index) const;
  /// REQUIRES: index < segment_count().
  allocator_stats segment_stats(std::uint32_t index) const;
  pool_stats stats() const;

 private:
  struct part {
    std::unique_ptr<segment> memory;
    allocator offsets;
  };
  explicit pool(std::string name) : name_(std::move(name)) {}

  std::string name_;
  std::vector<part> parts_;
};

}  // namespace sluice
