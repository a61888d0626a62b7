// The POSIX bucket store: objects are files under their bucket directory,
// writes are atomic, records follow the identity they were written for,
// listings come in bytewise key order, and no key leaves its directory.

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/storage/meta_record.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

namespace {

namespace fs = std::filesystem;

struct temp_dir {
  fs::path path;
  explicit temp_dir(const char* stem) {
    static int n = 0;
    path = fs::temp_directory_path() / ("sluice-store-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + "-" + stem);
    fs::create_directories(path);
  }
  ~temp_dir() { fs::remove_all(path); }
};

std::span<const std::byte> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string read_all(sluice::object_reader& r) {
  std::string out(r.stat().identity.size + 16, '\0');
  auto n = r.read(0, std::span<std::byte>{reinterpret_cast<std::byte*>(out.data()), out.size()});
  REQUIRE(n.ok());
  out.resize(*n);
  return out;
}

std::string file_text(const fs::path& p) {
  std::ifstream in{p, std::ios::binary};
  return std::string{std::istreambuf_iterator<char>{in}, {}};
}

void put(sluice::bucket_store& s, std::string_view key, std::string_view value, std::string etag = "e") {
  auto w = s.create("b", key);
  REQUIRE(w.ok());
  REQUIRE((*w)->write(bytes_of(value)).ok());
  REQUIRE((*w)->commit(sluice::object_meta{.etag = std::move(etag)}).ok());
}

std::unique_ptr<sluice::posix_bucket_store> open_store(const temp_dir& d) {
  auto s = sluice::posix_bucket_store::open(sluice::posix_bucket_options{.exported = {{"b", d.path.string()}}});
  REQUIRE(s.ok());
  return std::move(*s);
}

std::vector<std::string> keys_of(const std::vector<sluice::listed_object>& l) {
  std::vector<std::string> out;
  for (const auto& o : l) out.push_back(o.key);
  return out;
}

}  // namespace

TEST_CASE("posix bucket store: a committed object is a file under its key, with its record") {
  temp_dir d{"put"};
  auto s = open_store(d);
  auto w = s->create("b", "dir/sub/k");
  REQUIRE(w.ok());
  REQUIRE((*w)->write(bytes_of("hello ")).ok());
  REQUIRE((*w)->write(bytes_of("world")).ok());
  // Nothing is visible before the commit, not even the directory's object.
  CHECK_FALSE(s->stat("b", "dir/sub/k")->has_value());
  CHECK(s->list("b", "", "", 10)->empty());
  sluice::object_meta meta{.etag = "abc", .headers = {{"content-type", "text/plain"}}};
  auto identity = (*w)->commit(meta);
  REQUIRE(identity.ok());
  CHECK(file_text(d.path / "dir/sub/k") == "hello world");
  auto st = s->stat("b", "dir/sub/k");
  REQUIRE(st->has_value());
  CHECK((*st)->identity == *identity);
  CHECK((*st)->meta == meta);
  auto r = s->open("b", "dir/sub/k");
  REQUIRE(r.ok());
  CHECK(read_all(**r) == "hello world");
}

TEST_CASE("posix bucket store: a writer dropped without commit leaves nothing behind") {
  temp_dir d{"drop"};
  auto s = open_store(d);
  {
    auto w = s->create("b", "k");
    REQUIRE(w.ok());
    REQUIRE((*w)->write(bytes_of("partial")).ok());
  }
  CHECK(fs::is_empty(d.path));
}

TEST_CASE("posix bucket store: a reader keeps the version it opened while a writer replaces it") {
  temp_dir d{"atomic"};
  auto s = open_store(d);
  put(*s, "k", "old bytes");
  auto r = s->open("b", "k");
  REQUIRE(r.ok());
  put(*s, "k", "the new, longer bytes");
  CHECK(read_all(**r) == "old bytes");
  auto again = s->open("b", "k");
  CHECK(read_all(**again) == "the new, longer bytes");
}

TEST_CASE("posix bucket store: a file changed behind the store's back has no record until one is written") {
  temp_dir d{"external"};
  auto s = open_store(d);
  put(*s, "k", "ours");
  { std::ofstream{d.path / "k", std::ios::binary | std::ios::app} << " and theirs"; }
  auto st = s->stat("b", "k");
  REQUIRE(st->has_value());
  CHECK_FALSE((*st)->meta.has_value());
  CHECK((*st)->identity.size == 15);
  sluice::object_meta fresh{.etag = "recomputed"};
  // A record for an identity the file no longer has is refused.
  auto stale = (*st)->identity;
  stale.size += 1;
  CHECK(s->write_meta("b", "k", stale, fresh).code() == sluice::errc::conflict);
  REQUIRE(s->write_meta("b", "k", (*st)->identity, fresh).ok());
  CHECK(s->stat("b", "k")->value().meta == fresh);
}

TEST_CASE("posix bucket store: listings are in bytewise key order across directories and skip hidden names") {
  temp_dir d{"list"};
  auto s = open_store(d);
  for (auto k : {"a/b", "a-c", "a/c/d", "b", "z", ".sluice-uploads/u/00001"}) put(*s, k, k);
  { std::ofstream{d.path / "a" / ".sluice-tmp-9-9"} << "x"; }
  fs::create_symlink("/etc/passwd", d.path / "link");
  CHECK(keys_of(*s->list("b", "", "", 100)) == std::vector<std::string>{"a-c", "a/b", "a/c/d", "b", "z"});
  CHECK(keys_of(*s->list("b", "a/", "", 100)) == std::vector<std::string>{"a/b", "a/c/d"});
  CHECK(keys_of(*s->list("b", "", "a/b", 2)) == std::vector<std::string>{"a/c/d", "b"});
  CHECK(keys_of(*s->list("b", "", "a/\xff", 100)) == std::vector<std::string>{"b", "z"});
  CHECK(keys_of(*s->list("b", ".sluice-uploads/u/", "", 100)) == std::vector<std::string>{".sluice-uploads/u/00001"});
  CHECK_FALSE(s->stat("b", "link")->has_value());  // symlinks are not objects
}

TEST_CASE("posix bucket store: keys that would leave the directory are refused") {
  temp_dir d{"escape"};
  auto s = open_store(d);
  for (auto k : std::vector<std::string_view>{"../x", "a/../../x", "/etc/passwd", "a//b", "a/./b", "", {"a\0b", 3}}) {
    CHECK(s->create("b", k).code() == sluice::errc::invalid_argument);
    CHECK(s->open("b", k).code() == sluice::errc::invalid_argument);
  }
  // A symlinked directory inside does not lead outside either.
  temp_dir outside{"outside"};
  fs::create_directory_symlink(outside.path, d.path / "out");
  CHECK_FALSE(s->create("b", "out/x").ok());
  CHECK(fs::is_empty(outside.path));
}

TEST_CASE("posix bucket store: removing the last object prunes its directories, and open cleans temp files") {
  temp_dir d{"remove"};
  {
    auto s = open_store(d);
    put(*s, "x/y/z", "1");
    put(*s, "x/keep", "2");
    CHECK(*s->remove("b", "x/y/z"));
    CHECK_FALSE(*s->remove("b", "x/y/z"));
    CHECK_FALSE(fs::exists(d.path / "x/y"));
    CHECK(fs::exists(d.path / "x/keep"));
  }
  { std::ofstream{d.path / "x" / ".sluice-tmp-1-1"} << "crashed"; }
  fs::create_directories(d.path / ".sluice-uploads/abc");
  { std::ofstream{d.path / ".sluice-uploads/abc/00001"} << "part"; }
  auto s = open_store(d);
  CHECK_FALSE(fs::exists(d.path / "x" / ".sluice-tmp-1-1"));
  CHECK_FALSE(fs::exists(d.path / ".sluice-uploads"));
}

TEST_CASE("posix bucket store: buckets under the root are created, listed and removed only when empty") {
  temp_dir root{"root"};
  temp_dir exported{"exported"};
  auto s = sluice::posix_bucket_store::open(
      sluice::posix_bucket_options{.exported = {{"ex", exported.path.string()}}, .root = root.path.string()});
  REQUIRE(s.ok());
  REQUIRE((*s)->create_bucket("made").ok());
  CHECK((*s)->create_bucket("made").code() == sluice::errc::conflict);
  auto all = (*s)->buckets();
  REQUIRE(all->size() == 2);
  CHECK((*all)[0].name == "ex");
  CHECK((*all)[1].name == "made");
  auto w = (*s)->create("made", "k");
  REQUIRE((*w)->commit({.etag = "e"}).ok());
  CHECK((*s)->remove_bucket("made").code() == sluice::errc::conflict);
  REQUIRE(*(*s)->remove("made", "k"));
  REQUIRE((*s)->remove_bucket("made").ok());
  CHECK_FALSE(fs::exists(root.path / "made"));
  CHECK((*s)->remove_bucket("ex").code() == sluice::errc::permission_denied);
  CHECK((*s)->remove_bucket("never").code() == sluice::errc::not_found);
}

TEST_CASE("meta record: encodes and decodes, and refuses anything off the grammar") {
  sluice::meta_record r{.identity = {.size = 5, .mtime_ns = 1234567890123, .inode = 42},
                        .meta = {.etag = "abc-2", .headers = {{"content-type", "a/b"}, {"x-amz-meta-t", "tab\there"}}}};
  auto text = sluice::encode_meta_record(r);
  auto back = sluice::decode_meta_record(text);
  REQUIRE(back.has_value());
  CHECK(back->identity == r.identity);
  CHECK(back->meta == r.meta);
  CHECK_FALSE(sluice::decode_meta_record("sluice-meta 2\n5\n1\n1\ne\n").has_value());
  CHECK_FALSE(sluice::decode_meta_record("sluice-meta 1\n5\nx\n1\ne\n").has_value());
  CHECK_FALSE(sluice::decode_meta_record("sluice-meta 1\n5\n1\n1\n\n").has_value());
  CHECK_FALSE(sluice::decode_meta_record(text.substr(0, text.size() - 1)).has_value());
}

TEST_CASE("posix bucket store: a key ending in '/' is a directory marker: made by a put, listed, removed") {
  temp_dir d{"markers"};
  auto s = open_store(d);
  put(*s, "photos/", "");
  CHECK(fs::is_directory(d.path / "photos"));
  auto st = s->stat("b", "photos/");
  REQUIRE(st.ok());
  REQUIRE(st->has_value());
  CHECK((*st)->identity.size == 0);
  CHECK((*st)->meta->etag == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(keys_of(*s->list("b", "", "", 100)) == std::vector<std::string>{"photos/"});

  // A marker holds no bytes.
  auto w = s->create("b", "other/");
  REQUIRE(w.ok());
  CHECK((*w)->write(bytes_of("x")).code() == sluice::errc::invalid_argument);

  // Objects under it list after it; removing the last keeps the marked
  // directory (where there are xattrs to mark it with).
  put(*s, "photos/a", "a");
  CHECK(keys_of(*s->list("b", "", "", 100)) == std::vector<std::string>{"photos/", "photos/a"});
  CHECK(keys_of(*s->list("b", "", "photos/", 100)) == std::vector<std::string>{"photos/a"});
  REQUIRE(*s->remove("b", "photos/a"));
  if (!fs::is_directory(d.path / "photos")) {
    MESSAGE("no user xattrs in " << d.path << ": markers last only while their directory is empty");
    return;
  }
  CHECK(keys_of(*s->list("b", "", "", 100)) == std::vector<std::string>{"photos/"});
  REQUIRE(*s->remove("b", "photos/"));
  CHECK_FALSE(fs::exists(d.path / "photos"));
  CHECK_FALSE(s->stat("b", "photos/")->has_value());
  CHECK_FALSE(*s->remove("b", "photos/"));

  // An empty directory made by another program is a marker too; one
  // holding files is not, and a remove of its marker keeps the files.
  fs::create_directories(d.path / "empty");
  fs::create_directories(d.path / "full");
  put(*s, "full/f", "f");
  CHECK(keys_of(*s->list("b", "", "", 100)) == std::vector<std::string>{"empty/", "full/f"});
  CHECK(s->stat("b", "empty/")->has_value());
  CHECK_FALSE(s->stat("b", "full/")->has_value());
  CHECK_FALSE(*s->remove("b", "full/"));
  CHECK(fs::exists(d.path / "full" / "f"));
  // An unmarked directory goes with its last object, as before.
  REQUIRE(*s->remove("b", "full/f"));
  CHECK_FALSE(fs::exists(d.path / "full"));
  // A marker put on a directory that holds files, then removed: the files stay.
  put(*s, "g/h", "h");
  put(*s, "g/", "");
  CHECK(keys_of(*s->list("b", "g", "", 100)) == std::vector<std::string>{"g/", "g/h"});
  REQUIRE(*s->remove("b", "g/"));
  CHECK(keys_of(*s->list("b", "g", "", 100)) == std::vector<std::string>{"g/h"});
  REQUIRE(*s->remove("b", "g/h"));
  CHECK_FALSE(fs::exists(d.path / "g"));
}
