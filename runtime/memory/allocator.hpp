// allocator: hands out 64-byte-aligned ranges of offsets inside one address
// range [0, capacity). It never touches the memory it manages — its
// metadata lives in the owner's heap, never in the shared segment, so no
// client that maps the segment can corrupt it.
//
// Design.
//   Small values (size <= small_bytes_max, 64 KiB) are rounded up to one of
//   size_class_count classes (64, 128, 192, 256, then four classes per
//   doubling: 320, 384, 448, 512, 640, ... 65536; all multiples of 64) and
//   carved from slabs. A slab is one extent holding objects of one class:
//   at most slab_objects_max objects, at most slab_bytes_max and at most
//   capacity / slab_capacity_divisor bytes. A slab whose objects are all
//   free goes back to the extent space at once. A class whose slab would
//   hold fewer than slab_objects_min objects (a class too big for a small
//   range) skips slabs, and when no slab can be had a small value is placed
//   as an extent of its class size instead, so small values still fit in a
//   fragmented, nearly full range.
//   Large values are rounded up to 64 bytes and placed best-fit over the
//   free extents (smallest extent that fits; lowest offset among equals),
//   split on allocate; on free an extent coalesces with free neighbours.
//
// Metadata bound, per live object: a small value costs 1 bit and 2 bytes
// (its slack, to report its requested size) in its slab; a slab costs one
// ordered-map entry (~100 bytes) plus those 2.125 bytes for each of its
// slots, at most 8.5 KiB, and exists only while it holds a live value; a
// large value or a small value placed as an extent costs one ordered-map
// entry (~100 bytes). Free extents are never adjacent (they coalesce), so there
// are at most (used extents + 1) of them, one entry in each of two ordered
// containers. Total: O(live allocations). Every operation is O(log n) in
// the number of extents plus a bitmap scan of at most slab_objects_max / 64
// words.
//
// Thread safety: none; one thread (the owner actor) uses an allocator.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

namespace sluice {

/// Every offset returned is a multiple of this, and every size granted.
inline constexpr std::uint64_t allocation_alignment_bytes = 64;
/// Largest value served from slabs; larger ones get an extent of their own.
inline constexpr std::uint64_t small_bytes_max = 64 * 1024;
/// Size classes between 64 bytes and small_bytes_max (see above).
inline constexpr std::size_t size_class_count = 36;
/// Upper bound on a slab's size. Why: large enough that the biggest class
/// wastes little at a slab's tail (1 MiB holds 16 objects of 64 KiB), small
/// enough that a class's partly used slabs pin little memory.
inline constexpr std::uint64_t slab_bytes_max = std::uint64_t{1} << 20;
/// Upper bound on objects per slab. Why: bounds the bitmap scan to 64 words
/// and a slab's metadata to 8.5 KiB (small classes get smaller slabs).
inline constexpr std::uint64_t slab_objects_max = 4096;
/// A slab is at most capacity / slab_capacity_divisor bytes. Why: the partly
/// used slabs of all size_class_count classes then pin at most 36/256 (14%)
/// of a small range; ranges of 256 MiB and up get full 1 MiB slabs.
inline constexpr std::uint64_t slab_capacity_divisor = 256;
/// Fewer objects than this per slab and a class places its values as extents.
inline constexpr std::uint64_t slab_objects_min = 2;

/// Counts for one size class.
struct allocator_class_stats {
  std::uint64_t object_bytes = 0;  ///< The class's size.
  std::uint64_t live_objects = 0;  ///< Live values of this class held in slabs.
  std::uint64_t slabs = 0;         ///< Slabs of this class.
};

struct allocator_stats {
  std::uint64_t capacity_bytes = 0;
  /// Bytes granted to live allocations, as rounded (class size or extent).
  std::uint64_t used_bytes = 0;
  /// Bytes the callers asked for, for the same allocations.
  std::uint64_t requested_bytes = 0;
  std::uint64_t live_allocations = 0;
  /// Bytes in free extents (not in slabs, not in large allocations).
  std::uint64_t free_bytes = 0;
  std::uint64_t largest_free_extent_bytes = 0;
  /// Extent space held by slabs, used or not. Invariant:
  /// free_bytes + slab_bytes + extent_used_bytes == capacity_bytes.
  std::uint64_t slab_bytes = 0;
  /// Bytes granted to allocations placed as extents (not in slabs).
  std::uint64_t extent_used_bytes = 0;
  /// 1 - largest_free_extent_bytes / free_bytes; 0 when nothing is free.
  double fragmentation = 0.0;
  std::array<allocator_class_stats, size_class_count> classes{};
};

class allocator {
 public:
  /// REQUIRES: capacity_bytes is a multiple of allocation_alignment_bytes.
  explicit allocator(std::uint64_t capacity_bytes);
  ~allocator();
  allocator(const allocator&) = delete;
  allocator& operator=(const allocator&) = delete;
  allocator(allocator&&) noexcept;
  allocator& operator=(allocator&&) noexcept;

  /// The offset of at least `size_bytes` bytes, 64-byte aligned, not
  /// overlapping any live allocation; nullopt when there is no room. A size
  /// of 0 gets a distinct 64-byte slot of its own, so every live allocation
  /// has a unique offset.
  std::optional<std::uint64_t> allocate(std::uint64_t size_bytes);

  /// Gives back an allocation. REQUIRES: `offset` is the start of a live
  /// allocation (checked: freeing anything else stops the process).
  void free(std::uint64_t offset);

  /// The size asked for when the allocation at `offset` was made; nullopt
  /// when `offset` is not the start of a live allocation (an interior
  /// offset, a freed one, one out of range). Safe on untrusted offsets.
  std::optional<std::uint64_t> size_of(std::uint64_t offset) const;

  std::uint64_t capacity_bytes() const noexcept { return capacity_bytes_; }
  /// O(size_class_count + log n).
  allocator_stats stats() const;

  /// The class size that serves `size_bytes`. REQUIRES: size_bytes <= small_bytes_max.
  static std::uint64_t class_bytes_for(std::uint64_t size_bytes) noexcept;

 private:
  struct slab;
  /// A used extent: a large value, a small value placed as an extent, or a slab.
  struct used_extent {
    std::uint64_t length_bytes = 0;
    std::uint64_t requested_bytes = 0;  ///< For values; 0 for a slab.
    std::unique_ptr<slab> slab_state;   ///< Set for a slab.
  };
  using used_map = std::map<std::uint64_t, used_extent>;

  std::optional<std::uint64_t> allocate_small(std::uint64_t size_bytes);
  std::optional<std::uint64_t> allocate_extent(std::uint64_t length_bytes,
                                               std::uint64_t requested_bytes);
  std::optional<std::uint64_t> take_extent(std::uint64_t length_bytes);
  void give_extent(std::uint64_t offset, std::uint64_t length_bytes);
  std::optional<std::uint64_t> new_slab(std::size_t size_class);
  void free_in_slab(used_map::iterator slab_it, std::uint64_t offset);
  /// Objects in a slab of this class; below slab_objects_min means no slabs.
  std::uint64_t slab_objects_for(std::size_t size_class) const noexcept;
  /// The used extent that contains `offset`, or end().
  used_map::const_iterator containing(std::uint64_t offset) const;

  std::uint64_t capacity_bytes_;
  std::uint64_t slab_bytes_limit_;
  /// Free extents: offset -> length, and (length, offset) for best fit.
  std::map<std::uint64_t, std::uint64_t> free_by_offset_;
  std::set<std::pair<std::uint64_t, std::uint64_t>> free_by_size_;
  used_map used_;
  /// Per class, the offsets of its slabs that have a free slot.
  std::array<std::set<std::uint64_t>, size_class_count> partial_slabs_;
  std::uint64_t free_bytes_ = 0;
  std::uint64_t granted_bytes_ = 0;
  std::uint64_t requested_bytes_ = 0;
  std::uint64_t live_allocations_ = 0;
  std::uint64_t slab_bytes_ = 0;
  std::uint64_t extent_used_bytes_ = 0;
  std::array<allocator_class_stats, size_class_count> class_stats_{};
};

}  // namespace sluice
