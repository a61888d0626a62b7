// The chunk cache over a real bucket store in a temporary directory, its
// chunks in a map: hits served in place, misses read from the file and
// kept, a changed file never served from old chunks, a failing store a
// plain miss.

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "actors/s3/chunk_cache.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::s3;

constexpr std::uint64_t chunk = chunk_bytes_min;  // 64 KiB

class map_chunks final : public chunk_store {
 public:
  std::optional<value> get(const std::string& key) override {
    std::lock_guard lock{mutex_};
    ++gets;
    if (failing) return std::nullopt;
    auto it = held.find(key);
    if (it == held.end()) return std::nullopt;
    auto bytes = it->second;
    return value{bytes, std::span<const std::byte>{bytes->data(), bytes->size()}, 1};
  }
  bool put(const std::string& key, std::span<const std::byte> bytes) override {
    std::lock_guard lock{mutex_};
    if (failing) return false;
    held[key] = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    return true;
  }
  std::map<std::string, std::shared_ptr<std::vector<std::byte>>> held;
  bool failing = false;
  int gets = 0;

 private:
  std::mutex mutex_;
};

std::string pattern(std::size_t size, char salt) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + i / 4099 + salt) & 0xff);
  return out;
}

struct fixture {
  fs::path dir;
  std::unique_ptr<posix_bucket_store> store;
  std::unique_ptr<store_read_path> files;
  map_chunks chunks;
  std::unique_ptr<cached_read_path> cached;

  fixture() {
    static int n = 0;
    dir = fs::temp_directory_path() / ("sluice-chunks-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir / "data");
    auto s = posix_bucket_store::open(posix_bucket_options{.exported = {{"data", (dir / "data").string()}}});
    REQUIRE(s.ok());
    store = std::move(*s);
    files = std::make_unique<store_read_path>(*store);
    cached = std::make_unique<cached_read_path>(*files, chunks, chunk);
  }
  ~fixture() { fs::remove_all(dir); }

  void write_file(const std::string& key, const std::string& bytes) {
    std::ofstream{dir / "data" / key, std::ios::binary | std::ios::trunc} << bytes;
  }

  /// The object read whole through the cache, `piece` bytes a read (by
  /// view where the reader offers one, as the shell does).
  std::string read_all(const std::string& key, std::size_t piece, bool by_view) {
    auto opened = cached->open("data", key);
    REQUIRE(opened.ok());
    auto& reader = *opened->reader;
    std::string out;
    std::vector<std::byte> buffer(piece);
    for (;;) {
      std::size_t n = 0;
      if (by_view) {
        auto v = reader.view(out.size(), piece);
        REQUIRE(v.ok());
        out.append(reinterpret_cast<const char*>(v->data()), v->size());
        n = v->size();
      } else {
        auto got = reader.read(out.size(), buffer);
        REQUIRE(got.ok());
        out.append(reinterpret_cast<const char*>(buffer.data()), *got);
        n = *got;
      }
      if (n == 0) break;
    }
    CHECK(out.size() == opened->identity.size);
    return out;
  }
};

}  // namespace

TEST_CASE("chunk cache: a first read fills the chunks, the next is served from them, byte for byte") {
  fixture f;
  auto bytes = pattern(3 * chunk + 1234, 1);  // three whole chunks and a short one
  f.write_file("obj", bytes);
  CHECK(f.read_all("obj", 7000, false) == bytes);
  CHECK(f.cached->stats().misses == 4);
  CHECK(f.cached->stats().hits == 0);
  CHECK(f.chunks.held.size() == 4);
  for (auto& [key, held] : f.chunks.held) CHECK(key.starts_with("~s3/data/"));

  CHECK(f.read_all("obj", 5000, true) == bytes);
  CHECK(f.cached->stats().hits == 4);
  CHECK(f.cached->stats().misses == 4);
  CHECK(f.cached->stats().hit_bytes == bytes.size());
}

TEST_CASE("chunk cache: a hit is the store's bytes, not the file's") {
  fixture f;
  auto bytes = pattern(chunk + 10, 2);
  f.write_file("obj", bytes);
  f.read_all("obj", chunk, true);
  // Change what the store holds for the first chunk: the next read shows
  // it, so the bytes came from the store.
  auto opened = f.cached->open("data", "obj");
  REQUIRE(opened.ok());
  auto first = chunk_key("data", "obj", opened->identity, chunk, 0);
  REQUIRE(f.chunks.held.contains(first));
  (*f.chunks.held[first])[0] = std::byte{'X'};
  auto again = f.read_all("obj", chunk, true);
  CHECK(again[0] == 'X');
  CHECK(again.substr(1) == bytes.substr(1));
}

TEST_CASE("chunk cache: a file changed behind the gateway is read anew, never from its old chunks") {
  fixture f;
  f.write_file("obj", pattern(2 * chunk, 3));
  f.read_all("obj", chunk, true);
  auto changed = pattern(2 * chunk + 5, 4);
  f.write_file("obj", changed);  // another size and mtime: another identity
  CHECK(f.read_all("obj", chunk, true) == changed);
  CHECK(f.cached->stats().hits == 0);
  CHECK(f.cached->stats().misses == 5);
}

TEST_CASE("chunk cache: ranges start and end inside chunks") {
  fixture f;
  auto bytes = pattern(4 * chunk, 5);
  f.write_file("obj", bytes);
  f.read_all("obj", chunk, true);
  auto opened = f.cached->open("data", "obj");
  REQUIRE(opened.ok());
  auto source = make_range_source(std::move(opened->reader), chunk - 3, 2 * chunk + 6);
  std::string out;
  std::vector<std::byte> buffer(1000);
  for (int turn = 0;; ++turn) {
    // Views and reads in turn, as a shell might mix them.
    if (turn % 2 == 0) {
      auto v = source->view(1000);
      REQUIRE(v.ok());
      if (v->empty()) break;
      out.append(reinterpret_cast<const char*>(v->data()), v->size());
    } else {
      auto n = source->read(buffer);
      REQUIRE(n.ok());
      if (*n == 0) break;
      out.append(reinterpret_cast<const char*>(buffer.data()), *n);
    }
  }
  CHECK(out == bytes.substr(chunk - 3, 2 * chunk + 6));
}

TEST_CASE("chunk cache: a store that fails is a miss: the file serves every read") {
  fixture f;
  auto bytes = pattern(2 * chunk + 1, 6);
  f.write_file("obj", bytes);
  f.chunks.failing = true;
  CHECK(f.read_all("obj", 9999, false) == bytes);
  CHECK(f.cached->stats().not_kept == 3);
  CHECK(f.read_all("obj", 9999, true) == bytes);
  CHECK(f.cached->stats().hits == 0);
  f.chunks.failing = false;
  CHECK(f.read_all("obj", 9999, true) == bytes);
  CHECK(f.read_all("obj", 9999, true) == bytes);
  CHECK(f.cached->stats().hits == 3);
}

TEST_CASE("chunk cache: a chunk of the wrong size in the store is not served") {
  fixture f;
  auto bytes = pattern(chunk + 100, 7);
  f.write_file("obj", bytes);
  auto opened = f.cached->open("data", "obj");
  REQUIRE(opened.ok());
  auto key = chunk_key("data", "obj", opened->identity, chunk, 1);
  f.chunks.put(key, std::span<const std::byte>{reinterpret_cast<const std::byte*>("short"), 5});
  CHECK(f.read_all("obj", chunk, true) == bytes);
}

TEST_CASE("chunk cache: keys differ by object, identity, chunk size and index") {
  file_identity a{.size = 10, .mtime_ns = 1, .inode = 2};
  auto base = chunk_key("b", "k", a, chunk, 0);
  CHECK(base.starts_with("~s3/b/"));
  CHECK(base.ends_with("/0"));
  CHECK(chunk_key("b", "k", a, chunk, 1) != base);
  CHECK(chunk_key("b", "k2", a, chunk, 0) != base);
  CHECK(chunk_key("c", "k", a, chunk, 0) != base);
  CHECK(chunk_key("b", "k", file_identity{.size = 10, .mtime_ns = 2, .inode = 2}, chunk, 0) != base);
  CHECK(chunk_key("b", "k", file_identity{.size = 10, .mtime_ns = 1, .inode = 3}, chunk, 0) != base);
  CHECK(chunk_key("b", "k", a, 2 * chunk, 0) != base);
  CHECK(chunk_key("b", "k", a, chunk, 0) == base);
}
