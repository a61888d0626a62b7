#include "runtime/memory/segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string_view>
#include <system_error>

#include "runtime/assert.hpp"
#include "runtime/units.hpp"

// Older C library headers may lack these; the values are the kernel's ABI.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#ifndef MFD_HUGE_2MB
#define MFD_HUGE_2MB (21U << 26)
#endif

namespace sluice {

namespace {

/// Pages populated per madvise call by the prefault thread. Why: bounds how
/// long the destructor waits for the thread to notice it must stop (a
/// 64 MiB populate takes milliseconds), while keeping syscalls few.
constexpr std::uint64_t prefault_chunk_bytes = std::uint64_t{64} << 20;

/// Closes an fd it holds unless release() handed it on.
class fd_guard {
 public:
  explicit fd_guard(int fd) noexcept : fd_(fd) {}
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
  ~fd_guard() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const noexcept { return fd_; }
  int release() noexcept { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

errc code_for_errno(int err) noexcept {
  switch (err) {
    case ENOMEM:
    case ENOSPC:
    case EFBIG:
      return errc::no_capacity;
    case EACCES:
    case EPERM:
      return errc::permission_denied;
    case EBADF:
    case EINVAL:
      return errc::invalid_argument;
    default:
      return errc::unavailable;
  }
}

/// "<what>: <strerror text>", typed by errno.
error os_error(std::string_view what, int err) {
  return fail(code_for_errno(err), std::string(what) + ": " + std::system_category().message(err));
}

error huge_pages_refused(std::string_view what, std::uint64_t size_bytes, int err) {
  return fail(errc::unavailable,
              "huge pages are not available: " + std::string(what) + " for a " +
                  format_size(size_bytes) + " MFD_HUGETLB segment failed (" +
                  std::system_category().message(err) +
                  "); reserve 2 MiB pages (vm.nr_hugepages) or create the segment without "
                  "huge_pages");
}

result<void> check_options(const segment_options& options) {
  if (options.size_bytes == 0) {
    return fail(errc::invalid_argument, "a segment needs a size above 0 bytes");
  }
  if (options.size_bytes > segment_bytes_max) {
    return fail(errc::invalid_argument, "a segment of " + format_size(options.size_bytes) +
                                            " is above the limit of " +
                                            format_size(segment_bytes_max));
  }
  if (options.name.size() > segment_name_bytes_max ||
      options.name.find('\0') != std::string::npos) {
    return fail(errc::invalid_argument, "a segment name must be at most " +
                                            std::to_string(segment_name_bytes_max) +
                                            " bytes without NUL bytes");
  }
  return {};
}

std::uint64_t round_up(std::uint64_t value, std::uint64_t unit) noexcept {
  return (value + unit - 1) / unit * unit;
}

std::uint64_t page_bytes() noexcept {
  long page = ::sysconf(_SC_PAGESIZE);
  return page > 0 ? static_cast<std::uint64_t>(page) : 4096;
}

/// Makes every page of [base, base + size_bytes) writable-resident without
/// changing a byte: an atomic "or 0" per page faults the page in even while
/// other threads or processes already write values there. Only used where
/// the kernel lacks MADV_POPULATE_WRITE (before Linux 5.14).
void touch_pages(std::byte* base, std::uint64_t size_bytes, const std::atomic<bool>& stop) {
  const std::uint64_t page = page_bytes();
  for (std::uint64_t offset = 0; offset < size_bytes; offset += page) {
    if (offset % prefault_chunk_bytes == 0 && stop.load(std::memory_order_relaxed)) return;
    auto* word = reinterpret_cast<std::uint64_t*>(base + offset);
    std::atomic_ref<std::uint64_t>(*word).fetch_or(0, std::memory_order_relaxed);
  }
}

/// The prefault thread's body: populate chunk by chunk until done or told
/// to stop. Best effort: on failure (no memory now) pages simply come on
/// first touch, as they would without prefaulting.
void prefault_pages(std::byte* base, std::uint64_t size_bytes, const std::atomic<bool>& stop) {
  for (std::uint64_t offset = 0; offset < size_bytes; offset += prefault_chunk_bytes) {
    if (stop.load(std::memory_order_relaxed)) return;
    std::uint64_t length = std::min(prefault_chunk_bytes, size_bytes - offset);
    if (::madvise(base + offset, length, MADV_POPULATE_WRITE) == 0) continue;
    if (errno != EINVAL) return;
    touch_pages(base + offset, size_bytes - offset, stop);
    return;
  }
}

}  // namespace

result<std::unique_ptr<segment>> segment::create(const segment_options& options) {
  if (auto checked = check_options(options); !checked) return checked.error();
  const bool huge = options.huge_pages;
  const std::uint64_t size_bytes =
      round_up(options.size_bytes, huge ? huge_page_bytes : page_bytes());

  unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
  if (huge) flags |= MFD_HUGETLB | MFD_HUGE_2MB;
  fd_guard fd{::memfd_create(options.name.c_str(), flags)};
  if (fd.get() < 0) {
    if (huge) return huge_pages_refused("memfd_create", size_bytes, errno);
    return os_error("memfd_create for segment '" + options.name + "'", errno);
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(size_bytes)) != 0) {
    if (huge) return huge_pages_refused("ftruncate", size_bytes, errno);
    return os_error("ftruncate of segment '" + options.name + "' to " + format_size(size_bytes),
                    errno);
  }
  // Sealed before anyone else can hold the fd: from here on no process can
  // resize it, so no mapping of it can ever be cut short (SIGBUS).
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    return os_error("sealing segment '" + options.name + "'", errno);
  }
  void* base = ::mmap(nullptr, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (base == MAP_FAILED) {
    // hugetlbfs reserves every page at mmap time; no reservation, no map.
    if (huge) return huge_pages_refused("mmap", size_bytes, errno);
    return os_error("mmap of segment '" + options.name + "' (" + format_size(size_bytes) + ")",
                    errno);
  }
  std::unique_ptr<segment> out{new segment(fd.release(), static_cast<std::byte*>(base), size_bytes,
                                           access_mode::read_write)};
  if (options.prefault == prefault_mode::background) out->start_prefault();
  return out;
}

result<std::unique_ptr<segment>> segment::attach(int fd, std::uint64_t expected_size_bytes,
                                                 access_mode mode) {
  if (fd < 0)
    return fail(errc::invalid_argument, "attach needs an open fd, got " + std::to_string(fd));
  fd_guard owned{fd};
  if (expected_size_bytes == 0 || expected_size_bytes > segment_bytes_max) {
    return fail(errc::invalid_argument, "attach expects a segment size in (0, " +
                                            format_size(segment_bytes_max) + "], got " +
                                            std::to_string(expected_size_bytes) + " bytes");
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) return os_error("fstat of the segment fd", errno);
  if (!S_ISREG(info.st_mode) || info.st_size < 0 ||
      static_cast<std::uint64_t>(info.st_size) != expected_size_bytes) {
    return fail(errc::invalid_argument,
                "the segment fd is " + std::to_string(info.st_size) + " bytes; expected " +
                    std::to_string(expected_size_bytes) + " bytes (a memfd from the owner)");
  }
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return fail(errc::invalid_argument,
                "the segment fd is not sealed against shrinking (F_SEAL_SHRINK); refusing to map "
                "it, since any holder could truncate it under the mapping");
  }
  int protection = mode == access_mode::read_only ? PROT_READ : PROT_READ | PROT_WRITE;
  void* base = ::mmap(nullptr, expected_size_bytes, protection, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    return os_error("mmap of an attached segment (" + format_size(expected_size_bytes) + ")",
                    errno);
  }
  return std::unique_ptr<segment>{
      new segment(owned.release(), static_cast<std::byte*>(base), expected_size_bytes, mode)};
}

segment::~segment() {
  stop_prefault_.store(true, std::memory_order_relaxed);
  if (prefault_thread_.joinable()) prefault_thread_.join();
  ::munmap(base_, size_bytes_);
  ::close(fd_);
}

void segment::wait_for_prefault() {
  if (prefault_thread_.joinable()) prefault_thread_.join();
}

void segment::start_prefault() {
  SLUICE_ASSERT(!prefault_thread_.joinable());
  std::byte* base = base_;
  std::uint64_t size_bytes = size_bytes_;
  const std::atomic<bool>* stop = &stop_prefault_;
  try {
    prefault_thread_ =
        std::thread([base, size_bytes, stop] { prefault_pages(base, size_bytes, *stop); });
  } catch (const std::system_error&) {
    // No thread to spare: the segment is usable without prefaulting; its
    // pages arrive on first touch instead.
  }
}

}  // namespace sluice
