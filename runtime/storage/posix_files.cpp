#include "runtime/storage/posix_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace sluice::posix {

void unique_fd::reset() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

error errno_error(int err, std::string_view what) {
  std::string message = std::string{what} + ": " + std::strerror(err);
  switch (err) {
    case ENOENT: return error{errc::not_found, message};
    case EACCES:
    case EPERM:
    case EROFS: return error{errc::permission_denied, message};
    case ENOSPC:
    case EDQUOT: return error{errc::no_capacity, message};
    case ENAMETOOLONG:
    case ENOTDIR:
    case EISDIR:
    case ELOOP:
    case EXDEV: return error{errc::invalid_argument, message};
    case EEXIST:
    case ENOTEMPTY: return error{errc::conflict, message};
    default: return error{errc::internal, message};
  }
}

result<unique_fd> open_dir(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error(errno, "open directory '" + path + "'");
  return unique_fd{fd};
}

result<unique_fd> open_beneath(int dir_fd, std::string_view relative, int flags, mode_t mode) {
  std::string path{relative};
  open_how how{};
  how.flags = static_cast<std::uint64_t>(flags | O_CLOEXEC);
  how.mode = (flags & O_CREAT) != 0 ? mode : 0;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  for (;;) {
    long fd = ::syscall(SYS_openat2, dir_fd, path.c_str(), &how, sizeof how);
    if (fd >= 0) return unique_fd{static_cast<int>(fd)};
    // EAGAIN: a concurrent rename raced the lookup; the kernel asks to retry.
    if (errno != EINTR && errno != EAGAIN) return errno_error(errno, "open '" + path + "'");
  }
}

result<unique_fd> open_subdir(int dir_fd, std::string_view relative, bool create) {
  auto current = open_beneath(dir_fd, ".", O_RDONLY | O_DIRECTORY);
  if (!current) return current;
  std::string_view rest = relative;
  while (!rest.empty()) {
    auto slash = rest.find('/');
    std::string segment{rest.substr(0, slash)};
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (create && ::mkdirat(current->get(), segment.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_error(errno, "create directory '" + segment + "'");
    }
    auto next = open_beneath(current->get(), segment, O_RDONLY | O_DIRECTORY);
    if (!next) return next;
    current = std::move(next);
  }
  return current;
}

result<std::vector<dir_entry>> read_dir(int dir_fd) {
  // fdopendir takes ownership of its fd, so it gets a duplicate.
  int copy = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return errno_error(errno, "open directory for listing");
  DIR* dir = ::fdopendir(copy);
  if (dir == nullptr) {
    ::close(copy);
    return errno_error(errno, "list directory");
  }
  std::vector<dir_entry> out;
  while (auto* e = ::readdir(dir)) {
    std::string_view name{e->d_name};
    if (name == "." || name == "..") continue;
    unsigned char type = e->d_type;
    if (type == DT_UNKNOWN) {
      struct stat st {};
      if (::fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      type = S_ISDIR(st.st_mode) ? DT_DIR : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
    }
    if (type != DT_DIR && type != DT_REG) continue;
    out.push_back(dir_entry{.name = std::string{name}, .is_dir = type == DT_DIR});
  }
  ::closedir(dir);
  return out;
}

result<void> sync_fd(int fd, std::string_view what) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno_error(errno, "fsync " + std::string{what});
  }
  return {};
}

}  // namespace sluice::posix
