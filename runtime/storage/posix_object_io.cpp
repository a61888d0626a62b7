#include "runtime/storage/posix_object_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/assert.hpp"
#include "runtime/storage/meta_record.hpp"

namespace sluice::posix {
namespace {

/// A record bigger than this is not ours (ext4 keeps all of a file's
/// xattrs in one 4 KiB block).
constexpr std::size_t record_bytes_max = 4096;

bool xattrs_unsupported(int err) { return err == ENOTSUP || err == EOPNOTSUPP; }

std::optional<meta_record> read_record(int fd) {
  char buffer[record_bytes_max];
  ssize_t n = ::fgetxattr(fd, meta_xattr_name, buffer, sizeof buffer);
  if (n <= 0) return std::nullopt;
  return decode_meta_record(std::string_view{buffer, static_cast<std::size_t>(n)});
}

file_identity identity_of(const struct stat& st) {
  return file_identity{.size = static_cast<std::uint64_t>(st.st_size),
                       .mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                       .inode = static_cast<std::uint64_t>(st.st_ino)};
}

class posix_reader final : public object_reader {
 public:
  posix_reader(unique_fd fd, object_stat stat) : fd_(std::move(fd)), stat_(std::move(stat)) {}
  const object_stat& stat() const override { return stat_; }

  result<std::size_t> read(std::uint64_t offset, std::span<std::byte> into) override {
    std::size_t done = 0;
    while (done < into.size()) {
      ssize_t n = ::pread(fd_.get(), into.data() + done, into.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error(errno, "read object");
      if (n == 0) break;
      done += static_cast<std::size_t>(n);
    }
    return done;
  }

 private:
  unique_fd fd_;
  object_stat stat_;
};

class posix_writer final : public object_writer {
 public:
  posix_writer(unique_fd dir, unique_fd file, std::string name, std::string temp)
      : dir_(std::move(dir)), file_(std::move(file)), name_(std::move(name)), temp_(std::move(temp)) {}

  ~posix_writer() override {
    // Not committed: the temp file goes, and nothing became visible.
    if (!committed_) ::unlinkat(dir_.get(), temp_.c_str(), 0);
  }

  result<void> write(std::span<const std::byte> bytes) override {
    SLUICE_ASSERT(!committed_);
    std::size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::write(file_.get(), bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno_error(errno, "write object '" + name_ + "'");
      done += static_cast<std::size_t>(n);
    }
    return {};
  }

  result<void> set_mtime(std::int64_t mtime_ns) override {
    SLUICE_ASSERT(!committed_);
    mtime_ns_ = mtime_ns;
    return {};
  }

  result<file_identity> commit(const object_meta& meta) override {
    SLUICE_ASSERT(!committed_);
    if (mtime_ns_) {
      // The last write is done: set the time now, or a later write would move it.
      timespec times[2]{{.tv_sec = 0, .tv_nsec = UTIME_OMIT},
                        {.tv_sec = *mtime_ns_ / 1'000'000'000, .tv_nsec = *mtime_ns_ % 1'000'000'000}};
      if (::futimens(file_.get(), times) != 0) return errno_error(errno, "set the time of object '" + name_ + "'");
    }
    struct stat st {};
    if (::fstat(file_.get(), &st) != 0) return errno_error(errno, "stat new object '" + name_ + "'");
    auto identity = identity_of(st);
    // The record goes on the temp file, so it is renamed in with the bytes.
    if (auto set = set_record(file_.get(), identity, meta); !set) return set.error();
    if (auto synced = sync_fd(file_.get(), "object '" + name_ + "'"); !synced) return synced.error();
    if (::renameat(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str()) != 0) {
      return errno_error(errno, "rename into place '" + name_ + "'");
    }
    committed_ = true;
    // The rename itself is durable only once the directory is.
    if (auto synced = sync_fd(dir_.get(), "directory of '" + name_ + "'"); !synced) return synced.error();
    return identity;
  }

 private:
  unique_fd dir_;
  unique_fd file_;
  std::string name_;
  std::string temp_;
  std::optional<std::int64_t> mtime_ns_{};
  bool committed_ = false;
};

}  // namespace

result<std::optional<object_stat>> stat_fd(int fd, std::string_view what, bool with_record) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return errno_error(errno, "stat " + std::string{what});
  if (!S_ISREG(st.st_mode)) return std::optional<object_stat>{};
  object_stat out{.identity = identity_of(st)};
  if (with_record) out.meta = record_of(fd, out.identity);
  return std::optional<object_stat>{std::move(out)};
}

std::optional<object_meta> record_of(int fd, const file_identity& identity) {
  auto record = read_record(fd);
  if (record && record->identity == identity) return std::move(record->meta);
  return std::nullopt;
}

result<std::optional<object_stat>> stat_at(int dir_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<object_stat>{};
    return errno_error(errno, "stat " + name);
  }
  if (!S_ISREG(st.st_mode)) return std::optional<object_stat>{};
  return std::optional<object_stat>{object_stat{.identity = identity_of(st)}};
}

result<void> set_record(int fd, const file_identity& of, const object_meta& meta) {
  auto text = encode_meta_record(meta_record{.identity = of, .meta = meta});
  if (text.size() > record_bytes_max) {
    return fail(errc::invalid_argument, "the object's metadata is larger than " + std::to_string(record_bytes_max) +
                                            " bytes once encoded");
  }
  if (::fsetxattr(fd, meta_xattr_name, text.data(), text.size(), 0) != 0 && !xattrs_unsupported(errno)) {
    return errno_error(errno, "set the object's metadata");
  }
  return {};
}

std::unique_ptr<object_reader> make_reader(unique_fd fd, object_stat stat) {
  return std::make_unique<posix_reader>(std::move(fd), std::move(stat));
}

namespace {

/// A reader that opens its file at the first read, and reads only when
/// the file opened is the one stat() describes.
class lazy_reader final : public object_reader {
 public:
  lazy_reader(int dir_fd, std::string name, object_stat stat)
      : dir_fd_(dir_fd), name_(std::move(name)), stat_(std::move(stat)) {}
  const object_stat& stat() const override { return stat_; }

  result<std::size_t> read(std::uint64_t offset, std::span<std::byte> into) override {
    if (!file_) {
      auto fd = open_beneath(dir_fd_, name_, O_RDONLY | O_NONBLOCK);
      if (!fd) return std::move(fd).error();
      auto now = stat_fd(fd->get(), name_, false);
      if (!now) return std::move(now).error();
      if (!*now || (*now)->identity != stat_.identity) {
        return fail(errc::aborted, "the object '" + name_ + "' changed while it was being read");
      }
      file_ = make_reader(std::move(*fd), stat_);
    }
    return file_->read(offset, into);
  }

 private:
  int dir_fd_;
  std::string name_;
  object_stat stat_;
  std::unique_ptr<object_reader> file_;
};

}  // namespace

std::unique_ptr<object_reader> make_lazy_reader(int dir_fd, std::string name, object_stat stat) {
  return std::make_unique<lazy_reader>(dir_fd, std::move(name), std::move(stat));
}

result<std::unique_ptr<object_writer>> make_writer(unique_fd dir, std::string name, std::string temp_name) {
  int fd = ::openat(dir.get(), temp_name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return errno_error(errno, "create temp file for '" + name + "'");
  return std::unique_ptr<object_writer>{
      std::make_unique<posix_writer>(std::move(dir), unique_fd{fd}, std::move(name), std::move(temp_name))};
}

}  // namespace sluice::posix
