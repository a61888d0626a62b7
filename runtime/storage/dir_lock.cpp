#include "runtime/storage/dir_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace sluice {
namespace {

/// The process id the holder wrote into the file, or empty.
std::string holder_of(int fd) {
  char text[32] = {};
  auto n = ::pread(fd, text, sizeof text - 1, 0);
  if (n <= 0) return {};
  std::string out{text, static_cast<std::size_t>(n)};
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

}  // namespace

result<std::unique_ptr<dir_lock>> dir_lock::acquire(const std::string& dir) {
  auto path = (std::filesystem::path{dir} / "LOCK").string();
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return fail(errc::unavailable, "cannot open '" + path + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    auto why = errno;
    auto holder = why == EWOULDBLOCK ? holder_of(fd) : std::string{};
    ::close(fd);
    if (why != EWOULDBLOCK) return fail(errc::unavailable, "cannot lock '" + path + "': " + std::strerror(why));
    return fail(errc::unavailable, "the data directory '" + dir + "' is in use by another master" +
                                       (holder.empty() ? std::string{} : " (process " + holder + ")") +
                                       "; stop it, or give this one another --data-dir");
  }
  // Who holds it, for the message above; the lock itself is the flock.
  auto pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The id is a courtesy to the person reading the error; the lock holds without it.
  }
  return std::unique_ptr<dir_lock>{new dir_lock{fd}};
}

dir_lock::~dir_lock() { ::close(fd_); }

}  // namespace sluice
