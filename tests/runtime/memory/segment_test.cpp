#include "runtime/memory/segment.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using sluice::access_mode;
using sluice::errc;
using sluice::segment;
using sluice::segment_options;

std::unique_ptr<segment> make_segment(
    std::uint64_t size_bytes, sluice::prefault_mode prefault = sluice::prefault_mode::none) {
  segment_options options;
  options.name = "segment-test";
  options.size_bytes = size_bytes;
  options.prefault = prefault;
  auto created = segment::create(options);
  REQUIRE_MESSAGE(created.ok(), created.error().to_string());
  return std::move(*created);
}

/// Runs `body` in a forked child and returns its wait status. The child
/// reports through its exit code (0 = passed) and never returns into doctest;
/// doctest's own crash handlers are reset so a signal ends it plainly.
template <class Body>
int run_in_child(Body body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGSEGV, SIG_DFL);
    std::signal(SIGBUS, SIG_DFL);
    std::signal(SIGABRT, SIG_DFL);
    int code = 98;
    try {
      code = body();
    } catch (...) {
      code = 99;
    }
    ::_exit(code);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

bool exited_cleanly(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/// The permission field ("r--s", "rw-s") of the mapping that starts at `base`.
std::string mapping_permissions(const void* base) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto start = reinterpret_cast<std::uintptr_t>(base);
  while (std::getline(maps, line)) {
    std::istringstream fields(line);
    std::string range;
    std::string permissions;
    fields >> range >> permissions;
    if (std::stoull(range.substr(0, range.find('-')), nullptr, 16) == start) return permissions;
  }
  return {};
}

std::uint8_t pattern_at(std::uint64_t i) { return static_cast<std::uint8_t>(i * 131 + 7); }

}  // namespace

TEST_CASE("segment: a new segment is mapped read-write and rounded up to the page size") {
  auto seg = make_segment(1000);
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  CHECK(seg->size_bytes() == page);
  CHECK(seg->fd() >= 0);
  CHECK(seg->mode() == access_mode::read_write);
  CHECK(reinterpret_cast<std::uintptr_t>(seg->base()) % page == 0);
  std::memset(seg->base(), 0xab, seg->size_bytes());
  CHECK(seg->base()[page - 1] == std::byte{0xab});
  CHECK(mapping_permissions(seg->base()) == "rw-s");
}

TEST_CASE("segment: bad options are refused with invalid_argument") {
  segment_options options;
  options.size_bytes = 0;
  CHECK(segment::create(options).code() == errc::invalid_argument);
  options.size_bytes = sluice::segment_bytes_max + 1;
  CHECK(segment::create(options).code() == errc::invalid_argument);
  options.size_bytes = 4096;
  options.name = std::string(sluice::segment_name_bytes_max + 1, 'x');
  CHECK(segment::create(options).code() == errc::invalid_argument);
}

TEST_CASE("segment: the size is sealed so no holder can shrink or grow it") {
  auto seg = make_segment(64 * 1024);
  const int seals = ::fcntl(seg->fd(), F_GET_SEALS);
  CHECK((seals & F_SEAL_SHRINK) != 0);
  CHECK((seals & F_SEAL_GROW) != 0);
  CHECK((seals & F_SEAL_SEAL) != 0);
  CHECK(::ftruncate(seg->fd(), 4096) != 0);
  CHECK(errno == EPERM);
  CHECK(::ftruncate(seg->fd(), 1 << 20) != 0);
  // The seals themselves are sealed: nobody can take them off or add more.
  CHECK(::fcntl(seg->fd(), F_ADD_SEALS, F_SEAL_WRITE) != 0);
}

TEST_CASE("segment: a forked child attaches read-only and reads what the parent wrote") {
  auto seg = make_segment(256 * 1024);
  for (std::uint64_t i = 0; i < seg->size_bytes(); ++i) seg->base()[i] = std::byte{pattern_at(i)};
  const int fd = seg->fd();
  const std::uint64_t size_bytes = seg->size_bytes();

  int status = run_in_child([fd, size_bytes] {
    auto attached = segment::attach(::dup(fd), size_bytes, access_mode::read_only);
    if (!attached) return 1;
    const std::byte* base = (*attached)->base();
    for (std::uint64_t i = 0; i < size_bytes; ++i) {
      if (base[i] != std::byte{pattern_at(i)}) return 2;
    }
    if (mapping_permissions(base) != "r--s") return 3;
    return 0;
  });
  CHECK(exited_cleanly(status));
}

TEST_CASE("segment: writing through a read-only attachment kills the writer") {
  auto seg = make_segment(4096);
  const int fd = seg->fd();
  int status = run_in_child([fd] {
    auto attached = segment::attach(::dup(fd), 4096, access_mode::read_only);
    if (!attached) return 1;
    auto* target = reinterpret_cast<volatile std::uint8_t*>((*attached)->base());
    *target = 1;  // must fault: the mapping is PROT_READ
    return 0;
  });
  REQUIRE(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGSEGV);
  CHECK(seg->base()[0] == std::byte{0});
}

TEST_CASE("segment: a read-write attachment writes bytes the owner sees") {
  auto seg = make_segment(4096);
  const int fd = seg->fd();
  int status = run_in_child([fd] {
    auto attached = segment::attach(::dup(fd), 4096, access_mode::read_write);
    if (!attached) return 1;
    std::memcpy((*attached)->base() + 64, "from the child", 14);
    return 0;
  });
  REQUIRE(exited_cleanly(status));
  CHECK(std::memcmp(seg->base() + 64, "from the child", 14) == 0);
}

TEST_CASE("segment: attach refuses an fd of the wrong size") {
  auto seg = make_segment(8192);
  auto too_big = segment::attach(::dup(seg->fd()), 8192 + 4096, access_mode::read_only);
  CHECK(too_big.code() == errc::invalid_argument);
  auto too_small = segment::attach(::dup(seg->fd()), 4096, access_mode::read_only);
  CHECK(too_small.code() == errc::invalid_argument);
  auto zero = segment::attach(::dup(seg->fd()), 0, access_mode::read_only);
  CHECK(zero.code() == errc::invalid_argument);
  auto right = segment::attach(::dup(seg->fd()), 8192, access_mode::read_only);
  CHECK(right.ok());
}

TEST_CASE("segment: attach refuses an fd that is not sealed against shrinking") {
  const int unsealable = ::memfd_create("not-sealable", MFD_CLOEXEC);
  REQUIRE(unsealable >= 0);
  REQUIRE(::ftruncate(unsealable, 4096) == 0);
  auto refused = segment::attach(unsealable, 4096, access_mode::read_only);
  CHECK(refused.code() == errc::invalid_argument);
  CHECK(refused.error().message().find("sealed") != std::string::npos);

  // Sealable, and sealed against growing only: still shrinkable, still refused.
  const int grow_only = ::memfd_create("grow-only", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  REQUIRE(grow_only >= 0);
  REQUIRE(::ftruncate(grow_only, 4096) == 0);
  REQUIRE(::fcntl(grow_only, F_ADD_SEALS, F_SEAL_GROW) == 0);
  CHECK(segment::attach(grow_only, 4096, access_mode::read_only).code() == errc::invalid_argument);
}

TEST_CASE("segment: attach refuses fds that are not memory files") {
  CHECK(segment::attach(-1, 4096, access_mode::read_only).code() == errc::invalid_argument);
  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  ::close(pipe_fds[1]);
  CHECK(segment::attach(pipe_fds[0], 4096, access_mode::read_only).code() ==
        errc::invalid_argument);
}

TEST_CASE("segment: a read-only fd attaches read-only but not read-write") {
  // How an owner can hand a client a segment it cannot write: reopen the
  // memfd read-only through /proc.
  auto seg = make_segment(4096);
  const std::string path = "/proc/self/fd/" + std::to_string(seg->fd());
  const int read_only_fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(read_only_fd >= 0);
  auto writable = segment::attach(::dup(read_only_fd), 4096, access_mode::read_write);
  CHECK(writable.code() == errc::permission_denied);
  auto readable = segment::attach(read_only_fd, 4096, access_mode::read_only);
  CHECK(readable.ok());
}

TEST_CASE("segment: background prefault leaves it usable at once and populates every page") {
  constexpr std::uint64_t size_bytes = 8 << 20;
  auto seg = make_segment(size_bytes, sluice::prefault_mode::background);
  // Usable before the prefault has finished (or even started).
  seg->base()[0] = std::byte{1};
  seg->base()[size_bytes - 1] = std::byte{2};
  seg->wait_for_prefault();

  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident(size_bytes / page);
  REQUIRE(::mincore(seg->base(), size_bytes, resident.data()) == 0);
  std::uint64_t resident_pages = 0;
  for (unsigned char flag : resident) resident_pages += flag & 1U;
  CHECK(resident_pages == resident.size());
  // Prefaulting never changes a byte.
  CHECK(seg->base()[0] == std::byte{1});
  CHECK(seg->base()[size_bytes - 1] == std::byte{2});
  CHECK(seg->base()[size_bytes / 2] == std::byte{0});
}

TEST_CASE("segment: destroying a segment stops its prefault thread") {
  // Destroyed at once: the destructor must stop and join the thread, not hang
  // or leave it touching unmapped memory.
  auto seg = make_segment(32 << 20, sluice::prefault_mode::background);
  seg.reset();
  CHECK(seg == nullptr);
}

TEST_CASE("segment: huge pages either work or fail cleanly with unavailable") {
  segment_options options;
  options.name = "segment-test-huge";
  options.size_bytes = 1 << 20;
  options.huge_pages = true;
  auto created = segment::create(options);
  if (created.ok()) {
    MESSAGE("huge pages are available here");
    CHECK((*created)->size_bytes() == sluice::huge_page_bytes);
    (*created)->base()[0] = std::byte{1};
    CHECK((*created)->base()[0] == std::byte{1});
  } else {
    MESSAGE("huge pages refused: " << created.error().to_string());
    CHECK(created.code() == errc::unavailable);
    CHECK(created.error().message().find("huge pages") != std::string::npos);
  }
}
