// ring: a single-producer single-consumer ring of variable-length records
// in a shared-memory area that two processes map (design.md, "Transports",
// shm row). The client writes requests into one ring and the owner answers
// through another.
//
// Layout of the area (byte offsets; pinned by static_asserts in ring.cpp,
// bump ring_version when any of it changes):
//
//     0  control line    magic u64, version u32, capacity_bytes u32,
//                        closed atomic u32        (written once, then read)
//   128  producer line   write_position atomic u64 (bytes ever committed)
//   256  consumer line   read_position  atomic u64 (bytes ever consumed)
//   384  consumer wake   futex word u32: the consumer sleeps for data
//   512  producer wake   futex word u32: the producer sleeps for room
//   640  data area       capacity_bytes bytes (a power of two)
//
// Each part sits on its own 128-byte line (two 64-byte lines: the adjacent
// line prefetcher moves pairs) so the two sides never false-share.
//
// Records, all 8-byte aligned, never wrapping around the end of the area:
//
//     record  = header payload padding-to-8
//     header  = length u32, tag u32   (tag: ring_record_tag or ring_pad_tag)
//     pad     = header whose length covers the rest of the data area; the
//               producer writes one when a record does not fit before the
//               end and restarts at offset 0.
//
// Positions are 64-bit byte counters that only grow; the offset in the
// data area is position & (capacity - 1). They never overflow in practice
// (2^64 bytes at 100 GB/s is 5 years).
//
// Trust: the peer may be buggy, crashed or hostile. Each side keeps its
// own position in process memory (authoritative) and only publishes it;
// everything read from the area — the peer's position, record headers — is
// copied once and checked against the bounds before use. Any inconsistency
// marks this handle broken: every later call fails (empty/false) and the
// caller should close the channel. Payload spans returned by peek() point
// into shared memory: a hostile peer may change those bytes while they
// are read, so copy before validating anything that steers control flow.
//
// Thread safety: one producer and one consumer, which may be in different
// processes. Each side uses its own handle (format() or attach() gives
// one; a side may attach() the area again in its own process) from one
// thread at a time; a handle holds both sides' local state, so two threads
// must never share one.
// A handle does not own the area; the mapping must outlive it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "sluice/result.hpp"

namespace sluice::transport::shm {

/// Bytes per header part: two cache lines (see the layout above).
inline constexpr std::size_t ring_line_bytes = 128;
/// Bytes before the data area. Pinned: part of the shared layout.
inline constexpr std::size_t ring_header_bytes = 5 * ring_line_bytes;
/// Bytes of a record header (length + tag); also the record alignment.
inline constexpr std::uint32_t ring_record_header_bytes = 8;
/// Smallest data area. Why: below one page the records that fit (at most
/// half the area) are too small to be useful.
inline constexpr std::uint32_t ring_capacity_bytes_min = 4096;
/// Largest data area. Why: keeps every offset and length in a u32 with
/// room to spare; a bigger value in a header is a unit mistake or garbage.
inline constexpr std::uint32_t ring_capacity_bytes_max = std::uint32_t{1} << 30;
/// The magic number at offset 0: "SLUICERG" read as little-endian bytes.
inline constexpr std::uint64_t ring_magic = 0x4752'4543'4955'4c53ULL;
/// Layout version; attach() refuses any other.
inline constexpr std::uint32_t ring_version = 1;
/// Record header tags ("REC1", "PAD1" as little-endian bytes). Pinned.
/// Zeroed or random memory is unlikely to carry either.
inline constexpr std::uint32_t ring_record_tag = 0x3143'4552;
inline constexpr std::uint32_t ring_pad_tag = 0x3144'4150;

/// Futex word values (consumer wake and producer wake words).
inline constexpr std::uint32_t ring_awake = 0;
inline constexpr std::uint32_t ring_sleeping = 1;

/// Bytes an area needs for a ring of `capacity_bytes`.
constexpr std::size_t ring_area_bytes(std::uint32_t capacity_bytes) noexcept {
  return ring_header_bytes + capacity_bytes;
}

/// The largest payload a ring of `capacity_bytes` accepts: a record (header
/// included) takes at most half the data area. Why half: then a record
/// always fits once the ring is empty, wherever the write offset is (the
/// pad before it is shorter than the record's own offset), so a producer
/// waiting for room never waits forever.
constexpr std::uint32_t ring_record_bytes_max(std::uint32_t capacity_bytes) noexcept {
  return capacity_bytes / 2 - ring_record_header_bytes;
}

struct ring_header;

class ring {
 public:
  /// Creator side: writes a fresh header (empty, open) into `area` and
  /// returns a handle. Errors: invalid_argument when `area` is not 64-byte
  /// aligned, `capacity_bytes` is not a power of two in
  /// [ring_capacity_bytes_min, ring_capacity_bytes_max], or the area is
  /// smaller than ring_area_bytes(capacity_bytes).
  static result<ring> format(std::span<std::byte> area, std::uint32_t capacity_bytes);

  /// Peer side: checks the header the creator wrote (magic, version,
  /// capacity, positions) and returns a handle. Errors: invalid_argument
  /// (area too small or misaligned), protocol (garbage or another version).
  /// REQUIRES: no records move while attaching (the two positions are read
  /// as a pair), e.g. attach during channel setup, before traffic starts.
  static result<ring> attach(std::span<std::byte> area);

  ring(ring&& other) noexcept;
  ring& operator=(ring&& other) noexcept;
  ring(const ring&) = delete;  // two handles must never share local positions by copy
  ring& operator=(const ring&) = delete;
  ~ring() = default;

  // --- producer ---

  /// Room for a record of `length` payload bytes, to build in place. The
  /// record is invisible to the consumer until commit(). Calling reserve()
  /// again before commit() replaces the reservation. Nothing when the ring
  /// has no room now, `length` > record_bytes_max() (never fits), or the
  /// ring is broken.
  std::optional<std::span<std::byte>> reserve(std::uint32_t length);
  /// Publishes the reserved record. REQUIRES: a reservation is pending.
  /// Does not wake a sleeping consumer: call notify_consumer() (waiter.hpp)
  /// after one commit or a batch of them.
  void commit();
  /// Publishes only the first `length` bytes of the reservation (reserve
  /// an upper bound, encode, commit what was written).
  /// REQUIRES: a reservation is pending; length <= its length.
  void commit(std::uint32_t length);
  /// reserve + copy + commit. False when there is no room, the record is
  /// too long, or the ring is broken.
  bool try_push(std::span<const std::byte> payload);
  /// Whether reserve(length) would succeed now (re-reads the consumer's
  /// position when the cached one shows no room).
  bool writable(std::uint32_t length);

  // --- consumer ---

  /// The oldest committed record's payload, without removing it. Nothing
  /// when the ring is empty or broken (see broken()). Repeated peeks return
  /// the same record.
  std::optional<std::span<const std::byte>> peek();
  /// Removes the record the last peek() returned, giving its room back to
  /// the producer. REQUIRES: peek() returned a record since the last pop().
  /// Does not wake a sleeping producer: call notify_producer() (waiter.hpp).
  void pop();

  // --- both sides ---

  /// Marks the ring closed for both sides (a flag in shared memory). Does
  /// not wake sleepers: close_and_wake() (waiter.hpp) does both.
  void close() noexcept;
  /// True once either side closed the ring.
  bool closed() const noexcept;
  /// True once this handle found the shared state inconsistent.
  bool broken() const noexcept { return broken_; }

  std::uint32_t capacity_bytes() const noexcept { return capacity_bytes_; }
  std::uint32_t record_bytes_max() const noexcept { return ring_record_bytes_max(capacity_bytes_); }

  /// The futex words (waiter.hpp uses them). Shared memory: any value may
  /// appear in them; they steer only sleeping, never memory accesses.
  std::atomic<std::uint32_t>& consumer_wake_word() const noexcept;
  std::atomic<std::uint32_t>& producer_wake_word() const noexcept;

 private:
  ring(ring_header* header, std::uint32_t capacity_bytes, std::uint64_t write_position,
       std::uint64_t read_position) noexcept;

  /// Loads the consumer's position and checks it lies in
  /// [read_cached_, write_position_]; marks broken otherwise.
  bool refresh_read_position();
  /// Loads the producer's position and checks it lies in
  /// [write_cached_, read_position_ + capacity]; marks broken otherwise.
  bool refresh_write_position();
  /// Bytes a record of `record_bytes` needs at the current write offset,
  /// counting the pad when it must restart at offset 0.
  std::uint64_t bytes_needed(std::uint64_t record_bytes) const noexcept;
  /// Skips a pad at the read offset; false (broken) when it is not valid.
  bool skip_pad(std::uint32_t pad_length);
  void mark_broken() noexcept { broken_ = true; }
  std::byte* data() const noexcept;

  ring_header* header_ = nullptr;  // not owned: the caller's mapping
  std::uint32_t capacity_bytes_ = 0;
  bool broken_ = false;

  // Producer state. write_position_ is authoritative (never re-read).
  std::uint64_t write_position_ = 0;
  std::uint64_t read_cached_ = 0;            // last checked consumer position
  std::uint32_t reserved_bytes_ = 0;         // payload bytes of the pending reservation
  bool reserved_ = false;

  // Consumer state. read_position_ is authoritative (never re-read).
  std::uint64_t read_position_ = 0;
  std::uint64_t write_cached_ = 0;           // last checked producer position
  std::uint32_t peeked_record_bytes_ = 0;    // aligned size of the peeked record
};

}  // namespace sluice::transport::shm
