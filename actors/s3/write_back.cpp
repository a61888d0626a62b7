#include "actors/s3/write_back.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>

#include "runtime/assert.hpp"

namespace sluice::s3 {
namespace {

constexpr std::string_view any_bucket = "*";

/// Overwritten objects let go of in one flush step, at most.
constexpr std::size_t drops_per_step = 1024;

/// A failed flush is tried again after 1 s, doubling to at most a minute.
std::int64_t retry_delay_ns(std::uint32_t attempts) {
  constexpr std::int64_t first = 1'000'000'000;
  constexpr std::int64_t most = 60'000'000'000;
  auto doublings = std::min<std::uint32_t>(attempts == 0 ? 0 : attempts - 1, 6);
  return std::min(first << doublings, most);
}

std::uint64_t chunk_count(std::uint64_t size, std::uint64_t chunk_bytes) {
  return (size + chunk_bytes - 1) / chunk_bytes;
}

/// A new object of a write-back bucket: its bytes cut into chunks, each
/// kept in the KV as it fills; commit() records it in the journal.
/// Dropped without commit, the chunks it kept go.
class dirty_writer final : public object_writer {
 public:
  dirty_writer(write_back_store& store, std::string bucket, std::string key, std::uint64_t chunks_id)
      : store_(store), bucket_(std::move(bucket)), key_(std::move(key)), chunks_id_(chunks_id) {}

  ~dirty_writer() override {
    if (committed_) return;
    for (std::uint64_t i = 0; i < kept_; ++i) {
      (void)store_.chunks().drop(dirty_chunk_key(store_.journal_id(), chunks_id_, i));
    }
  }

  result<void> write(std::span<const std::byte> bytes) override {
    SLUICE_ASSERT(!committed_);
    auto chunk = store_.chunk_bytes();
    while (!bytes.empty()) {
      auto take = std::min<std::size_t>(bytes.size(), chunk - buffer_.size());
      buffer_.insert(buffer_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(take));
      bytes = bytes.subspan(take);
      if (buffer_.size() == chunk) {
        if (auto kept = keep_buffer(); !kept) return kept;
      }
    }
    return {};
  }

  result<file_identity> commit(const object_meta& meta) override {
    SLUICE_ASSERT(!committed_);
    if (!buffer_.empty()) {
      if (auto kept = keep_buffer(); !kept) return std::move(kept).error();
    }
    SLUICE_ASSERT(kept_ == chunk_count(size_, store_.chunk_bytes()));
    auto identity = store_.commit_dirty(bucket_, key_, size_, chunks_id_, meta);
    if (identity) committed_ = true;
    return identity;
  }

 private:
  result<void> keep_buffer() {
    auto key = dirty_chunk_key(store_.journal_id(), chunks_id_, kept_);
    if (auto kept = store_.chunks().keep(key, buffer_, store_.copies()); !kept) {
      // Whatever kept it (too few owners, a pool that could not evict, a
      // timeout), the write may succeed when tried again.
      return fail(errc::unavailable, "cannot keep the object's chunk in " + std::to_string(store_.copies()) +
                                   (store_.copies() == 1 ? " copy" : " copies") + ": " + kept.error().message());
    }
    size_ += buffer_.size();
    ++kept_;
    buffer_.clear();
    return {};
  }

  write_back_store& store_;
  std::string bucket_;
  std::string key_;
  std::uint64_t chunks_id_;
  std::vector<std::byte> buffer_;
  std::uint64_t kept_ = 0;
  std::uint64_t size_ = 0;
  bool committed_ = false;
};

/// A dirty object read from its chunks, one held at a time (a view: the
/// pool's bytes, sent from there). A chunk gone because the object was
/// flushed meanwhile is read from the file instead, once the file is
/// seen to hold these very bytes (its ETag and size).
class dirty_reader final : public object_reader {
 public:
  dirty_reader(write_back_store& store, dirty_object object)
      : store_(store),
        object_(std::move(object)),
        stat_{.identity = object_.identity, .meta = object_.meta, .unflushed = true} {}

  const object_stat& stat() const override { return stat_; }

  result<std::size_t> read(std::uint64_t offset, std::span<std::byte> into) override {
    std::size_t done = 0;
    while (done < into.size()) {
      auto bytes = view(offset + done, into.size() - done);
      if (!bytes) return std::move(bytes).error();
      if (bytes->empty()) {
        if (file_) {
          auto n = file_->read(offset + done, into.subspan(done));
          if (!n) return n;
          done += *n;
        }
        break;
      }
      std::memcpy(into.data() + done, bytes->data(), bytes->size());
      done += bytes->size();
    }
    return done;
  }

  result<std::span<const std::byte>> view(std::uint64_t offset, std::size_t max) override {
    auto size = object_.identity.size;
    if (offset >= size || max == 0 || file_) return std::span<const std::byte>{};
    auto index = offset / object_.chunk_bytes;
    if (!held_ || index_ != index) {
      held_.reset();
      auto got = store_.chunks().fetch(dirty_chunk_key(store_.journal_id(), object_.chunks_id, index));
      if (!got) {
        if (auto file = flushed_file(); file) {
          file_ = std::move(*file);
          return std::span<const std::byte>{};
        }
        return fail(got.code() == errc::not_found ? errc::unavailable : got.code(),
                    "chunk " + std::to_string(index) + " of '" + object_.bucket + "/" + object_.key +
                        "', not yet in its file, cannot be read: " + got.error().message());
      }
      auto expected = std::min(object_.chunk_bytes, size - index * object_.chunk_bytes);
      if (got->size() != expected) {
        return fail(errc::internal, "chunk " + std::to_string(index) + " of '" + object_.bucket + "/" + object_.key +
                                        "' holds " + std::to_string(got->size()) + " bytes, not " +
                                        std::to_string(expected));
      }
      held_ = std::move(*got);
      index_ = index;
    }
    auto at = offset - index * object_.chunk_bytes;
    auto bytes = held_->bytes();
    SLUICE_ASSERT(at < bytes.size());
    return bytes.subspan(at, std::min<std::uint64_t>(max, bytes.size() - at));
  }

 private:
  std::optional<std::unique_ptr<object_reader>> flushed_file() {
    auto file = store_.files().open(object_.bucket, object_.key);
    if (!file) return std::nullopt;
    const auto& st = (*file)->stat();
    if (!st.meta || st.meta->etag != object_.meta.etag || st.identity.size != object_.identity.size) {
      return std::nullopt;
    }
    return std::move(*file);
  }

  write_back_store& store_;
  dirty_object object_;
  object_stat stat_;
  std::optional<value> held_;
  std::uint64_t index_ = 0;
  std::unique_ptr<object_reader> file_;
};

}  // namespace

std::string dirty_chunk_key(std::string_view journal_id, std::uint64_t chunks_id, std::uint64_t index) {
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(chunks_id));
  std::string out{dirty_chunk_prefix};
  out.append(journal_id).push_back('/');
  out.append(id, 16);
  out += '/' + std::to_string(index);
  return out;
}

write_back_store::write_back_store(bucket_store& files, chunk_store& chunks, write_back_journal& journal,
                                   write_back_options options)
    : files_(files),
      chunks_(chunks),
      journal_(journal),
      options_(std::move(options)),
      journal_id_(journal.id()),
      rng_(options_.seed) {}

write_back_store::~write_back_store() = default;

result<std::unique_ptr<write_back_store>> write_back_store::open(bucket_store& files, chunk_store& chunks,
                                                                 write_back_journal& journal,
                                                                 write_back_options options) {
  SLUICE_ASSERT(options.copies >= 1 && options.copies <= 255);
  SLUICE_ASSERT(options.chunk_bytes >= chunk_bytes_min && options.chunk_bytes <= chunk_bytes_max);
  SLUICE_ASSERT(options.now_ns);
  auto loaded = journal.load();
  if (!loaded) return std::move(loaded).error();
  std::unique_ptr<write_back_store> out{new write_back_store(files, chunks, journal, std::move(options))};
  for (auto& object : *loaded) {
    SLUICE_ASSERT(object.seq >= out->next_seq_);  // load() gives seq order
    out->next_seq_ = object.seq + 1;
    out->last_mtime_ns_ = std::max(out->last_mtime_ns_, object.identity.mtime_ns);
    out->dirty_bytes_ += object.identity.size;
    out->by_name_[{object.bucket, object.key}].push_back(object.seq);
    out->chunk_ids_.insert(object.chunks_id);
    auto seq = object.seq;
    auto attempts = object.attempts;
    // A flush that failed before the restart waits its turn again.
    auto next_try = attempts == 0 ? 0 : out->options_.now_ns() + retry_delay_ns(attempts);
    out->by_seq_.emplace(seq, entry{.object = std::move(object), .next_try_ns = next_try});
  }
  return out;
}

bool write_back_store::writes_back(std::string_view bucket) const {
  return std::any_of(options_.buckets.begin(), options_.buckets.end(),
                     [&](const std::string& b) { return b == bucket || b == any_bucket; });
}

bool write_back_store::dirty_name(std::string_view bucket, std::string_view key) const {
  // Directory markers are directories: made at once, never written back.
  return writes_back(bucket) && !has_hidden_segment(key) && !key.ends_with('/');
}

const dirty_object* write_back_store::visible(std::string_view bucket, std::string_view key) const {
  auto it = by_name_.find(object_name{std::string{bucket}, std::string{key}});
  if (it == by_name_.end()) return nullptr;
  SLUICE_ASSERT(!it->second.empty());
  return &by_seq_.at(it->second.back()).object;
}

std::vector<std::string> write_back_store::chunk_keys_of(const dirty_object& object) const {
  std::vector<std::string> out;
  auto n = chunk_count(object.identity.size, object.chunk_bytes);
  out.reserve(n);
  for (std::uint64_t i = 0; i < n; ++i) out.push_back(dirty_chunk_key(journal_id_, object.chunks_id, i));
  return out;
}

void write_back_store::forget(std::uint64_t seq, std::vector<std::string>& drops) {
  auto it = by_seq_.find(seq);
  SLUICE_ASSERT(it != by_seq_.end());
  const auto& object = it->second.object;
  auto keys = chunk_keys_of(object);
  drops.insert(drops.end(), keys.begin(), keys.end());
  auto named = by_name_.find(object_name{object.bucket, object.key});
  SLUICE_ASSERT(named != by_name_.end());
  std::erase(named->second, seq);
  if (named->second.empty()) by_name_.erase(named);
  SLUICE_ASSERT(dirty_bytes_ >= object.identity.size);
  dirty_bytes_ -= object.identity.size;
  chunk_ids_.erase(object.chunks_id);
  by_seq_.erase(it);
}

void write_back_store::drop_chunks(const std::vector<std::string>& keys) {
  // Best effort: a chunk that stays is found by drop_orphans() at the next start.
  for (const auto& key : keys) (void)chunks_.drop(key);
}

result<file_identity> write_back_store::commit_dirty(std::string bucket, std::string key, std::uint64_t size,
                                                     std::uint64_t chunks_id, object_meta meta) {
  file_identity identity;
  {
    std::lock_guard lock{mutex_};
    // Times only grow, so two versions of one key never share an identity.
    auto mtime = std::max(options_.now_ns(), last_mtime_ns_ + 1);
    dirty_object object{.seq = next_seq_,
                        .bucket = std::move(bucket),
                        .key = std::move(key),
                        .identity = {.size = size, .mtime_ns = mtime, .inode = 0},
                        .meta = std::move(meta),
                        .chunks_id = chunks_id,
                        .chunk_bytes = options_.chunk_bytes};
    if (auto added = journal_.add(object); !added) return std::move(added).error();
    ++next_seq_;
    last_mtime_ns_ = mtime;
    dirty_bytes_ += size;
    identity = object.identity;
    by_name_[{object.bucket, object.key}].push_back(object.seq);
    chunk_ids_.insert(object.chunks_id);
    auto seq = object.seq;
    by_seq_.emplace(seq, entry{.object = std::move(object)});
  }
  if (options_.wake) options_.wake();
  return identity;
}

result<std::unique_ptr<object_writer>> write_back_store::create(std::string_view bucket, std::string_view key) {
  if (!dirty_name(bucket, key)) return files_.create(bucket, key);
  auto found = files_.find_bucket(bucket);
  if (!found) return std::move(found).error();
  if (!*found) return fail(errc::not_found, "no bucket '" + std::string{bucket} + "'");
  std::uint64_t chunks_id = 0;
  bool through = false;
  {
    std::lock_guard lock{mutex_};
    through = dirty_bytes_ >= options_.dirty_bytes_max || by_seq_.size() >= options_.dirty_objects_max;
    if (through) {
      ++written_through_;
    } else {
      // Never a name the journal's objects use: the rng may repeat one
      // drawn before a restart (in tests, with the same seed).
      do {
        chunks_id = rng_();
      } while (chunks_id == 0 || chunk_ids_.contains(chunks_id));
    }
  }
  // Beyond the bounds: written through, as if the bucket had no write-back.
  if (through) return files_.create(bucket, key);
  return std::unique_ptr<object_writer>{
      std::make_unique<dirty_writer>(*this, std::string{bucket}, std::string{key}, chunks_id)};
}

result<std::optional<object_stat>> write_back_store::stat(std::string_view bucket, std::string_view key) {
  {
    std::lock_guard lock{mutex_};
    if (const auto* object = visible(bucket, key)) {
      return std::optional<object_stat>{object_stat{.identity = object->identity, .meta = object->meta, .unflushed = true}};
    }
  }
  return files_.stat(bucket, key);
}

result<std::unique_ptr<object_reader>> write_back_store::open(std::string_view bucket, std::string_view key) {
  std::optional<dirty_object> object;
  {
    std::lock_guard lock{mutex_};
    if (const auto* found = visible(bucket, key)) object = *found;
  }
  if (!object) return files_.open(bucket, key);
  auto size = object->identity.size;
  auto reader = std::make_unique<dirty_reader>(*this, std::move(*object));
  // The first chunk now: a reader that cannot have it fails here, before
  // an answer has begun, not in the middle of one.
  if (size > 0) {
    if (auto first = reader->view(0, 1); !first) return std::move(first).error();
  }
  return std::unique_ptr<object_reader>{std::move(reader)};
}

result<bool> write_back_store::remove(std::string_view bucket, std::string_view key) {
  if (!dirty_name(bucket, key)) return files_.remove(bucket, key);
  object_name name{std::string{bucket}, std::string{key}};
  std::vector<std::string> drops;
  bool had_dirty = false;
  result<bool> removed = false;
  {
    std::unique_lock lock{mutex_};
    // A flush of this name in progress would put the file back after the remove.
    flush_done_.wait(lock, [&] { return flushing_ != name; });
    removed = files_.remove(bucket, key);
    if (!removed) return removed;
    if (auto it = by_name_.find(name); it != by_name_.end()) {
      auto seqs = it->second;
      if (auto gone = journal_.remove(seqs); !gone) return std::move(gone).error();
      for (auto seq : seqs) forget(seq, drops);
      had_dirty = true;
    }
  }
  drop_chunks(drops);
  return had_dirty || *removed;
}

result<void> write_back_store::remove_bucket(std::string_view bucket) {
  {
    std::lock_guard lock{mutex_};
    auto it = by_name_.lower_bound(object_name{std::string{bucket}, std::string{}});
    if (it != by_name_.end() && it->first.first == bucket) {
      return fail(errc::conflict, "bucket '" + std::string{bucket} + "' holds objects not yet written to files");
    }
  }
  return files_.remove_bucket(bucket);
}

result<void> write_back_store::write_meta(std::string_view bucket, std::string_view key, const file_identity& of,
                                          const object_meta& meta) {
  // A dirty object's record is in the journal, and its identity is no file's.
  if (of.inode == 0) return fail(errc::conflict, "the object is not in its file yet");
  return files_.write_meta(bucket, key, of, meta);
}

result<std::vector<listed_object>> write_back_store::list(std::string_view bucket, std::string_view prefix,
                                                          std::string_view start_after, std::size_t limit) {
  auto listed = files_.list(bucket, prefix, start_after, limit);
  if (!listed || !writes_back(bucket) || prefix.starts_with(hidden_prefix)) return listed;
  std::map<std::string, listed_object, std::less<>> merged;
  for (auto& object : *listed) merged.emplace(object.key, std::move(object));
  {
    std::lock_guard lock{mutex_};
    std::string from{std::max(prefix, start_after)};
    for (auto it = by_name_.lower_bound(object_name{std::string{bucket}, from});
         it != by_name_.end() && it->first.first == bucket && it->first.second.starts_with(prefix); ++it) {
      const auto& key = it->first.second;
      if (key <= start_after) continue;
      // Past the files' last key when they filled the page: not on this page.
      if (listed->size() >= limit && !merged.empty() && key > merged.rbegin()->first) break;
      const auto& object = by_seq_.at(it->second.back()).object;
      merged.insert_or_assign(key, listed_object{.key = key,
                                                 .stat = {.identity = object.identity, .meta = object.meta,
                                                          .unflushed = true}});
    }
  }
  std::vector<listed_object> out;
  out.reserve(std::min(merged.size(), limit));
  for (auto& [key, object] : merged) {
    if (out.size() == limit) break;
    out.push_back(std::move(object));
  }
  return out;
}

flush_step write_back_store::flush_one() {
  std::vector<std::string> drops;
  dirty_object object;
  {
    std::lock_guard lock{mutex_};
    SLUICE_ASSERT(!flushing_);
    auto now = options_.now_ns();
    // Overwritten objects first: they are never written, only let go.
    // Times grow with seqs, so the walk stops at the first object still
    // in its flush delay; only objects waiting to be retried are passed.
    std::vector<std::uint64_t> superseded;
    const entry* due = nullptr;
    std::int64_t next_due = 0;
    auto note = [&](std::int64_t when) {
      if (next_due == 0 || when < next_due) next_due = when;
    };
    for (const auto& [seq, e] : by_seq_) {
      const auto& names = by_name_.at(object_name{e.object.bucket, e.object.key});
      if (names.back() != seq) {
        superseded.push_back(seq);
        if (superseded.size() == drops_per_step) break;
        continue;
      }
      auto ready = e.object.identity.mtime_ns + options_.flush_delay_ns;
      if (ready > now) {
        note(ready);
        break;
      }
      if (e.next_try_ns > now) {
        note(e.next_try_ns);
        continue;
      }
      due = &e;
      break;
    }
    if (!superseded.empty()) {
      if (auto gone = journal_.remove(superseded); !gone) {
        return flush_step{.what = flush_step::kind::failed, .next_due_ns = now + retry_delay_ns(1),
                          .object = "(overwritten objects)", .failure = gone.error(), .retry_in_ns = retry_delay_ns(1)};
      }
      for (auto seq : superseded) forget(seq, drops);
    }
    if (due == nullptr) {
      if (drops.empty()) return flush_step{.what = flush_step::kind::idle, .next_due_ns = next_due};
    } else if (drops.empty()) {
      object = due->object;
      flushing_ = object_name{object.bucket, object.key};
    }
  }
  if (!drops.empty()) {
    drop_chunks(drops);
    return flush_step{.what = flush_step::kind::dropped};
  }

  // The file is written without the lock; only a remove of this name waits.
  auto written = [&]() -> result<void> {
    auto writer = files_.create(object.bucket, object.key);
    if (!writer) return std::move(writer).error();
    auto keys = chunk_keys_of(object);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto chunk = chunks_.fetch(keys[i]);
      if (!chunk) {
        return fail(chunk.code(), "chunk " + std::to_string(i) + " of " + std::to_string(keys.size()) + ": " +
                                      chunk.error().message());
      }
      if (auto ok = (*writer)->write(chunk->bytes()); !ok) return ok;
    }
    if (auto ok = (*writer)->set_mtime(object.identity.mtime_ns); !ok) return ok;
    auto committed = (*writer)->commit(object.meta);
    if (!committed) return std::move(committed).error();
    if (committed->size != object.identity.size) {
      return fail(errc::internal, "wrote " + std::to_string(committed->size) + " bytes, not " +
                                      std::to_string(object.identity.size));
    }
    return {};
  }();

  flush_step step;
  step.object = object.bucket + "/" + object.key;
  {
    std::lock_guard lock{mutex_};
    flushing_.reset();
    flush_done_.notify_all();
    auto it = by_seq_.find(object.seq);
    SLUICE_ASSERT(it != by_seq_.end());  // only remove() takes entries of a name, and it waited
    if (written) {
      std::uint64_t seqs[] = {object.seq};
      if (auto gone = journal_.remove(seqs); !gone) {
        // The file is right; flushing it again later does no harm.
        written = gone.error();
      } else {
        forget(object.seq, drops);
        ++flushed_;
        step.what = flush_step::kind::flushed;
      }
    }
    if (!written) {
      auto& e = it->second;
      e.object.attempts += 1;
      e.object.last_error = written.error().message();
      e.next_try_ns = options_.now_ns() + retry_delay_ns(e.object.attempts);
      (void)journal_.failed(object.seq, e.object.attempts, e.object.last_error);
      step.what = flush_step::kind::failed;
      step.failure = written.error();
      step.attempts = e.object.attempts;
      step.retry_in_ns = retry_delay_ns(e.object.attempts);
    }
  }
  drop_chunks(drops);
  return step;
}

result<std::size_t> write_back_store::drop_orphans(std::size_t limit) {
  std::string prefix{dirty_chunk_prefix};
  prefix.append(journal_id_).push_back('/');
  auto keys = chunks_.keys(prefix, limit);
  if (!keys) return std::move(keys).error();
  std::vector<std::string> orphans;
  {
    std::lock_guard lock{mutex_};
    std::vector<std::uint64_t> named;
    for (const auto& [seq, e] : by_seq_) named.push_back(e.object.chunks_id);
    std::sort(named.begin(), named.end());
    for (const auto& key : *keys) {
      // "~s3w/JOURNAL/" then 16 hex digits.
      if (key.size() < prefix.size() + 16) continue;
      std::uint64_t id = 0;
      const char* first = key.data() + prefix.size();
      auto [end, ec] = std::from_chars(first, first + 16, id, 16);
      bool hex = ec == std::errc{} && end == first + 16;
      if (hex && !std::binary_search(named.begin(), named.end(), id)) orphans.push_back(key);
    }
  }
  drop_chunks(orphans);
  return orphans.size();
}

write_back_status write_back_store::status() const {
  std::lock_guard lock{mutex_};
  write_back_status out;
  out.dirty_objects = by_seq_.size();
  out.dirty_bytes = dirty_bytes_;
  out.flushed = flushed_;
  out.written_through = written_through_;
  for (const auto& [seq, e] : by_seq_) {
    if (out.oldest_ns == 0 || e.object.identity.mtime_ns < out.oldest_ns) out.oldest_ns = e.object.identity.mtime_ns;
    if (e.object.attempts > 0) ++out.failing;
  }
  return out;
}

}  // namespace sluice::s3
