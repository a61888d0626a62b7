// One memfd-backed shared-memory segment: what an owner contributes to its
// pool and what a local client maps to read values in place (design.md,
// "Transports", shm row: segments travel as fds over SCM_RIGHTS).
//
// A segment is a resource: one owner, not copyable, not movable (a
// background prefault thread may hold its address). Two ways to get one:
//
//   create()  the owner side: memfd_create, ftruncate, seal the size, map
//             it read-write. The seals (F_SEAL_SHRINK | F_SEAL_GROW |
//             F_SEAL_SEAL) mean no process that holds the fd can ever
//             truncate it, so a client's mapping can never SIGBUS.
//   attach()  the client side: takes an fd received from the owner, checks
//             its size and that it is sealed against shrinking, maps it.
//
// Thread safety: a segment object is used by one thread at a time. The
// mapped bytes are shared memory; who writes them when is the caller's
// protocol, not this class's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "sluice/result.hpp"

namespace sluice {

/// Largest segment accepted. Why: far above any real pool segment (1 GiB
/// is the usual size), low enough to catch a unit mistake ("4TB" for
/// "4GB") before the kernel is asked for it.
inline constexpr std::uint64_t segment_bytes_max = std::uint64_t{1} << 40;  // 1 TiB

/// Size of a huge page as used here (MFD_HUGE_2MB); huge-page segments are
/// rounded up to a multiple of it.
inline constexpr std::uint64_t huge_page_bytes = std::uint64_t{2} << 20;

/// Longest memfd name accepted (the kernel's limit: 249 bytes plus the
/// "memfd:" prefix make NAME_MAX).
inline constexpr std::size_t segment_name_bytes_max = 249;

/// How a freshly created segment gets its physical pages.
enum class prefault_mode : std::uint8_t {
  none,        ///< Pages are allocated by the kernel on first touch.
  background,  ///< A thread populates every page (MADV_POPULATE_WRITE) while the
               ///< segment is already in use, so first touches rarely fault.
};

/// How attach() maps a segment. Not named `access` so it never collides
/// with access(2) from <unistd.h>.
enum class access_mode : std::uint8_t {
  read_only,   ///< PROT_READ: a client reading values in place.
  read_write,  ///< PROT_READ | PROT_WRITE: a client writing a value it was lent.
};

struct segment_options {
  /// Shown in /proc/<pid>/maps as "memfd:<name>"; for debugging only.
  /// REQUIRES: at most segment_name_bytes_max bytes, no NUL byte.
  std::string name = "sluice";
  /// Rounded up to the page size (to huge_page_bytes with huge_pages).
  /// REQUIRES: 0 < size_bytes <= segment_bytes_max.
  std::uint64_t size_bytes = 0;
  /// Back the segment with 2 MiB huge pages (MFD_HUGETLB). When the kernel
  /// has none to give, create() fails with errc::unavailable and a message
  /// that says so; falling back to normal pages is the caller's choice.
  bool huge_pages = false;
  prefault_mode prefault = prefault_mode::none;
};

class segment {
 public:
  /// Creates, seals and maps a new segment read-write.
  /// Errors: invalid_argument (bad options), no_capacity (the kernel has no
  /// memory for it), unavailable (huge pages refused, other OS failures).
  static result<std::unique_ptr<segment>> create(const segment_options& options);

  /// Maps a segment received from its owner. Takes ownership of `fd`
  /// whatever the outcome: on failure the fd is closed.
  /// Refuses (invalid_argument) an fd whose size is not exactly
  /// `expected_size_bytes` or that is not sealed against shrinking — a
  /// process holding such an fd could truncate it under us.
  /// Errors: invalid_argument, permission_denied (e.g. read_write on an fd
  /// opened read-only), no_capacity, unavailable.
  static result<std::unique_ptr<segment>> attach(int fd, std::uint64_t expected_size_bytes,
                                                 access_mode mode);

  segment(const segment&) = delete;
  segment& operator=(const segment&) = delete;
  segment(segment&&) = delete;
  segment& operator=(segment&&) = delete;
  /// Stops and joins the prefault thread, unmaps, closes the fd.
  ~segment();

  /// The first byte of the mapping; valid for size_bytes() bytes. Writing
  /// through it is only allowed when mode() is read_write.
  std::byte* base() const noexcept { return base_; }
  /// The mapped size: the requested size after rounding.
  std::uint64_t size_bytes() const noexcept { return size_bytes_; }
  /// The memfd, for passing to clients. Still owned by this segment.
  int fd() const noexcept { return fd_; }
  access_mode mode() const noexcept { return mode_; }

  /// Blocks until the background prefault (if any) has finished. For tests
  /// and for callers that want a fully populated pool before serving.
  void wait_for_prefault();

 private:
  segment(int fd, std::byte* base, std::uint64_t size_bytes, access_mode mode) noexcept
      : fd_(fd), base_(base), size_bytes_(size_bytes), mode_(mode) {}

  void start_prefault();

  int fd_;
  std::byte* base_;
  std::uint64_t size_bytes_;
  access_mode mode_;
  /// Set by the destructor so the prefault thread stops at its next chunk.
  std::atomic<bool> stop_prefault_{false};
  std::thread prefault_thread_;
};

}  // namespace sluice
