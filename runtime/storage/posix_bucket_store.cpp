#include "runtime/storage/posix_bucket_store.hpp"

#include <fcntl.h>
#include <sys/stat.h>
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

bool is_hidden(std::string_view name) { return name.starts_with(hidden_prefix); }

/// (parent directory, last segment) of a key.
std::pair<std::string_view, std::string_view> split_key(std::string_view key) {
  auto slash = key.rfind('/');
  if (slash == std::string_view::npos) return {std::string_view{}, key};
  return {key.substr(0, slash), key.substr(slash + 1)};
}

std::int64_t created_ns_of(int dir_fd) {
  struct statx sx {};
  if (::statx(dir_fd, "", AT_EMPTY_PATH, STATX_BTIME | STATX_MTIME, &sx) != 0) return 0;
  auto t = (sx.stx_mask & STATX_BTIME) != 0 ? sx.stx_btime : sx.stx_mtime;
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

/// Removes what a crash left under `dir_fd`: temp files anywhere, and the
/// staged uploads at the top.
void clean_tree(int dir_fd, bool top) {
  auto entries = posix::read_dir(dir_fd);
  if (!entries) return;
  for (const auto& e : *entries) {
    if (!e.is_dir) {
      if (e.name.starts_with(temp_prefix)) ::unlinkat(dir_fd, e.name.c_str(), 0);
      continue;
    }
    auto sub = posix::open_beneath(dir_fd, e.name, O_RDONLY | O_DIRECTORY);
    if (!sub) continue;
    bool staged = top && e.name == uploads_dir;
    clean_tree(sub->get(), false);
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
    }
  }
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
  }
  for (const auto& b : *all) {
    auto dir = posix::open_dir(*store->bucket_dir(b.name));
    if (dir) clean_tree(dir->get(), true);
  }
  return store;
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
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto bucket_fd = posix::open_dir(*dir);
  if (!bucket_fd) return std::move(bucket_fd).error();
  // O_NONBLOCK: opening a FIFO someone left in the directory must not hang.
  auto fd = posix::open_beneath(bucket_fd->get(), key, O_RDONLY | O_NONBLOCK);
  if (!fd) {
    // A directory in the way, or a segment that is a file: not an object.
    if (fd.code() == errc::invalid_argument) return fail(errc::not_found, "no such object");
    return std::move(fd).error();
  }
  auto st = posix::stat_fd(fd->get(), key);
  if (!st) return std::move(st).error();
  if (!*st) return fail(errc::not_found, "no such object");
  return posix::make_reader(std::move(*fd), std::move(**st));
}

result<std::unique_ptr<object_writer>> posix_bucket_store::create(std::string_view bucket, std::string_view key) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto bucket_fd = posix::open_dir(*dir);
  if (!bucket_fd) return std::move(bucket_fd).error();
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
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto bucket_fd = posix::open_dir(*dir);
  if (!bucket_fd) return std::move(bucket_fd).error();
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
    if (!up_fd || ::unlinkat(up_fd->get(), seg.c_str(), AT_REMOVEDIR) != 0) break;
    parent = up;
  }
  return true;
}

result<void> posix_bucket_store::write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                                            const object_meta& meta) {
  if (auto k = check_store_key(key); !k) return k.error();
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto bucket_fd = posix::open_dir(*dir);
  if (!bucket_fd) return bucket_fd.error();
  auto fd = posix::open_beneath(bucket_fd->get(), key, O_RDONLY | O_NONBLOCK);
  if (!fd) return fd.error();
  auto st = posix::stat_fd(fd->get(), key);
  if (!st) return st.error();
  if (!*st || (*st)->identity != of) return fail(errc::conflict, "the file changed meanwhile");
  return posix::set_record(fd->get(), of, meta);
}

result<std::vector<listed_object>> posix_bucket_store::list(std::string_view bucket, std::string_view prefix,
                                                            std::string_view start_after, std::size_t limit) {
  auto dir = bucket_dir(bucket);
  if (!dir) return fail(errc::not_found, "no such bucket");
  auto bucket_fd = posix::open_dir(*dir);
  if (!bucket_fd) return std::move(bucket_fd).error();
  std::vector<listed_object> out;
  list_walk walk{.prefix = prefix, .start_after = start_after, .limit = limit, .out = out};
  if (auto r = walk.walk(bucket_fd->get(), ""); !r) return r.error();
  return out;
}

}  // namespace sluice
