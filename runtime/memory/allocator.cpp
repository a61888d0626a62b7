#include "runtime/memory/allocator.hpp"

#include <algorithm>
#include <bit>
#include <iterator>
#include <vector>

#include "runtime/assert.hpp"

namespace sluice {

namespace {

/// Classes up to this size step by 64 bytes; above it, four per doubling.
constexpr std::uint64_t linear_class_bytes_max = 256;
constexpr std::size_t linear_class_count = linear_class_bytes_max / allocation_alignment_bytes;
constexpr std::size_t classes_per_doubling = 4;
constexpr unsigned linear_class_log2 = 8;  // log2(linear_class_bytes_max)

constexpr std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) noexcept {
  return (value + unit - 1) / unit * unit;
}

/// The index of the class serving `size_bytes`. REQUIRES: size_bytes <= small_bytes_max.
constexpr std::size_t class_index(std::uint64_t size_bytes) noexcept {
  if (size_bytes <= linear_class_bytes_max) {
    return size_bytes == 0 ? 0 : (size_bytes - 1) / allocation_alignment_bytes;
  }
  // size_bytes lies in (2^k, 2^(k+1)]; that doubling has four steps of 2^(k-2).
  const unsigned k = static_cast<unsigned>(std::bit_width(size_bytes - 1)) - 1;
  const std::uint64_t step = std::uint64_t{1} << (k - 2);
  const std::uint64_t sub = ((size_bytes - (std::uint64_t{1} << k)) + step - 1) / step;  // 1..4
  return linear_class_count + (k - linear_class_log2) * classes_per_doubling + (sub - 1);
}

constexpr std::uint64_t class_bytes(std::size_t index) noexcept {
  if (index < linear_class_count) return (index + 1) * allocation_alignment_bytes;
  const std::size_t j = index - linear_class_count;
  const unsigned k = linear_class_log2 + static_cast<unsigned>(j / classes_per_doubling);
  const std::uint64_t sub = j % classes_per_doubling + 1;
  return (std::uint64_t{1} << k) + sub * (std::uint64_t{1} << (k - 2));
}

static_assert(class_bytes(size_class_count - 1) == small_bytes_max);
static_assert(class_index(small_bytes_max) == size_class_count - 1);
static_assert(class_index(0) == 0 && class_index(64) == 0 && class_index(65) == 1);
static_assert(class_index(257) == 4 && class_bytes(4) == 320);

}  // namespace

/// One slab: `object_count` objects of `object_bytes` each, a bit per slot
/// and, per slot, how far below its class the requested size was.
struct allocator::slab {
  std::size_t size_class = 0;
  std::uint64_t object_bytes = 0;
  std::uint64_t object_count = 0;
  std::uint64_t live_objects = 0;
  /// No word below this one has a free slot.
  std::size_t first_free_word = 0;
  std::vector<std::uint64_t> used_bits;
  /// class size - requested size; below 16 KiB, the widest gap between classes.
  std::vector<std::uint16_t> slack_bytes;

  bool is_used(std::uint64_t index) const noexcept {
    return (used_bits[index / 64] >> (index % 64) & 1U) != 0;
  }
  /// Marks the lowest free slot used and returns it. REQUIRES: a free slot.
  std::uint64_t take_slot() noexcept {
    for (std::size_t w = first_free_word; w < used_bits.size(); ++w) {
      if (used_bits[w] == ~std::uint64_t{0}) continue;
      const auto bit = static_cast<std::uint64_t>(std::countr_one(used_bits[w]));
      const std::uint64_t index = w * 64 + bit;
      SLUICE_ASSERT(index < object_count);
      used_bits[w] |= std::uint64_t{1} << bit;
      first_free_word = w;
      return index;
    }
    SLUICE_ASSERT(false && "take_slot on a full slab");
    return 0;
  }
  void release_slot(std::uint64_t index) noexcept {
    used_bits[index / 64] &= ~(std::uint64_t{1} << (index % 64));
    first_free_word = std::min(first_free_word, static_cast<std::size_t>(index / 64));
  }
};

allocator::allocator(std::uint64_t capacity_bytes)
    : capacity_bytes_(capacity_bytes),
      slab_bytes_limit_(std::min(slab_bytes_max, capacity_bytes / slab_capacity_divisor)) {
  SLUICE_ASSERT(capacity_bytes % allocation_alignment_bytes == 0);
  for (std::size_t c = 0; c < size_class_count; ++c) class_stats_[c].object_bytes = class_bytes(c);
  if (capacity_bytes > 0) give_extent(0, capacity_bytes);
}

allocator::~allocator() = default;
allocator::allocator(allocator&&) noexcept = default;
allocator& allocator::operator=(allocator&&) noexcept = default;

std::uint64_t allocator::class_bytes_for(std::uint64_t size_bytes) noexcept {
  SLUICE_ASSERT(size_bytes <= small_bytes_max);
  return class_bytes(class_index(size_bytes));
}

std::uint64_t allocator::slab_objects_for(std::size_t size_class) const noexcept {
  return std::min(slab_objects_max, slab_bytes_limit_ / class_bytes(size_class));
}

std::optional<std::uint64_t> allocator::allocate(std::uint64_t size_bytes) {
  // Also keeps round_up below from overflowing: capacity is 64-aligned.
  if (size_bytes > capacity_bytes_) return std::nullopt;
  if (size_bytes <= small_bytes_max) return allocate_small(size_bytes);
  return allocate_extent(round_up(size_bytes, allocation_alignment_bytes), size_bytes);
}

std::optional<std::uint64_t> allocator::allocate_small(std::uint64_t size_bytes) {
  const std::size_t c = class_index(size_bytes);
  std::set<std::uint64_t>& partial = partial_slabs_[c];
  const bool slabs_fit = slab_objects_for(c) >= slab_objects_min;
  if (partial.empty() && !(slabs_fit && new_slab(c))) {
    // No slab for this class here, or no room for one: the value still fits
    // as an extent of its class size in a small, fragmented or full range.
    return allocate_extent(class_bytes(c), size_bytes);
  }
  const std::uint64_t slab_offset = *partial.begin();
  slab& s = *used_.at(slab_offset).slab_state;
  const std::uint64_t index = s.take_slot();
  s.slack_bytes[index] = static_cast<std::uint16_t>(s.object_bytes - size_bytes);
  s.live_objects += 1;
  if (s.live_objects == s.object_count) partial.erase(partial.begin());

  class_stats_[c].live_objects += 1;
  granted_bytes_ += s.object_bytes;
  requested_bytes_ += size_bytes;
  live_allocations_ += 1;
  return slab_offset + index * s.object_bytes;
}

std::optional<std::uint64_t> allocator::new_slab(std::size_t size_class) {
  const std::uint64_t object_count = slab_objects_for(size_class);
  SLUICE_ASSERT(object_count >= slab_objects_min);
  const std::uint64_t length_bytes = object_count * class_bytes(size_class);
  const std::optional<std::uint64_t> offset = take_extent(length_bytes);
  if (!offset) return std::nullopt;

  auto state = std::make_unique<slab>();
  state->size_class = size_class;
  state->object_bytes = class_bytes(size_class);
  state->object_count = object_count;
  // Slots past object_count in the last word start "used" so take_slot
  // never hands them out.
  state->used_bits.assign((object_count + 63) / 64, 0);
  if (object_count % 64 != 0) state->used_bits.back() = ~std::uint64_t{0} << (object_count % 64);
  state->slack_bytes.assign(object_count, 0);
  used_.emplace(*offset, used_extent{length_bytes, 0, std::move(state)});
  partial_slabs_[size_class].insert(*offset);
  class_stats_[size_class].slabs += 1;
  slab_bytes_ += length_bytes;
  return offset;
}

std::optional<std::uint64_t> allocator::allocate_extent(std::uint64_t length_bytes,
                                                        std::uint64_t requested_bytes) {
  const std::optional<std::uint64_t> offset = take_extent(length_bytes);
  if (!offset) return std::nullopt;
  used_.emplace(*offset, used_extent{length_bytes, requested_bytes, nullptr});
  granted_bytes_ += length_bytes;
  requested_bytes_ += requested_bytes;
  extent_used_bytes_ += length_bytes;
  live_allocations_ += 1;
  return offset;
}

std::optional<std::uint64_t> allocator::take_extent(std::uint64_t length_bytes) {
  // Best fit: the smallest free extent that holds the length; among equals,
  // the lowest offset (the set orders by (length, offset)).
  auto fit = free_by_size_.lower_bound({length_bytes, 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  const auto [extent_bytes, offset] = *fit;
  free_by_size_.erase(fit);
  free_by_offset_.erase(offset);
  if (extent_bytes > length_bytes) {
    free_by_offset_.emplace(offset + length_bytes, extent_bytes - length_bytes);
    free_by_size_.emplace(extent_bytes - length_bytes, offset + length_bytes);
  }
  free_bytes_ -= length_bytes;
  return offset;
}

void allocator::give_extent(std::uint64_t offset, std::uint64_t length_bytes) {
  free_bytes_ += length_bytes;
  auto next = free_by_offset_.lower_bound(offset);
  // A free extent overlapping this one would mean a double free or a
  // corrupted map: stop before handing the bytes out twice.
  SLUICE_ASSERT(next == free_by_offset_.end() || next->first >= offset + length_bytes);
  if (next != free_by_offset_.end() && next->first == offset + length_bytes) {
    length_bytes += next->second;
    free_by_size_.erase({next->second, next->first});
    next = free_by_offset_.erase(next);
  }
  if (next != free_by_offset_.begin()) {
    auto previous = std::prev(next);
    SLUICE_ASSERT(previous->first + previous->second <= offset);
    if (previous->first + previous->second == offset) {
      offset = previous->first;
      length_bytes += previous->second;
      free_by_size_.erase({previous->second, previous->first});
      free_by_offset_.erase(previous);
    }
  }
  free_by_offset_.emplace(offset, length_bytes);
  free_by_size_.emplace(length_bytes, offset);
}

allocator::used_map::const_iterator allocator::containing(std::uint64_t offset) const {
  auto it = used_.upper_bound(offset);
  if (it == used_.begin()) return used_.end();
  --it;
  return offset < it->first + it->second.length_bytes ? it : used_.end();
}

void allocator::free(std::uint64_t offset) {
  auto found = containing(offset);
  SLUICE_ASSERT(found != used_.end());
  // containing() is const; this is the same element, now mutable.
  auto it = used_.erase(found, found);
  if (it->second.slab_state) {
    free_in_slab(it, offset);
    return;
  }
  SLUICE_ASSERT(it->first == offset);
  const std::uint64_t length_bytes = it->second.length_bytes;
  granted_bytes_ -= length_bytes;
  requested_bytes_ -= it->second.requested_bytes;
  extent_used_bytes_ -= length_bytes;
  live_allocations_ -= 1;
  used_.erase(it);
  give_extent(offset, length_bytes);
}

void allocator::free_in_slab(used_map::iterator slab_it, std::uint64_t offset) {
  const std::uint64_t slab_offset = slab_it->first;
  slab& s = *slab_it->second.slab_state;
  const std::uint64_t within = offset - slab_offset;
  SLUICE_ASSERT(within % s.object_bytes == 0);
  const std::uint64_t index = within / s.object_bytes;
  SLUICE_ASSERT(index < s.object_count);
  SLUICE_ASSERT(s.is_used(index));

  const bool was_full = s.live_objects == s.object_count;
  s.release_slot(index);
  s.live_objects -= 1;
  class_stats_[s.size_class].live_objects -= 1;
  granted_bytes_ -= s.object_bytes;
  requested_bytes_ -= s.object_bytes - s.slack_bytes[index];
  live_allocations_ -= 1;
  if (was_full) partial_slabs_[s.size_class].insert(slab_offset);
  if (s.live_objects > 0) return;

  // Every object is free: the slab goes back to the extent space.
  partial_slabs_[s.size_class].erase(slab_offset);
  class_stats_[s.size_class].slabs -= 1;
  const std::uint64_t length_bytes = slab_it->second.length_bytes;
  slab_bytes_ -= length_bytes;
  used_.erase(slab_it);
  give_extent(slab_offset, length_bytes);
}

std::optional<std::uint64_t> allocator::size_of(std::uint64_t offset) const {
  auto it = containing(offset);
  if (it == used_.end()) return std::nullopt;
  const slab* s = it->second.slab_state.get();
  if (s == nullptr) {
    if (it->first != offset) return std::nullopt;
    return it->second.requested_bytes;
  }
  const std::uint64_t within = offset - it->first;
  if (within % s->object_bytes != 0) return std::nullopt;
  const std::uint64_t index = within / s->object_bytes;
  if (index >= s->object_count || !s->is_used(index)) return std::nullopt;
  return s->object_bytes - s->slack_bytes[index];
}

allocator_stats allocator::stats() const {
  allocator_stats out;
  out.capacity_bytes = capacity_bytes_;
  out.used_bytes = granted_bytes_;
  out.requested_bytes = requested_bytes_;
  out.live_allocations = live_allocations_;
  out.free_bytes = free_bytes_;
  out.largest_free_extent_bytes = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  out.slab_bytes = slab_bytes_;
  out.extent_used_bytes = extent_used_bytes_;
  if (free_bytes_ > 0) {
    out.fragmentation =
        1.0 - static_cast<double>(out.largest_free_extent_bytes) / static_cast<double>(free_bytes_);
  }
  out.classes = class_stats_;
  return out;
}

}  // namespace sluice
