#include "transports/shm/ring.hpp"

#include <bit>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "runtime/assert.hpp"

namespace sluice::transport::shm {

// The header as it lies in shared memory. Both processes may run different
// builds of this file, so the layout is pinned below; change it only with
// a new ring_version.
struct ring_header {
  // Control line: written by format(), then only `closed` changes.
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t capacity_bytes;
  std::atomic<std::uint32_t> closed;
  // Producer line.
  alignas(ring_line_bytes) std::atomic<std::uint64_t> write_position;
  // Consumer line.
  alignas(ring_line_bytes) std::atomic<std::uint64_t> read_position;
  // Futex words, each alone on its line: written only around sleeping.
  alignas(ring_line_bytes) std::atomic<std::uint32_t> consumer_wake;
  alignas(ring_line_bytes) std::atomic<std::uint32_t> producer_wake;
};

// Cross-process atomics must be lock-free (a lock-based atomic keeps its
// lock in process memory and would not synchronize anything) and exactly
// as big as the integer they hold (the futex syscall reads a plain u32).
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<std::uint64_t>) == sizeof(std::uint64_t));
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
static_assert(std::is_standard_layout_v<ring_header>);
static_assert(offsetof(ring_header, capacity_bytes) == 12);
static_assert(offsetof(ring_header, closed) == 16);
static_assert(offsetof(ring_header, write_position) == 1 * ring_line_bytes);
static_assert(offsetof(ring_header, read_position) == 2 * ring_line_bytes);
static_assert(offsetof(ring_header, consumer_wake) == 3 * ring_line_bytes);
static_assert(offsetof(ring_header, producer_wake) == 4 * ring_line_bytes);
static_assert(sizeof(ring_header) == ring_header_bytes);

namespace {

// A record header as copied out of shared memory.
struct record_header {
  std::uint32_t length;
  std::uint32_t tag;
};
static_assert(sizeof(record_header) == ring_record_header_bytes);

constexpr std::uint64_t align_record(std::uint64_t bytes) noexcept {
  return (bytes + ring_record_header_bytes - 1) & ~std::uint64_t{ring_record_header_bytes - 1};
}

constexpr bool valid_capacity(std::uint32_t capacity_bytes) noexcept {
  return capacity_bytes >= ring_capacity_bytes_min && capacity_bytes <= ring_capacity_bytes_max &&
         std::has_single_bit(capacity_bytes);
}

constexpr bool aligned_position(std::uint64_t position) noexcept {
  return position % ring_record_header_bytes == 0;
}

bool aligned_area(std::span<std::byte> area) noexcept {
  return reinterpret_cast<std::uintptr_t>(area.data()) % alignof(ring_header) == 0;
}

record_header read_record_header(const std::byte* at) noexcept {
  record_header out;
  std::memcpy(&out, at, sizeof out);  // one copy; only the copy is checked and used
  return out;
}

void write_record_header(std::byte* at, std::uint32_t length, std::uint32_t tag) noexcept {
  const record_header header{length, tag};
  std::memcpy(at, &header, sizeof header);
}

}  // namespace

result<ring> ring::format(std::span<std::byte> area, std::uint32_t capacity_bytes) {
  if (!aligned_area(area)) {
    return fail(errc::invalid_argument, "shm ring: the area must be 128-byte aligned (map it)");
  }
  if (!valid_capacity(capacity_bytes)) {
    return fail(errc::invalid_argument,
                "shm ring: capacity " + std::to_string(capacity_bytes) +
                    " bytes is not a power of two between 4 KiB and 1 GiB");
  }
  if (area.size() < ring_area_bytes(capacity_bytes)) {
    return fail(errc::invalid_argument, "shm ring: the area is smaller than header + capacity");
  }
  auto* header = new (area.data()) ring_header{};
  header->magic = ring_magic;
  header->version = ring_version;
  header->capacity_bytes = capacity_bytes;
  return ring{header, capacity_bytes, 0, 0};
}

result<ring> ring::attach(std::span<std::byte> area) {
  if (!aligned_area(area) || area.size() < ring_header_bytes) {
    return fail(errc::invalid_argument, "shm ring: the area is misaligned or smaller than a header");
  }
  // The peer built the header; the objects in it already exist.
  auto* header = std::launder(reinterpret_cast<ring_header*>(area.data()));
  if (header->magic != ring_magic) return fail(errc::protocol, "shm ring: bad magic (not a ring)");
  if (header->version != ring_version) {
    return fail(errc::protocol, "shm ring: version " + std::to_string(header->version) +
                                    ", this build reads version " + std::to_string(ring_version));
  }
  const std::uint32_t capacity_bytes = header->capacity_bytes;  // read once, kept locally
  if (!valid_capacity(capacity_bytes) || area.size() - ring_header_bytes < capacity_bytes) {
    return fail(errc::protocol, "shm ring: capacity " + std::to_string(capacity_bytes) +
                                    " bytes is invalid or larger than the area");
  }
  const std::uint64_t write_position = header->write_position.load(std::memory_order_acquire);
  const std::uint64_t read_position = header->read_position.load(std::memory_order_acquire);
  if (!aligned_position(write_position) || !aligned_position(read_position) ||
      write_position - read_position > capacity_bytes) {
    return fail(errc::protocol, "shm ring: inconsistent positions in the header");
  }
  return ring{header, capacity_bytes, write_position, read_position};
}

ring::ring(ring_header* header, std::uint32_t capacity_bytes, std::uint64_t write_position,
           std::uint64_t read_position) noexcept
    : header_(header),
      capacity_bytes_(capacity_bytes),
      write_position_(write_position),
      read_cached_(read_position),
      read_position_(read_position),
      write_cached_(write_position) {}

ring::ring(ring&& other) noexcept { *this = std::move(other); }

ring& ring::operator=(ring&& other) noexcept {
  header_ = std::exchange(other.header_, nullptr);
  capacity_bytes_ = other.capacity_bytes_;
  broken_ = std::exchange(other.broken_, true);  // a moved-from handle refuses everything
  write_position_ = other.write_position_;
  read_cached_ = other.read_cached_;
  reserved_bytes_ = other.reserved_bytes_;
  reserved_ = std::exchange(other.reserved_, false);
  read_position_ = other.read_position_;
  write_cached_ = other.write_cached_;
  peeked_record_bytes_ = std::exchange(other.peeked_record_bytes_, 0);
  return *this;
}

std::byte* ring::data() const noexcept {
  return reinterpret_cast<std::byte*>(header_) + ring_header_bytes;
}

std::atomic<std::uint32_t>& ring::consumer_wake_word() const noexcept {
  SLUICE_ASSERT(header_ != nullptr);
  return header_->consumer_wake;
}

std::atomic<std::uint32_t>& ring::producer_wake_word() const noexcept {
  SLUICE_ASSERT(header_ != nullptr);
  return header_->producer_wake;
}

void ring::close() noexcept {
  if (header_ != nullptr) header_->closed.store(1, std::memory_order_seq_cst);
}

bool ring::closed() const noexcept {
  return header_ == nullptr || header_->closed.load(std::memory_order_acquire) != 0;
}

// --- producer ---

bool ring::refresh_read_position() {
  // Acquire: the consumer's reads of the bytes it gave back happen before
  // we overwrite them.
  const std::uint64_t read = header_->read_position.load(std::memory_order_acquire);
  if (!aligned_position(read) || read - read_cached_ > write_position_ - read_cached_) {
    mark_broken();
    return false;
  }
  read_cached_ = read;
  return true;
}

std::uint64_t ring::bytes_needed(std::uint64_t record_bytes) const noexcept {
  const std::uint64_t to_end = capacity_bytes_ - (write_position_ & (capacity_bytes_ - 1));
  return record_bytes <= to_end ? record_bytes : to_end + record_bytes;
}

bool ring::writable(std::uint32_t length) {
  if (broken_ || length > record_bytes_max()) return false;
  const std::uint64_t needed = bytes_needed(align_record(ring_record_header_bytes + length));
  if (needed <= capacity_bytes_ - (write_position_ - read_cached_)) return true;
  if (!refresh_read_position()) return false;
  return needed <= capacity_bytes_ - (write_position_ - read_cached_);
}

std::optional<std::span<std::byte>> ring::reserve(std::uint32_t length) {
  if (!writable(length)) return std::nullopt;
  const std::uint64_t record_bytes = align_record(ring_record_header_bytes + length);
  std::uint64_t offset = write_position_ & (capacity_bytes_ - 1);
  if (record_bytes > capacity_bytes_ - offset) {
    // Pad to the end and restart at 0. The pad stays unpublished until the
    // next commit, so a replacing reserve() starts at 0 as well.
    const auto to_end = static_cast<std::uint32_t>(capacity_bytes_ - offset);
    write_record_header(data() + offset, to_end - ring_record_header_bytes, ring_pad_tag);
    write_position_ += to_end;
    offset = 0;
  }
  SLUICE_ASSERT(offset + record_bytes <= capacity_bytes_);
  write_record_header(data() + offset, length, ring_record_tag);
  reserved_ = true;
  reserved_bytes_ = length;
  return std::span<std::byte>{data() + offset + ring_record_header_bytes, length};
}

void ring::commit() { commit(reserved_bytes_); }

void ring::commit(std::uint32_t length) {
  SLUICE_ASSERT(reserved_);
  SLUICE_ASSERT(length <= reserved_bytes_);
  const std::uint64_t offset = write_position_ & (capacity_bytes_ - 1);
  if (length != reserved_bytes_) write_record_header(data() + offset, length, ring_record_tag);
  write_position_ += align_record(ring_record_header_bytes + length);
  reserved_ = false;
  // Release: the record's bytes are visible before the position that covers them.
  header_->write_position.store(write_position_, std::memory_order_release);
}

bool ring::try_push(std::span<const std::byte> payload) {
  if (payload.size() > record_bytes_max()) return false;
  auto room = reserve(static_cast<std::uint32_t>(payload.size()));
  if (!room) return false;
  if (!payload.empty()) std::memcpy(room->data(), payload.data(), payload.size());
  commit();
  return true;
}

// --- consumer ---

bool ring::refresh_write_position() {
  // Acquire: pairs with commit()'s release, so the record bytes are visible.
  const std::uint64_t write = header_->write_position.load(std::memory_order_acquire);
  const std::uint64_t limit = read_position_ + capacity_bytes_;
  if (!aligned_position(write) || write - write_cached_ > limit - write_cached_) {
    mark_broken();
    return false;
  }
  write_cached_ = write;
  return true;
}

bool ring::skip_pad(std::uint32_t pad_length) {
  const std::uint64_t offset = read_position_ & (capacity_bytes_ - 1);
  const std::uint64_t to_end = capacity_bytes_ - offset;
  // A producer pads only a non-empty tail of the area, exactly to its end,
  // and only inside what it committed.
  if (offset == 0 || std::uint64_t{pad_length} + ring_record_header_bytes != to_end ||
      to_end > write_cached_ - read_position_) {
    mark_broken();
    return false;
  }
  read_position_ += to_end;
  header_->read_position.store(read_position_, std::memory_order_release);
  return true;
}

std::optional<std::span<const std::byte>> ring::peek() {
  peeked_record_bytes_ = 0;
  // Bound: at most one pad precedes a record (a pad at offset 0 is invalid).
  for (int step = 0; step < 2 && !broken_; ++step) {
    if (read_position_ == write_cached_) {
      if (!refresh_write_position() || read_position_ == write_cached_) return std::nullopt;
    }
    const std::uint64_t offset = read_position_ & (capacity_bytes_ - 1);
    const record_header header = read_record_header(data() + offset);
    if (header.tag == ring_pad_tag) {
      if (!skip_pad(header.length)) return std::nullopt;
      continue;
    }
    const std::uint64_t record_bytes = align_record(std::uint64_t{ring_record_header_bytes} + header.length);
    if (header.tag != ring_record_tag || header.length > record_bytes_max() ||
        record_bytes > capacity_bytes_ - offset || record_bytes > write_cached_ - read_position_) {
      mark_broken();
      return std::nullopt;
    }
    peeked_record_bytes_ = static_cast<std::uint32_t>(record_bytes);
    return std::span<const std::byte>{data() + offset + ring_record_header_bytes, header.length};
  }
  if (!broken_) mark_broken();  // a pad right after a pad
  return std::nullopt;
}

void ring::pop() {
  SLUICE_ASSERT(peeked_record_bytes_ != 0);
  SLUICE_ASSERT(peeked_record_bytes_ <= write_cached_ - read_position_);
  read_position_ += peeked_record_bytes_;
  peeked_record_bytes_ = 0;
  // Release: our reads of the record happen before the producer reuses it.
  header_->read_position.store(read_position_, std::memory_order_release);
}

}  // namespace sluice::transport::shm
