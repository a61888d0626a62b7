// Write-back over a real bucket store in a temporary directory, its
// chunks in a map and its journal in memory: a write is visible at once
// and in its file only after a flush, with the same bytes, ETag and time;
// overwrites and removes before the flush win; a restart reads the
// journal; a failed flush is kept and retried; the bounds write through.

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>

#include "actors/s3/read_path.hpp"
#include "actors/s3/write_back.hpp"
#include "runtime/digest.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::s3;

constexpr std::uint64_t chunk = chunk_bytes_min;  // 64 KiB

class kept_chunks final : public chunk_store {
 public:
  std::optional<value> get(const std::string&) override { return std::nullopt; }
  bool put(const std::string&, std::span<const std::byte>) override { return false; }

  result<void> keep(const std::string& key, std::span<const std::byte> bytes, std::uint32_t n) override {
    std::lock_guard lock{mutex_};
    if (failing) return fail(errc::unavailable, "fewer owners up than copies");
    held[key] = std::make_shared<std::vector<std::byte>>(bytes.begin(), bytes.end());
    copies[key] = n;
    return {};
  }
  result<value> fetch(const std::string& key) override {
    std::lock_guard lock{mutex_};
    auto it = held.find(key);
    if (it == held.end()) return fail(errc::not_found, "no chunk " + key);
    auto bytes = it->second;
    return value{bytes, std::span<const std::byte>{bytes->data(), bytes->size()}, 1};
  }
  result<bool> drop(const std::string& key) override {
    std::lock_guard lock{mutex_};
    return held.erase(key) > 0;
  }
  result<std::vector<std::string>> keys(const std::string& prefix, std::size_t limit) override {
    std::lock_guard lock{mutex_};
    std::vector<std::string> out;
    for (const auto& [key, bytes] : held) {
      if (key.starts_with(prefix) && out.size() < limit) out.push_back(key);
    }
    return out;
  }

  std::map<std::string, std::shared_ptr<std::vector<std::byte>>> held;
  std::map<std::string, std::uint32_t> copies;
  bool failing = false;

 private:
  std::mutex mutex_;
};

/// The journal in memory; it outlives the stores a test opens over it,
/// as a file outlives gateways.
class memory_journal final : public write_back_journal {
 public:
  std::string id() const override { return "0123456789abcdef"; }
  result<std::vector<dirty_object>> load() override {
    std::vector<dirty_object> out;
    for (const auto& [seq, o] : rows) out.push_back(o);
    return out;
  }
  result<void> add(const dirty_object& o) override {
    if (failing) return fail(errc::unavailable, "disk full");
    REQUIRE(!rows.contains(o.seq));
    rows[o.seq] = o;
    return {};
  }
  result<void> remove(std::span<const std::uint64_t> seqs) override {
    for (auto seq : seqs) rows.erase(seq);
    return {};
  }
  result<void> failed(std::uint64_t seq, std::uint32_t attempts, const std::string& error) override {
    rows[seq].attempts = attempts;
    rows[seq].last_error = error;
    return {};
  }
  std::map<std::uint64_t, dirty_object> rows;
  bool failing = false;
};

std::string pattern(std::size_t size, char salt) {
  std::string out(size, '\0');
  for (std::size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 131 + i / 4099 + salt) & 0xff);
  return out;
}

std::span<const std::byte> bytes_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

struct fixture {
  fs::path dir;
  std::unique_ptr<posix_bucket_store> files;
  kept_chunks chunks;
  memory_journal journal;
  std::int64_t now = 1'700'000'000'000'000'000;
  int wakes = 0;
  std::unique_ptr<write_back_store> store;

  explicit fixture(write_back_options extra = {}) {
    static int n = 0;
    dir = fs::temp_directory_path() / ("sluice-wb-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir / "data");
    fs::create_directories(dir / "plain");
    auto s = posix_bucket_store::open(posix_bucket_options{
        .exported = {{"data", (dir / "data").string()}, {"plain", (dir / "plain").string()}}});
    REQUIRE(s.ok());
    files = std::move(*s);
    reopen(std::move(extra));
  }
  ~fixture() {
    store.reset();
    fs::remove_all(dir);
  }

  void reopen(write_back_options o = {}) {
    store.reset();
    if (o.buckets.empty()) o.buckets = {"data"};
    o.chunk_bytes = chunk;
    o.seed = 7;
    o.now_ns = [this] { return now; };
    o.wake = [this] { ++wakes; };
    auto opened = write_back_store::open(*files, chunks, journal, std::move(o));
    REQUIRE(opened.ok());
    store = std::move(*opened);
  }

  result<file_identity> put(const std::string& bucket, const std::string& key, const std::string& bytes,
                            const std::string& etag = "") {
    auto writer = store->create(bucket, key);
    if (!writer) return std::move(writer).error();
    // In uneven pieces, as a body arrives.
    for (std::size_t at = 0; at < bytes.size(); at += 10'007) {
      auto ok = (*writer)->write(bytes_of(bytes).subspan(at, std::min<std::size_t>(10'007, bytes.size() - at)));
      if (!ok) return std::move(ok).error();
    }
    object_meta meta{.etag = etag.empty() ? md5_hex(bytes) : etag, .headers = {{"content-type", "text/plain"}}};
    now += 1000;  // a write takes a while
    return (*writer)->commit(meta);
  }

  static std::string md5_hex(const std::string& bytes) {
    md5_hasher h;
    h.update(bytes_of(bytes));
    return to_hex(h.finish());
  }

  std::string read(const std::string& bucket, const std::string& key) {
    auto reader = store->open(bucket, key);
    REQUIRE(reader.ok());
    std::string out;
    std::vector<std::byte> buffer(7000);
    for (;;) {
      auto n = (*reader)->read(out.size(), buffer);
      REQUIRE(n.ok());
      if (*n == 0) break;
      out.append(reinterpret_cast<const char*>(buffer.data()), *n);
    }
    return out;
  }

  bool in_file(const std::string& key) { return fs::exists(dir / "data" / key); }
  std::string file_bytes(const std::string& key) {
    std::ifstream in{dir / "data" / key, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, {}};
  }

  /// Flushes until nothing is due.
  int flush_all() {
    int flushed = 0;
    for (;;) {
      auto step = store->flush_one();
      if (step.what == flush_step::kind::idle) return flushed;
      REQUIRE(step.what != flush_step::kind::failed);
      if (step.what == flush_step::kind::flushed) ++flushed;
    }
  }
};

}  // namespace

TEST_CASE("write-back: a write is read back at once, and reaches its file only when flushed") {
  fixture f;
  auto bytes = pattern(3 * chunk + 77, 1);
  auto identity = f.put("data", "dir/obj", bytes);
  REQUIRE(identity.ok());
  CHECK(identity->size == bytes.size());
  CHECK(identity->inode == 0);
  CHECK(f.wakes == 1);
  CHECK(f.chunks.held.size() == 4);
  CHECK(f.journal.rows.size() == 1);
  CHECK_FALSE(f.in_file("dir/obj"));

  auto st = f.store->stat("data", "dir/obj");
  REQUIRE(st.ok());
  REQUIRE(st->has_value());
  CHECK((*st)->unflushed);
  CHECK((*st)->meta->etag == fixture::md5_hex(bytes));
  CHECK(f.read("data", "dir/obj") == bytes);
  auto listed = f.store->list("data", "dir/", "", 10);
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK((*listed)[0].key == "dir/obj");
  CHECK((*listed)[0].stat.identity.size == bytes.size());
  auto status = f.store->status();
  CHECK(status.dirty_objects == 1);
  CHECK(status.dirty_bytes == bytes.size());
  CHECK(status.oldest_ns == identity->mtime_ns);

  CHECK(f.flush_all() == 1);
  CHECK(f.file_bytes("dir/obj") == bytes);
  CHECK(f.journal.rows.empty());
  CHECK(f.chunks.held.empty());
  st = f.store->stat("data", "dir/obj");
  REQUIRE(st.ok());
  REQUIRE(st->has_value());
  CHECK_FALSE((*st)->unflushed);
  CHECK((*st)->identity.mtime_ns == identity->mtime_ns);  // the PUT's time, kept
  CHECK((*st)->identity.size == bytes.size());
  REQUIRE((*st)->meta.has_value());
  CHECK((*st)->meta->etag == fixture::md5_hex(bytes));
  CHECK((*st)->meta->headers == std::vector<std::pair<std::string, std::string>>{{"content-type", "text/plain"}});
  CHECK(f.store->status().flushed == 1);
  CHECK(f.store->status().dirty_bytes == 0);
}

TEST_CASE("write-back: the last of several writes to a key is the one written, the others never are") {
  fixture f;
  REQUIRE(f.put("data", "k", pattern(chunk + 1, 1)).ok());
  REQUIRE(f.put("data", "k", pattern(10, 2)).ok());
  auto last = pattern(2 * chunk, 3);
  REQUIRE(f.put("data", "k", last).ok());
  CHECK(f.read("data", "k") == last);
  CHECK(f.chunks.held.size() == 2 + 1 + 2);
  CHECK(f.flush_all() == 1);
  CHECK(f.file_bytes("k") == last);
  CHECK(f.chunks.held.empty());
  CHECK(f.journal.rows.empty());
}

TEST_CASE("write-back: a remove before the flush takes the object and its file away for good") {
  fixture f;
  {
    std::ofstream{f.dir / "data" / "k", std::ios::binary} << "old";
  }
  REQUIRE(f.put("data", "k", "new").ok());
  CHECK(f.read("data", "k") == "new");
  auto removed = f.store->remove("data", "k");
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK_FALSE(f.in_file("k"));
  auto st = f.store->stat("data", "k");
  REQUIRE(st.ok());
  CHECK_FALSE(st->has_value());
  CHECK(f.flush_all() == 0);
  CHECK_FALSE(f.in_file("k"));
  CHECK(f.chunks.held.empty());
  CHECK(f.journal.rows.empty());
  removed = f.store->remove("data", "k");
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
}

TEST_CASE("write-back: listings merge dirty objects with files, in order, a page at a time") {
  fixture f;
  for (const char* key : {"a", "c", "e"}) std::ofstream{f.dir / "data" / key} << "file";
  for (const char* key : {"b", "c", "d", "f"}) REQUIRE(f.put("data", key, "dirty").ok());
  auto keys = [&](std::string_view after, std::size_t limit) {
    auto listed = f.store->list("data", "", after, limit);
    REQUIRE(listed.ok());
    std::string out;
    for (const auto& o : *listed) out += o.key + (o.stat.unflushed ? "*" : "") + " ";
    return out;
  };
  CHECK(keys("", 100) == "a b* c* d* e f* ");
  CHECK(keys("", 2) == "a b* ");
  CHECK(keys("b", 2) == "c* d* ");
  CHECK(keys("d", 2) == "e f* ");
  CHECK(keys("f", 2) == "");
  CHECK(f.flush_all() == 4);
  CHECK(keys("", 100) == "a b c d e f ");
}

TEST_CASE("write-back: a restart finds the journal's objects, reads and flushes them") {
  fixture f;
  auto bytes = pattern(2 * chunk + 5, 4);
  auto identity = f.put("data", "k", bytes);
  REQUIRE(identity.ok());
  f.reopen();
  CHECK(f.store->status().dirty_objects == 1);
  CHECK(f.read("data", "k") == bytes);
  auto st = f.store->stat("data", "k");
  REQUIRE(st.ok());
  CHECK((*st)->identity == *identity);
  // New writes after the restart come later in the journal than the old.
  REQUIRE(f.put("data", "k2", "x").ok());
  CHECK(f.journal.rows.rbegin()->second.identity.mtime_ns > identity->mtime_ns);
  CHECK(f.flush_all() == 2);
  CHECK(f.file_bytes("k") == bytes);
}

TEST_CASE("write-back: a flush that fails is kept, reported and tried again later") {
  fixture f;
  REQUIRE(f.put("data", "k", pattern(chunk + 3, 5)).ok());
  auto lost = *f.chunks.held.begin();
  f.chunks.held.erase(f.chunks.held.begin());
  // A reader fails at once, before any answer has begun.
  auto reader = f.store->open("data", "k");
  REQUIRE_FALSE(reader.ok());
  CHECK(reader.code() == errc::unavailable);
  auto step = f.store->flush_one();
  CHECK(step.what == flush_step::kind::failed);
  CHECK(step.object == "data/k");
  CHECK(step.attempts == 1);
  REQUIRE(step.failure.has_value());
  CHECK(step.failure->message().find("chunk 0 of 2") != std::string::npos);
  CHECK_FALSE(f.in_file("k"));
  CHECK(f.journal.rows.begin()->second.attempts == 1);
  CHECK(f.store->status().failing == 1);
  // Not again before its time.
  step = f.store->flush_one();
  CHECK(step.what == flush_step::kind::idle);
  CHECK(step.next_due_ns == f.now + 1'000'000'000);
  // The chunk comes back (a copy's owner returned): the next try writes it.
  f.chunks.held.insert(lost);
  f.now += 1'000'000'000;
  CHECK(f.flush_all() == 1);
  CHECK(f.in_file("k"));
  CHECK(f.store->status().failing == 0);
}

TEST_CASE("write-back: the flush delay holds objects back, and overwrites within it are never written") {
  write_back_options o;
  o.flush_delay_ns = 5'000'000'000;
  fixture f{o};
  REQUIRE(f.put("data", "k", "one").ok());
  auto step = f.store->flush_one();
  CHECK(step.what == flush_step::kind::idle);
  CHECK(step.next_due_ns == f.now + 5'000'000'000);
  f.now += 4'000'000'000;
  REQUIRE(f.put("data", "k", "two").ok());
  f.now += 1'000'000'000;
  // The first is overwritten: let go, not written; the second waits on.
  step = f.store->flush_one();
  CHECK(step.what == flush_step::kind::dropped);
  CHECK(f.store->flush_one().what == flush_step::kind::idle);
  CHECK_FALSE(f.in_file("k"));
  f.now += 4'000'000'000;
  CHECK(f.flush_all() == 1);
  CHECK(f.file_bytes("k") == "two");
}

TEST_CASE("write-back: past its bounds, and for other buckets and hidden names, writes go to the files") {
  write_back_options o;
  o.dirty_bytes_max = 100;
  fixture f{o};
  REQUIRE(f.put("plain", "k", "p").ok());
  CHECK(fs::exists(f.dir / "plain" / "k"));
  REQUIRE(f.put("data", ".sluice-uploads/x/1", "part").ok());
  CHECK(f.in_file(".sluice-uploads/x/1"));
  REQUIRE(f.put("data", "a", pattern(150, 1)).ok());  // under the bound when it starts
  CHECK_FALSE(f.in_file("a"));
  REQUIRE(f.put("data", "b", "b").ok());  // the bound is reached: through
  CHECK(f.in_file("b"));
  CHECK(f.store->status().written_through == 1);
  CHECK(f.journal.rows.size() == 1);
}

TEST_CASE("write-back: a chunk that cannot be kept fails the write and leaves nothing") {
  fixture f;
  f.chunks.failing = true;
  auto put = f.put("data", "k", pattern(3 * chunk, 1));
  REQUIRE_FALSE(put.ok());
  CHECK(put.code() == errc::unavailable);
  CHECK(put.error().message().find("1 copy") != std::string::npos);
  f.chunks.failing = false;
  auto st = f.store->stat("data", "k");
  REQUIRE(st.ok());
  CHECK_FALSE(st->has_value());
  CHECK(f.journal.rows.empty());
  CHECK(f.chunks.held.empty());

  // A journal that cannot record it: the chunks kept so far go too.
  f.journal.failing = true;
  put = f.put("data", "k", pattern(2 * chunk, 1));
  REQUIRE_FALSE(put.ok());
  CHECK(f.chunks.held.empty());
}

TEST_CASE("write-back: a reader of an object flushed meanwhile goes on from its file") {
  fixture f;
  auto bytes = pattern(3 * chunk, 6);
  REQUIRE(f.put("data", "k", bytes).ok());
  auto reader = f.store->open("data", "k");
  REQUIRE(reader.ok());
  std::vector<std::byte> first(chunk);
  REQUIRE((*reader)->read(0, first).ok());
  CHECK(f.flush_all() == 1);
  CHECK(f.chunks.held.empty());
  std::string rest(2 * chunk, '\0');
  auto n = (*reader)->read(chunk, std::span<std::byte>{reinterpret_cast<std::byte*>(rest.data()), rest.size()});
  REQUIRE(n.ok());
  CHECK(*n == 2 * chunk);
  CHECK(rest == bytes.substr(chunk));
}

TEST_CASE("write-back: chunks no journal entry names are let go at start") {
  fixture f;
  REQUIRE(f.put("data", "k", pattern(chunk + 1, 1)).ok());
  // Left by a write a crash cut short, and one of another journal.
  f.chunks.held[dirty_chunk_key(f.journal.id(), 42, 0)] = std::make_shared<std::vector<std::byte>>(3);
  f.chunks.held[dirty_chunk_key("fedcba9876543210", 42, 0)] = std::make_shared<std::vector<std::byte>>(3);
  auto dropped = f.store->drop_orphans(1000);
  REQUIRE(dropped.ok());
  CHECK(*dropped == 1);
  CHECK(f.chunks.held.size() == 3);
  CHECK(f.read("data", "k") == pattern(chunk + 1, 1));
}

TEST_CASE("write-back: a bucket with dirty objects is not empty, and copies are asked of the chunk store") {
  write_back_options o;
  o.copies = 2;
  fixture f{o};
  REQUIRE(f.put("data", "k", "v").ok());
  CHECK(f.chunks.copies.begin()->second == 2);
  auto removed = f.store->remove_bucket("data");
  REQUIRE_FALSE(removed.ok());
  CHECK(removed.code() == errc::conflict);
}
