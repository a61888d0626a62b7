#include "runtime/storage/posix_bucket_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "runtime/storage/posix_files.hpp"
#include "runtime/storage/posix_object_io.hpp"

namespace sluice {
namespace {

using posix::unique_fd;

constexpr std::string_view temp_prefix = ".sluice-tmp-";
constexpr std::string_view uploads_dir = ".sluice-uploads";
/// A write whose directory another request's remove pruned meanwhile is
/// tried again this many times.
constexpr int create_attempts_max = 4;
/// Files up to this size are opened lazily (see open()).
constexpr std::uint64_t lazy_open_bytes_max = 64 << 10;

bool is_hidden(std::string_view name) { return name.starts_with(hidden_prefix); }

/// (parent directory, last segment) of a key.
std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  auto slash = key.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view{}, key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

// Directory markers: a key ending in '/' names a directory, and is an
// object (empty) while that directory is marked — made by a PUT of the
// key — or holds nothing at all. The mark is an xattr on the directory;
// where there are none, only empty directories are markers.
constexpr const char* marker_xattr_name = "user.sluice.dir";
/// The MD5 of no bytes: every marker's ETag.
constexpr std::string_view empty_md5 = "d41d8cd98f00b204e9800998ecf8427e";

bool is_marked(int dir_fd) { return ::fgetxattr(dir_fd, marker_xattr_name, nullptr, 0) >= 0; }

/// Nothing at all, not even a temp file: a directory a PUT in progress
/// just made is not a marker.
bool holds_nothing(int dir_fd) {
  auto entries = posix::read_dir(dir_fd);
  return entries && entries->empty();
}

/// The marker `dir_fd` is, when it is one.
std::optional<object_stat> marker_stat(int dir_fd) {
  if (!is_marked(dir_fd) && !holds_nothing(dir_fd)) return std::nullopt;
  struct stat st {};
  if (::fstat(dir_fd, &st) != 0) return std::nullopt;
  return object_stat{.identity = {.size = 0,
                                  .mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                                              st.st_mtim.tv_nsec,
                                  .inode = static_cast<std::uint64_t>(st.st_ino)},
                     .meta = object_meta{.etag = std::string{empty_md5}}};
}

class marker_reader final : public object_reader {
 public:
  explicit marker_reader(object_stat stat) : stat_(std::move(stat)) {}
  const object_stat& stat() const override { return stat_; }
  result<std::size_t> read(std::uint64_t, std::span<std::byte>) override { return std::size_t{0}; }

 private:
  object_stat stat_;
};

/// A PUT of a marker: no bytes; the commit makes (or marks) the directory.
class marker_writer final : public object_writer {
 public:
  marker_writer(unique_fd bucket_fd, std::string dir) : bucket_fd_(std::move(bucket_fd)), dir_(std::move(dir)) {}

  result<void> write(std::span<const std::byte> bytes) override {
    if (bytes.empty()) return {};
    return fail(errc::invalid_argument, "'" + dir_ + "/' names a directory: an object whose key ends in '/' is empty");
  }

  result<file_identity> commit(const object_meta&) override {
    auto dir = posix::open_subdir(bucket_fd_.get(), dir_, true);
    if (!dir) return std::move(dir).error();
    if (::fsetxattr(dir->get(), marker_xattr_name, "1", 1, 0) != 0 && errno != ENOTSUP && errno != EOPNOTSUPP) {
      return posix::errno_error(errno, "mark directory '" + dir_ + "'");
    }
    if (auto synced = posix::sync_fd(dir->get(), "directory '" + dir_ + "'"); !synced) return synced.error();
    auto parent = posix::open_subdir(bucket_fd_.get(), split_key(dir_).first, false);
    if (parent) (void)posix::sync_fd(parent->get(), "directory");
    struct stat st {};
    if (::fstat(dir->get(), &st) != 0) return posix::errno_error(errno, "stat directory '" + dir_ + "'");
    return file_identity{.size = 0,
                         .mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                         .inode = static_cast<std::uint64_t>(st.st_ino)};
  }

 private:
  unique_fd bucket_fd_;
  std::string dir_;
};


std::int64_t created_ns_of(int dir_fd) {
  struct statx sx {};
  if (::statx(dir_fd, "", AT_EMPTY_PATH, STATX_BTIME | STATX_MTIME, &sx) != 0) return 0;
  auto t = (sx.stx_mask & STATX_BTIME) != 0 ? sx.stx_btime : sx.stx_mtime;
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

/// Removes what a crash left under `dir_fd`: temp files anywhere, and the
/// staged uploads at the top.
/// Returns whether it removed anything under `dir_fd`.
bool clean_tree(int dir_fd, bool top) {
  auto entries = posix::read_dir(dir_fd);
  if (!entries) return false;
  bool removed = false;
  for (const auto& e : *entries) {
    if (!e.is_dir) {
      if (e.name.starts_with(temp_prefix) && ::unlinkat(dir_fd, e.name.c_str(), 0) == 0) removed = true;
      continue;
    }
    auto sub = posix::open_beneath(dir_fd, e.name, O_RDONLY | O_DIRECTORY);
    if (!sub) continue;
    bool staged = top && e.name == uploads_dir;
    bool emptied = clean_tree(sub->get(), false);
    if (staged) {
      // Every staged file goes; then the emptied directories.
      auto parts = posix::read_dir(sub->get());
      for (const auto& upload : parts ? *parts : std::vector<posix::dir_entry>{}) {
        auto d = posix::open_beneath(sub->get(), upload.name, O_RDONLY | O_DIRECTORY);
        if (!d) continue;
        auto files = posix::read_dir(d->get());
        for (const auto& f : files ? *files : std::vector<posix::dir_entry>{}) ::unlinkat(d->get(), f.name.c_str(), 0);
        ::unlinkat(sub->get(), upload.name.c_str(), AT_REMOVEDIR);
      }
      ::unlinkat(dir_fd, e.name.c_str(), AT_REMOVEDIR);
    } else if (emptied && !is_marked(sub->get()) && holds_nothing(sub->get())) {
      // A directory a crashed PUT made for its temp file: not a marker.
      ::unlinkat(dir_fd, e.name.c_str(), AT_REMOVEDIR);
    }
    removed = removed || emptied;
  }
  return removed;
}

/// Removes a tree that holds no object: directories, and what is ours
/// (hidden files, anything under a hidden directory). Anything else — an
/// object, a symlink — makes it fail with conflict.
result<void> remove_empty_tree(int dir_fd, bool ours) {
  auto entries = posix::read_dir(dir_fd);
  if (!entries) return entries.error();
  for (const auto& e : *entries) {
    if (e.is_dir) {
      auto sub = posix::open_beneath(dir_fd, e.name, O_RDONLY | O_DIRECTORY);
      if (!sub) return sub.error();
      if (auto r = remove_empty_tree(sub->get(), ours || is_hidden(e.name)); !r) return r;
      if (::unlinkat(dir_fd, e.name.c_str(), AT_REMOVEDIR) != 0) return posix::errno_error(errno, "remove " + e.name);
    } else if (ours || is_hidden(e.name)) {
      ::unlinkat(dir_fd, e.name.c_str(), 0);
    } else {
      return fail(errc::conflict, "the bucket is not empty");
    }
  }
  return {};
}

struct list_walk {
  std::string_view prefix;
  std::string_view start_after;
  std::size_t limit = 0;
  std::vector<listed_object>& out;

  /// Whether some key under directory key-prefix `dir` ("a/b/") could be listed.
  bool may_hold(std::string_view dir) const {
    if (!dir.starts_with(prefix) && !prefix.starts_with(dir)) return false;
    // Past start_after without being a prefix of it: every key below sorts before it.
    return !(start_after > dir && !start_after.starts_with(dir));
  }

  bool shown(std::string_view key) const { return !is_hidden_segment(key) || prefix.starts_with(key); }
  static bool is_hidden_segment(std::string_view key) {
    auto [parent, last] = split_key(key.ends_with('/') ? key.substr(0, key.size() - 1) : key);
    return is_hidden(last);
  }

  result<void> walk(int dir_fd, const std::string& dir_key) {
    auto entries = posix::read_dir(dir_fd);
    if (!entries) return entries.error();
    // A marker sorts before everything under it.
    if (!dir_key.empty() && out.size() < limit && std::string_view{dir_key}.starts_with(prefix) &&
        dir_key > start_after) {
      if (entries->empty() || is_marked(dir_fd)) {
        if (auto st = marker_stat(dir_fd)) out.push_back(listed_object{.key = dir_key, .stat = std::move(*st)});
      }
    }
    std::vector<std::pair<std::string, bool>> keys;
    for (auto& e : *entries) keys.emplace_back(dir_key + e.name + (e.is_dir ? "/" : ""), e.is_dir);
    // A directory sorts as its name plus '/', so the walk yields keys in
    // bytewise order across levels ("a-c" before "a/b").
    std::sort(keys.begin(), keys.end());
    for (const auto& [key, is_dir] : keys) {
      if (out.size() >= limit) return {};
      if (!shown(key)) continue;
      auto name = std::string_view{key}.substr(dir_key.size());
      if (is_dir) {
        if (!may_hold(key)) continue;
        auto sub = posix::open_beneath(dir_fd, name.substr(0, name.size() - 1), O_RDONLY | O_DIRECTORY);
        if (!sub) continue;  // removed meanwhile, or not ours to enter
        if (auto r = walk(sub->get(), key); !r) return r;
        continue;
      }
      if (!std::string_view{key}.starts_with(prefix) || key <= start_after) continue;
      auto file = posix::open_beneath(dir_fd, name, O_RDONLY | O_NONBLOCK);
      if (!file) continue;
      auto st = posix::stat_fd(file->get(), key);
      if (!st || !*st) continue;
      out.push_back(listed_object{.key = key, .stat = std::move(**st)});
    }
    return {};
  }
};

}  // namespace

result<void> check_store_key(std::string_view key) {
  if (key.empty()) return fail(errc::invalid_argument, "an empty key");
  if (key.find('\0') != std::string_view::npos) return fail(errc::invalid_argument, "a key with a NUL byte");
  if (key.front() == '/') return fail(errc::invalid_argument, "a key starting with '/'");
  std::string_view rest = key;
  for (;;) {
    auto slash = rest.find('/');
    auto segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") {
      return fail(errc::invalid_argument, "a key with an empty, '.' or '..' segment");
    }
    if (slash == std::string_view::npos) return {};
    if (slash + 1 == rest.size()) return {};  // a directory marker
    rest.remove_prefix(slash + 1);
  }
}

result<std::unique_ptr<posix_bucket_store>> posix_bucket_store::open(posix_bucket_options options) {
  if (!options.root.empty()) {
    auto root = posix::open_dir(options.root);
    if (!root) return std::move(root).error();
  }
  std::unique_ptr<posix_bucket_store> store{new posix_bucket_store{std::move(options)}};
  auto all = store->buckets();
  if (!all) return std::move(all).error();
  for (const auto& b : store->options_.exported) {
    auto dir = posix::open_dir(b.second);
    if (!dir) return std::move(dir).error();
    store->exported_fds_.push_back(std::move(*dir));
  }
  for (const auto& b : *all) {
    auto dir = posix::open_dir(*store->bucket_dir(b.name));
    if (dir) (void)clean_tree(dir->get(), true);
  }
  return store;
}

result<posix_bucket_store::dir_ref> posix_bucket_store::open_bucket(std::string_view bucket) const {
  for (std::size_t i = 0; i < options_.exported.size(); ++i) {
    if (options_.exported[i].first == bucket) return dir_ref{.fd = exported_fds_[i].get()};
  }
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto fd = posix::open_dir(*dir);
  if (!fd) return std::move(fd).error();
  dir_ref out{.fd = fd->get()};
  out.owned = std::move(*fd);
  return out;
}

bool posix_bucket_store::is_exported(std::string_view bucket) const {
  return std::any_of(options_.exported.begin(), options_.exported.end(),
                     [bucket](const auto& b) { return b.first == bucket; });
}

std::optional<std::string> posix_bucket_store::bucket_dir(std::string_view bucket) const {
  for (const auto& [name, dir] : options_.exported) {
    if (name == bucket) return dir;
  }
  if (options_.root.empty() || bucket.empty() || is_hidden(bucket) || bucket.find('/') != std::string_view::npos ||
      bucket == "." || bucket == "..") {
    return std::nullopt;
  }
  auto root = posix::open_dir(options_.root);
  if (!root) return std::nullopt;
  auto dir = posix::open_beneath(root->get(), bucket, O_RDONLY | O_DIRECTORY);
  if (!dir) return std::nullopt;
  return options_.root + "/" + std::string{bucket};
}

result<std::vector<bucket_info>> posix_bucket_store::buckets() {
  std::vector<bucket_info> out;
  for (const auto& [name, dir] : options_.exported) {
    auto fd = posix::open_dir(dir);
    out.push_back(bucket_info{.name = name, .created_ns = fd ? created_ns_of(fd->get()) : 0});
  }
  if (!options_.root.empty()) {
    auto root = posix::open_dir(options_.root);
    if (!root) return std::move(root).error();
    auto entries = posix::read_dir(root->get());
    if (!entries) return std::move(entries).error();
    for (const auto& e : *entries) {
      if (!e.is_dir || is_hidden(e.name) || is_exported(e.name)) continue;
      auto fd = posix::open_beneath(root->get(), e.name, O_RDONLY | O_DIRECTORY);
      if (fd) out.push_back(bucket_info{.name = e.name, .created_ns = created_ns_of(fd->get())});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

result<std::optional<bucket_info>> posix_bucket_store::find_bucket(std::string_view bucket) {
  auto dir = bucket_dir(bucket);
  if (!dir) return std::optional<bucket_info>{};
  auto fd = posix::open_dir(*dir);
  if (!fd) return std::optional<bucket_info>{};
  return std::optional<bucket_info>{bucket_info{.name = std::string{bucket}, .created_ns = created_ns_of(fd->get())}};
}

result<void> posix_bucket_store::create_bucket(std::string_view bucket) {
  if (options_.root.empty()) return fail(errc::permission_denied, "no root directory to create buckets in");
  if (bucket_dir(bucket)) return fail(errc::conflict, "the bucket exists");
  if (bucket.empty() || is_hidden(bucket) || bucket.find('/') != std::string_view::npos || bucket == "." ||
      bucket == "..") {
    return fail(errc::invalid_argument, "not a bucket name");
  }
  auto root = posix::open_dir(options_.root);
  if (!root) return root.error();
  std::string name{bucket};
  if (::mkdirat(root->get(), name.c_str(), 0755) != 0) return posix::errno_error(errno, "create bucket " + name);
  return posix::sync_fd(root->get(), "root directory");
}

result<void> posix_bucket_store::remove_bucket(std::string_view bucket) {
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  if (is_exported(bucket)) return fail(errc::permission_denied, "an exported directory is never removed");
  auto listed = list(bucket, "", "", 1);
  if (!listed) return listed.error();
  if (!listed->empty()) return fail(errc::conflict, "the bucket is not empty");
  auto root = posix::open_dir(options_.root);
  if (!root) return root.error();
  auto fd = posix::open_beneath(root->get(), bucket, O_RDONLY | O_DIRECTORY);
  if (!fd) return fd.error();
  if (auto r = remove_empty_tree(fd->get(), false); !r) return r;
  std::string name{bucket};
  if (::unlinkat(root->get(), name.c_str(), AT_REMOVEDIR) != 0) {
    return posix::errno_error(errno, "remove bucket " + name);
  }
  return posix::sync_fd(root->get(), "root directory");
}

result<std::optional<object_stat>> posix_bucket_store::stat(std::string_view bucket, std::string_view key) {
  auto reader = open(bucket, key);
  if (!reader) {
    if (reader.code() == errc::not_found) return std::optional<object_stat>{};
    return std::move(reader).error();
  }
  return std::optional<object_stat>{(*reader)->stat()};
}

result<std::unique_ptr<object_reader>> posix_bucket_store::open(std::string_view bucket, std::string_view key) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto bucket_fd = open_bucket(bucket);
  if (!bucket_fd) return std::move(bucket_fd).error();
  if (key.ends_with('/')) {
    auto sub = posix::open_subdir(bucket_fd->get(), key.substr(0, key.size() - 1), false);
    if (!sub) {
      if (sub.code() == errc::not_found || sub.code() == errc::invalid_argument) {
        return fail(errc::not_found, "no such object");
      }
      return std::move(sub).error();
    }
    auto st = marker_stat(sub->get());
    if (!st) return fail(errc::not_found, "no such object");
    return std::unique_ptr<object_reader>{std::make_unique<marker_reader>(std::move(*st))};
  }
  // A small file directly in an exported directory whose record is
  // remembered needs no descriptor until its bytes are read: a stat, and
  // the file is opened (and checked to be the same) only then. Its name
  // has no directory to resolve, so no symlink can be followed on the way.
  if (!bucket_fd->owned && key.find('/') == std::string_view::npos) {
    std::string name{key};
    auto st = posix::stat_at(bucket_fd->get(), name);
    if (!st) return std::move(st).error();
    if (!*st) return fail(errc::not_found, "no such object");
    if ((*st)->identity.size <= lazy_open_bytes_max) {
      if (auto meta = records_.find(bucket, key, (*st)->identity)) {
        (*st)->meta = std::move(*meta);
        return posix::make_lazy_reader(bucket_fd->get(), std::move(name), std::move(**st));
      }
    }
  }
  // O_NONBLOCK: opening a FIFO someone left in the directory must not hang.
  auto fd = posix::open_beneath(bucket_fd->get(), key, O_RDONLY | O_NONBLOCK);
  if (!fd) {
    // A directory in the way, or a segment that is a file: not an object.
    if (fd.code() == errc::invalid_argument) return fail(errc::not_found, "no such object");
    return std::move(fd).error();
  }
  auto st = posix::stat_fd(fd->get(), key, false);
  if (!st) return std::move(st).error();
  if (!*st) return fail(errc::not_found, "no such object");
  auto& found = **st;
  found.meta = records_.find(bucket, key, found.identity);
  if (!found.meta) {
    found.meta = posix::record_of(fd->get(), found.identity);
    if (found.meta) records_.remember(bucket, key, found.identity, *found.meta);
  }
  return posix::make_reader(std::move(*fd), std::move(found));
}

result<std::unique_ptr<object_writer>> posix_bucket_store::create(std::string_view bucket, std::string_view key) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto bucket_fd = open_bucket(bucket);
  if (!bucket_fd) return std::move(bucket_fd).error();
  if (key.ends_with('/')) {
    // Its own descriptor: the writer may outlive this call.
    unique_fd own{::fcntl(bucket_fd->get(), F_DUPFD_CLOEXEC, 0)};
    if (own.get() < 0) return posix::errno_error(errno, "open bucket '" + std::string{bucket} + "'");
    return std::unique_ptr<object_writer>{
        std::make_unique<marker_writer>(std::move(own), std::string{key.substr(0, key.size() - 1)})};
  }
  auto [parent, name] = split_key(key);
  for (int attempt = 1;; ++attempt) {
    auto parent_fd = posix::open_subdir(bucket_fd->get(), parent, true);
    if (!parent_fd && parent_fd.code() == errc::not_found && attempt < create_attempts_max) continue;
    if (!parent_fd) return std::move(parent_fd).error();
    auto temp = std::string{temp_prefix} + std::to_string(::getpid()) + "-" + std::to_string(temp_counter_++);
    auto writer = posix::make_writer(std::move(*parent_fd), std::string{name}, std::move(temp));
    if (!writer && writer.code() == errc::not_found && attempt < create_attempts_max) continue;
    return writer;
  }
}

result<bool> posix_bucket_store::remove(std::string_view bucket, std::string_view key) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto bucket_fd = open_bucket(bucket);
  if (!bucket_fd) return std::move(bucket_fd).error();
  if (key.ends_with('/')) return remove_marker(bucket_fd->get(), key.substr(0, key.size() - 1));
  auto [parent, name] = split_key(key);
  auto parent_fd = posix::open_subdir(bucket_fd->get(), parent, false);
  if (!parent_fd) return false;
  std::string last{name};
  if (::unlinkat(parent_fd->get(), last.c_str(), 0) != 0) {
    if (errno == ENOENT || errno == EISDIR || errno == ENOTDIR) return false;
    return posix::errno_error(errno, "remove '" + std::string{key} + "'");
  }
  (void)posix::sync_fd(parent_fd->get(), "directory");
  // Prune directories the removal emptied, deepest first, so empty
  // prefixes do not linger; a non-empty one stops the walk.
  while (!parent.empty()) {
    auto [up, segment] = split_key(parent);
    auto up_fd = posix::open_subdir(bucket_fd->get(), up, false);
    std::string seg{segment};
    if (!up_fd) break;
    // A marked directory stays: its marker is an object of its own.
    if (auto here = posix::open_subdir(up_fd->get(), seg, false); !here || is_marked(here->get())) break;
    if (::unlinkat(up_fd->get(), seg.c_str(), AT_REMOVEDIR) != 0) break;
    parent = up;
  }
  return true;
}

result<bool> posix_bucket_store::remove_marker(int bucket_fd, std::string_view dir) {
  auto [parent, name] = split_key(dir);
  auto parent_fd = posix::open_subdir(bucket_fd, parent, false);
  if (!parent_fd) return false;
  std::string last{name};
  auto sub = posix::open_subdir(parent_fd->get(), last, false);
  if (!sub) return false;
  bool was_marker = marker_stat(sub->get()).has_value();
  if (::unlinkat(parent_fd->get(), last.c_str(), AT_REMOVEDIR) == 0) {
    (void)posix::sync_fd(parent_fd->get(), "directory");
    return was_marker;
  }
  if (errno == ENOTEMPTY || errno == EEXIST) {
    // Objects below stay; only the marker goes, so the directory goes
    // with the last of them.
    if (::fremovexattr(sub->get(), marker_xattr_name) != 0 && errno != ENODATA && errno != ENOTSUP &&
        errno != EOPNOTSUPP) {
      return posix::errno_error(errno, "unmark directory '" + std::string{dir} + "'");
    }
    return was_marker;
  }
  if (errno == ENOENT || errno == ENOTDIR) return false;
  return posix::errno_error(errno, "remove directory '" + std::string{dir} + "'");
}

result<void> posix_bucket_store::write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                                            const object_meta& meta) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto bucket_fd = open_bucket(bucket);
  if (!bucket_fd) return std::move(bucket_fd).error();
  auto fd = posix::open_beneath(bucket_fd->get(), key, O_RDONLY | O_NONBLOCK);
  if (!fd) return fd.error();
  auto st = posix::stat_fd(fd->get(), key);
  if (!st) return st.error();
  if (!*st || (*st)->identity != of) return fail(errc::conflict, "the file changed meanwhile");
  if (auto set = posix::set_record(fd->get(), of, meta); !set) return set;
  records_.remember(bucket, key, of, meta);
  return {};
}

std::optional<object_meta> posix_bucket_store::record_cache::find(std::string_view bucket, std::string_view key,
                                                                   const file_identity& identity) const {
  std::lock_guard lock{mutex_};
  auto it = held_.find(name_of(bucket, key));
  if (it == held_.end() || it->second.first != identity) return std::nullopt;
  return it->second.second;
}

void posix_bucket_store::record_cache::remember(std::string_view bucket, std::string_view key,
                                                const file_identity& identity, const object_meta& meta) {
  std::lock_guard lock{mutex_};
  // Full: start again. Records are read back from the files on demand.
  if (held_.size() >= records_max) held_.clear();
  held_.insert_or_assign(name_of(bucket, key), std::pair{identity, meta});
}

std::string posix_bucket_store::record_cache::name_of(std::string_view bucket, std::string_view key) {
  std::string out;
  out.reserve(bucket.size() + 1 + key.size());
  out.append(bucket).push_back('\0');
  out.append(key);
  return out;
}

result<std::vector<listed_object>> posix_bucket_store::list(std::string_view bucket, std::string_view prefix,
                                                            std::string_view start_after, std::size_t limit) {
  auto bucket_fd = open_bucket(bucket);
  if (!bucket_fd) return std::move(bucket_fd).error();
  std::vector<listed_object> out;
  list_walk walk{.prefix = prefix, .start_after = start_after, .limit = limit, .out = out};
  if (auto r = walk.walk(bucket_fd->get(), ""); !r) return r.error();
  return out;
}

}  // namespace sluice
