// Write-back: a PUT to a write-back bucket is acknowledged once its bytes
// are chunks kept in the KV (in `copies` copies, pinned against eviction)
// and a record of it is durable in a journal; the file is written later,
// by a flusher, from those chunks (docs/s3.md, "Write-back").
//
// write_back_store is a bucket_store around the store of files. For the
// buckets it writes back, a new object is in the journal first: stat,
// open and list see it there (read your writes) until its file is
// written; remove takes it out of both. Other buckets, and the store's
// own hidden names (staged multipart parts), go straight to the files.
//
// Plain code: the time comes from the options, the chunk names from a
// seeded rng; no thread of its own. The shell calls flush_one() on its
// flusher thread; the gateway's I/O threads call the rest. One lock
// guards the tables; the journal and the file writes of remove() run
// under it, the chunks and the flushed file's bytes do not.
//
// Bounds (stated in docs/s3.md): at most `dirty_bytes_max` bytes and
// `dirty_objects_max` objects waiting; a write that starts beyond either
// is written through instead. Each write holds one chunk in memory.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "actors/s3/chunk_cache.hpp"
#include "runtime/storage/bucket_store.hpp"

namespace sluice::s3 {

/// An object acknowledged and not yet in its file.
struct dirty_object {
  std::uint64_t seq{};  ///< the journal's order: of two for one key, the later wins
  std::string bucket{};
  std::string key{};
  /// Its size and the time it was acknowledged (its Last-Modified, kept
  /// by the file it becomes); inode 0, which no file has.
  file_identity identity{};
  object_meta meta{};
  std::uint64_t chunks_id{};  ///< names its chunks (chunk_key_of)
  std::uint64_t chunk_bytes{};
  std::uint32_t attempts{};  ///< failed flushes so far
  std::string last_error{};  ///< of the last failed flush
  friend bool operator==(const dirty_object&, const dirty_object&) = default;
};

/// Where dirty objects are recorded until their files are written.
/// Thread-safe.
class write_back_journal {
 public:
  virtual ~write_back_journal() = default;
  /// Names this journal's chunks, so two journals never share one.
  virtual std::string id() const = 0;
  /// Every object recorded, in seq order.
  virtual result<std::vector<dirty_object>> load() = 0;
  /// Durable when it returns.
  virtual result<void> add(const dirty_object& object) = 0;
  virtual result<void> remove(std::span<const std::uint64_t> seqs) = 0;
  virtual result<void> failed(std::uint64_t seq, std::uint32_t attempts, const std::string& error) = 0;
};

/// Every write-back chunk key starts with this.
inline constexpr std::string_view dirty_chunk_prefix = "~s3w/";

/// "~s3w/JOURNAL/CHUNKS_ID/INDEX".
std::string dirty_chunk_key(std::string_view journal_id, std::uint64_t chunks_id, std::uint64_t index);

struct write_back_options {
  /// The buckets written back; "*" for every bucket.
  std::vector<std::string> buckets{};
  /// Copies of each chunk, on distinct owners (1 to 255).
  std::uint32_t copies = 1;
  std::uint64_t chunk_bytes = chunk_bytes_default;
  std::uint64_t dirty_bytes_max = 1ull << 30;
  std::size_t dirty_objects_max = 100'000;
  /// An object is flushed this long after it was acknowledged at the
  /// earliest (so that overwrites in between are never written).
  std::int64_t flush_delay_ns = 0;
  std::uint64_t seed{};
  /// Wall-clock time in ns since the epoch. REQUIRED.
  std::function<std::int64_t()> now_ns{};
  /// Called (without the lock) when an object became dirty: the flusher
  /// has work.
  std::function<void()> wake{};
};

/// What the journal holds, as the gateway sees it.
struct write_back_status {
  std::size_t dirty_objects = 0;
  std::uint64_t dirty_bytes = 0;
  std::int64_t oldest_ns = 0;  ///< when the oldest dirty object was acknowledged; 0: none
  std::size_t failing = 0;     ///< dirty objects whose last flush failed
  std::uint64_t flushed = 0;   ///< files written since start
  std::uint64_t written_through = 0;  ///< writes that found the bounds reached
};

/// What one flush_one() did.
struct flush_step {
  enum class kind {
    idle,     ///< nothing due: call again at `next_due_ns` (0: nothing dirty) or when woken
    flushed,  ///< an object's file was written
    dropped,  ///< objects overwritten or removed since were let go
    failed,   ///< a flush failed (`object`, `failure`); retried in `retry_in_ns`
  };
  kind what = kind::idle;
  std::int64_t next_due_ns = 0;
  std::string object{};  ///< bucket/key flushed or failed
  std::optional<sluice::error> failure{};
  std::uint32_t attempts = 0;
  std::int64_t retry_in_ns = 0;
};

class write_back_store final : public bucket_store {
 public:
  /// Loads the journal. `files`, `chunks` and `journal` must outlive this.
  /// REQUIRES: 1 <= copies <= 255, chunk_bytes in [chunk_bytes_min, chunk_bytes_max].
  static result<std::unique_ptr<write_back_store>> open(bucket_store& files, chunk_store& chunks,
                                                        write_back_journal& journal, write_back_options options);
  ~write_back_store() override;

  bool writes_back(std::string_view bucket) const;

  /// Writes the oldest due object's file (or lets go of overwritten ones).
  /// One caller at a time.
  flush_step flush_one();
  /// Lets go of kept chunks of this journal that no dirty object names
  /// (a write cut short by a crash); how many went. Call before serving.
  result<std::size_t> drop_orphans(std::size_t limit);
  write_back_status status() const;

  result<std::vector<bucket_info>> buckets() override { return files_.buckets(); }
  result<std::optional<bucket_info>> find_bucket(std::string_view bucket) override {
    return files_.find_bucket(bucket);
  }
  result<void> create_bucket(std::string_view bucket) override { return files_.create_bucket(bucket); }
  result<void> remove_bucket(std::string_view bucket) override;
  result<std::optional<object_stat>> stat(std::string_view bucket, std::string_view key) override;
  result<std::unique_ptr<object_reader>> open(std::string_view bucket, std::string_view key) override;
  result<std::unique_ptr<object_writer>> create(std::string_view bucket, std::string_view key) override;
  result<bool> remove(std::string_view bucket, std::string_view key) override;
  result<void> write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                          const object_meta& meta) override;
  result<std::vector<listed_object>> list(std::string_view bucket, std::string_view prefix,
                                          std::string_view start_after, std::size_t limit) override;

  // For the writer and reader of dirty objects (write_back.cpp).
  chunk_store& chunks() { return chunks_; }
  bucket_store& files() { return files_; }
  const std::string& journal_id() const { return journal_id_; }
  std::uint32_t copies() const { return options_.copies; }
  std::uint64_t chunk_bytes() const { return options_.chunk_bytes; }
  /// Records a written object in the journal: it is visible from now on.
  result<file_identity> commit_dirty(std::string bucket, std::string key, std::uint64_t size,
                                     std::uint64_t chunks_id, object_meta meta);

 private:
  write_back_store(bucket_store& files, chunk_store& chunks, write_back_journal& journal,
                   write_back_options options);

  using object_name = std::pair<std::string, std::string>;  // bucket, key
  struct entry {
    dirty_object object;
    std::int64_t next_try_ns = 0;
  };

  /// The visible dirty object of bucket/key, if any. Under the lock.
  const dirty_object* visible(std::string_view bucket, std::string_view key) const;
  bool dirty_name(std::string_view bucket, std::string_view key) const;
  /// Takes entry `seq` out of the tables; its chunk keys into `drops`. Under the lock.
  void forget(std::uint64_t seq, std::vector<std::string>& drops);
  void drop_chunks(const std::vector<std::string>& keys);
  std::vector<std::string> chunk_keys_of(const dirty_object& object) const;

  bucket_store& files_;
  chunk_store& chunks_;
  write_back_journal& journal_;
  write_back_options options_;
  std::string journal_id_;

  mutable std::mutex mutex_;
  std::condition_variable flush_done_;
  std::map<std::uint64_t, entry> by_seq_;
  /// Each name's dirty objects, in seq order: the last is visible.
  std::map<object_name, std::vector<std::uint64_t>> by_name_;
  std::optional<object_name> flushing_;
  /// The chunks_id of every object in by_seq_.
  std::set<std::uint64_t> chunk_ids_;
  std::uint64_t next_seq_ = 1;
  std::int64_t last_mtime_ns_ = 0;
  std::uint64_t dirty_bytes_ = 0;
  std::uint64_t flushed_ = 0;
  std::uint64_t written_through_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace sluice::s3
