#include "api/cli/s3_gateway.hpp"

#include <algorithm>
#include <chrono>
#include <list>
#include <unordered_map>

#include "actors/s3/names.hpp"
#include "runtime/cpus.hpp"
#include "runtime/log.hpp"
#include "runtime/rng.hpp"
#include "runtime/units.hpp"
#include "sluice/client.hpp"

namespace sluice::cli {
namespace {

result<posix_bucket_options> store_options(const s3_section& s) {
  posix_bucket_options out{.root = s.root};
  for (const auto& spec : s.buckets) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
      return fail(errc::invalid_argument, "a bucket is given as NAME=DIR, not '" + spec + "'");
    }
    auto name = spec.substr(0, eq);
    if (!s3::valid_bucket_name(name)) {
      return fail(errc::invalid_argument, "'" + name + "' is not an S3 bucket name (3-63 of a-z 0-9 . -)");
    }
    for (const auto& [other, dir] : out.exported) {
      if (other == name) return fail(errc::invalid_argument, "bucket '" + name + "' is given twice");
    }
    out.exported.emplace_back(name, spec.substr(eq + 1));
  }
  if (out.exported.empty() && out.root.empty()) {
    return fail(errc::invalid_argument, "nothing to serve: give a bucket NAME=DIR or a root DIR");
  }
  return out;
}

/// Exactly one of: anonymous, an access key with its secret, or a users
/// file.
result<std::optional<s3::credentials>> access_of(const s3_section& s, std::string_view flag_prefix) {
  std::string p{flag_prefix};
  bool keyed = !s.access_key.empty() || !s.secret_key.empty();
  int modes = (s.anonymous ? 1 : 0) + (keyed ? 1 : 0) + (s.users.empty() ? 0 : 1);
  if (modes > 1) {
    return fail(errc::invalid_argument, p + "anonymous, " + p + "access-key/" + p + "secret-key and " + p +
                                            "users exclude each other");
  }
  if (s.anonymous || !s.users.empty()) return std::optional<s3::credentials>{};
  if (!keyed) {
    return fail(errc::invalid_argument, "say who may use the gateway: " + p + "users FILE (users added with "
                                            "sluice s3 user add, each with grants per bucket), " + p +
                                            "access-key KEY " + p +
                                            "secret-key SECRET (requests signed with SigV4), or " + p +
                                            "anonymous (anyone may read and write); in [s3]: users, access_key "
                                            "and secret_key, or anonymous = true");
  }
  if (s.access_key.empty() || s.secret_key.empty()) {
    return fail(errc::invalid_argument, p + "access-key and " + p + "secret-key go together");
  }
  return std::optional<s3::credentials>{s3::credentials{.access_key = s.access_key, .secret_key = s.secret_key}};
}

result<std::chrono::milliseconds> positive_ms(std::string_view what, std::chrono::microseconds d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d);
  if (ms.count() <= 0) return fail(errc::invalid_argument, std::string{what} + " must be at least 1ms");
  return ms;
}

/// 0: the CPUs this process may run on, at most 4 — more threads than
/// CPUs only trade requests between them.
std::size_t io_threads(std::int64_t configured) {
  if (configured > 0) return static_cast<std::size_t>(configured);
  return static_cast<std::size_t>(std::clamp(cpus_allowed(4), 1, 4));
}

std::int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Chunks kept as KV values through a client of the owner. Any failure
/// is a miss: the file is read instead. After a failure other than a
/// plain miss the cache is left alone for a while, so an owner that went
/// away costs one timeout, not one per chunk.
class kv_chunks final : public s3::chunk_store {
 public:
  explicit kv_chunks(std::unique_ptr<client> c) : client_(std::move(c)) {}

  std::optional<value> get(const std::string& key) override {
    if (auto held = recall(key)) return held;
    if (resting()) return std::nullopt;
    auto got = client_->get(key, call_options{call_timeout});
    if (got) {
      remember(key, *got);
      return std::move(*got);
    }
    if (got.code() != errc::not_found) rest();
    return std::nullopt;
  }

  bool put(const std::string& key, std::span<const std::byte> bytes) override {
    if (resting()) return false;
    auto put = client_->put(key, bytes, call_options{call_timeout});
    // A full pool that could not evict in time is the cache's business, not a fault.
    if (!put && put.code() != errc::no_capacity) rest();
    return put.ok();
  }

  result<void> keep(const std::string& key, std::span<const std::byte> bytes, std::uint32_t copies) override {
    // Evicted between the put and the pin (a full pool): put it again.
    for (int attempt = 0;; ++attempt) {
      auto put = client_->put(key, bytes, put_options{.timeout = keep_timeout, .replicas = copies});
      if (!put) return std::move(put).error();
      auto pinned = client_->pin(key, pin_options{.timeout = keep_timeout, .detached = true});
      if (pinned) return {};
      if (pinned.code() != errc::not_found || attempt == 2) return std::move(pinned).error();
    }
  }

  result<value> fetch(const std::string& key) override { return client_->get(key, call_options{keep_timeout}); }

  result<bool> drop(const std::string& key) override {
    // A remove takes the pin with the key.
    return client_->remove(key, call_options{keep_timeout});
  }

  result<std::vector<std::string>> keys(const std::string& prefix, std::size_t limit) override {
    std::vector<std::string> out;
    list_options options{.timeout = keep_timeout};
    while (out.size() < limit) {
      auto page = client_->list(prefix, options);
      if (!page) return std::move(page).error();
      for (auto& k : page->keys) out.push_back(std::move(k.key));
      if (!page->more || page->keys.empty()) break;
      options.start_after = out.back();
    }
    if (out.size() > limit) out.resize(limit);
    return out;
  }

 private:
  /// A chunk call's deadline: a read waits at most this for the cache.
  static constexpr std::chrono::milliseconds call_timeout{1000};
  /// Write-back chunk calls wait longer: they are not a cache.
  static constexpr std::chrono::milliseconds keep_timeout{10000};
  /// How long the cache is left alone after it failed.
  static constexpr std::chrono::milliseconds rest_after_failure{2000};

  // Views of small chunks read lately, kept so that a hit among them
  // does not ask the owner: a chunk's key names one version of its bytes,
  // so a view of it never goes stale. Each holds a read lease (the pool
  // does not evict what is held), hence the bounds.
  static constexpr std::size_t view_bytes_max = 64 << 10;   ///< larger chunks are not kept
  static constexpr std::size_t views_max = 4096;
  static constexpr std::size_t views_bytes_max = 32 << 20;  ///< all views together

  std::optional<value> recall(const std::string& key) {
    std::lock_guard lock{views_mutex_};
    auto it = views_.find(key);
    if (it == views_.end()) return std::nullopt;
    recent_.splice(recent_.begin(), recent_, it->second);
    return it->second->second;
  }

  void remember(const std::string& key, const value& v) {
    if (v.size() > view_bytes_max) return;
    std::lock_guard lock{views_mutex_};
    if (views_.contains(key)) return;
    recent_.emplace_front(key, v);
    views_.emplace(key, recent_.begin());
    view_bytes_ += v.size();
    while (views_.size() > views_max || view_bytes_ > views_bytes_max) {
      auto& [old_key, old] = recent_.back();
      view_bytes_ -= old.size();
      views_.erase(old_key);
      recent_.pop_back();
    }
  }

  bool resting() const { return std::chrono::steady_clock::now().time_since_epoch().count() < rest_until_.load(); }
  void rest() {
    rest_until_ = (std::chrono::steady_clock::now() + rest_after_failure).time_since_epoch().count();
  }

  std::unique_ptr<client> client_;
  std::atomic<std::chrono::steady_clock::rep> rest_until_{0};
  std::mutex views_mutex_;
  std::list<std::pair<std::string, value>> recent_;  ///< most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, value>>::iterator> views_;
  std::size_t view_bytes_ = 0;
};

}  // namespace

result<std::unique_ptr<running_s3_gateway>> running_s3_gateway::start(const s3_section& s,
                                                                      std::string_view flag_prefix) {
  auto access = access_of(s, flag_prefix);
  if (!access) return std::move(access).error();
  auto options = store_options(s);
  if (!options) return std::move(options).error();
  auto request_timeout = positive_ms("the request timeout", s.request_timeout);
  if (!request_timeout) return std::move(request_timeout).error();
  auto idle_timeout = positive_ms("the idle timeout", s.idle_timeout);
  if (!idle_timeout) return std::move(idle_timeout).error();
  if (s.threads < 0 || s.threads > 64) return fail(errc::invalid_argument, "threads must be 1 to 64");
  if (s.connections_max < 1 || s.connections_max > 65536) {
    return fail(errc::invalid_argument, "connections_max must be 1 to 65536");
  }
  std::unique_ptr<running_s3_gateway> g{new running_s3_gateway};
  auto store = posix_bucket_store::open(*options);
  // A directory that is not there or not usable is a setting to fix.
  if (!store) return fail(errc::invalid_argument, "cannot open the backing directories: " + store.error().message());
  if (s.chunk_bytes < s3::chunk_bytes_min || s.chunk_bytes > s3::chunk_bytes_max) {
    return fail(errc::invalid_argument, "the chunk size must be 64 KiB to 64 MiB");
  }
  g->store_ = std::move(*store);
  g->file_reads_ = std::make_unique<s3::store_read_path>(*g->store_);
  s3::read_path* reads = g->file_reads_.get();
  if (!s.cache) {
    g->cache_note_ = "no chunk cache: every read reads the file (cache = false)";
  } else if (s.owner.empty()) {
    g->cache_note_ = "no chunk cache: every read reads the file (give an owner to cache in: " +
                     std::string{flag_prefix} + "owner HOST:PORT)";
  } else {
    client_options copts;
    copts.name = "s3-gateway";
    auto c = client::connect(s.owner, copts);
    if (!c) return fail(c.code(), "cannot reach the owner at " + s.owner + " to cache chunks in: " + c.error().message());
    g->chunks_ = std::make_unique<kv_chunks>(std::move(*c));
    g->cached_reads_ = std::make_unique<s3::cached_read_path>(*g->file_reads_, *g->chunks_, s.chunk_bytes);
    reads = g->cached_reads_.get();
    g->cache_note_ = "chunks of " + format_size(s.chunk_bytes) + " cached in the pool of the owner at " + s.owner;
  }
  bucket_store* served = g->store_.get();
  if (!s.write_back.empty()) {
    auto ok = g->start_write_back(s, flag_prefix);
    if (!ok) return std::move(ok).error();
    served = g->write_back_.get();
    g->file_reads_ = std::make_unique<s3::store_read_path>(*served);
    g->cached_reads_ = std::make_unique<s3::cached_read_path>(*g->file_reads_, *g->chunks_, s.chunk_bytes);
    reads = g->cached_reads_.get();
  }
  if (!s.users.empty()) {
    auto users = s3_user_store::open(s.users, false);
    if (!users) {
      return fail(users.code() == errc::not_found ? errc::invalid_argument : users.code(), users.error().message());
    }
    g->users_ = std::move(*users);
    g->users_path_ = s.users;
  }
  g->gateway_ = std::make_unique<s3::gateway>(*served, *reads,
                                              s3::gateway_options{.domain = s.domain,
                                                                  .region = s.region,
                                                                  .auth = *access,
                                                                  .users = g->users_.get(),
                                                                  .seed = entropy_seed(),
                                                                  .now_ns = wall_clock_ns});
  auto server = s3_server::start(*g->gateway_,
                                 s3_server_options{.listen = s.listen.empty() ? "127.0.0.1:9000" : s.listen,
                                                   .threads = io_threads(s.threads),
                                                   .connections_max = static_cast<std::size_t>(s.connections_max),
                                                   .request_timeout = *request_timeout,
                                                   .idle_timeout = *idle_timeout});
  if (!server) return std::move(server).error();
  g->server_ = std::move(*server);
  if (*access) g->access_key_ = s.access_key;
  return g;
}

running_s3_gateway::~running_s3_gateway() {
  server_.reset();  // no request in flight may outlive the gateway and store it uses
  if (flusher_.joinable()) {
    {
      std::lock_guard lock{flush_mutex_};
      flush_stopping_ = true;
    }
    flush_wake_.notify_all();
    flusher_.join();
  }
}

result<void> running_s3_gateway::start_write_back(const s3_section& s, std::string_view flag_prefix) {
  std::string p{flag_prefix};
  if (chunks_ == nullptr) {
    return fail(errc::invalid_argument, "write-back keeps objects in an owner's pool before their files are written: "
                                        "give the owner (" + p + "owner HOST:PORT) and keep the cache on");
  }
  if (s.journal.empty()) {
    return fail(errc::invalid_argument, "write-back needs a journal file to survive restarts: " + p +
                                            "journal FILE (or [s3] journal)");
  }
  if (s.write_back_copies < 1 || s.write_back_copies > 255) {
    return fail(errc::invalid_argument, "write-back copies must be 1 to 255");
  }
  if (s.flush_delay.count() < 0) return fail(errc::invalid_argument, "the flush delay cannot be negative");
  for (const auto& bucket : s.write_back) {
    if (bucket != "*" && !s3::valid_bucket_name(bucket)) {
      return fail(errc::invalid_argument, "write-back: '" + bucket + "' is not an S3 bucket name (or * for every bucket)");
    }
  }
  auto journal = s3_journal::open(s.journal);
  if (!journal) return std::move(journal).error();
  journal_ = std::move(*journal);
  auto store = s3::write_back_store::open(
      *store_, *chunks_, *journal_,
      s3::write_back_options{.buckets = s.write_back,
                             .copies = static_cast<std::uint32_t>(s.write_back_copies),
                             .chunk_bytes = s.chunk_bytes,
                             .dirty_bytes_max = s.dirty_bytes_max,
                             .dirty_objects_max = static_cast<std::size_t>(s.dirty_objects_max),
                             .flush_delay_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.flush_delay).count(),
                             .seed = entropy_seed(),
                             .now_ns = wall_clock_ns,
                             .wake = [this] { wake_flusher(); }});
  if (!store) return fail(store.code(), "cannot read the write-back journal " + s.journal + ": " + store.error().message());
  write_back_ = std::move(*store);
  // Chunks of writes a crash cut short: nothing names them any more.
  if (auto dropped = write_back_->drop_orphans(1'000'000); !dropped) {
    get_logger("s3")->warn("write-back: could not look for chunks left by writes cut short: {}",
                           dropped.error().to_string());
  } else if (*dropped > 0) {
    get_logger("s3")->info("write-back: let go of {} chunks of writes cut short", *dropped);
  }
  auto status = write_back_->status();
  std::string buckets;
  for (const auto& b : s.write_back) buckets += (buckets.empty() ? "" : ", ") + b;
  write_back_note_ = "write-back for " + (buckets == "*" ? std::string{"every bucket"} : "buckets " + buckets) + ": " +
                     std::to_string(s.write_back_copies) + (s.write_back_copies == 1 ? " copy" : " copies") +
                     " of each chunk, journal " + s.journal + " (" + std::to_string(status.dirty_objects) +
                     (status.dirty_objects == 1 ? " object, " : " objects, ") + format_size(status.dirty_bytes) + " to write)";
  flusher_ = std::thread{[this] { flush_loop(); }};
  return {};
}

void running_s3_gateway::wake_flusher() {
  {
    std::lock_guard lock{flush_mutex_};
    flush_woken_ = true;
  }
  flush_wake_.notify_one();
}

void running_s3_gateway::flush_loop() {
  auto log = get_logger("s3");
  // The journal reaches the disk at least this often while it changes.
  constexpr std::chrono::nanoseconds sync_every = std::chrono::seconds{1};
  auto synced_at = std::chrono::steady_clock::now();
  bool unsynced = false;
  std::unique_lock lock{flush_mutex_};
  while (!flush_stopping_) {
    unsynced = unsynced || flush_woken_;
    flush_woken_ = false;
    lock.unlock();
    auto step = write_back_->flush_one();
    auto now = std::chrono::steady_clock::now();
    unsynced = unsynced || step.what != s3::flush_step::kind::idle;
    if (unsynced && now - synced_at >= sync_every) {
      if (auto ok = journal_->sync(); !ok) log->warn("write-back: the journal did not reach the disk: {}", ok.error().to_string());
      synced_at = now;
      unsynced = false;
    }
    lock.lock();
    using kind = s3::flush_step::kind;
    if (step.what == kind::failed) {
      log->warn("write-back: writing '{}' failed (attempt {}), trying again in {}s: {}", step.object, step.attempts,
                step.retry_in_ns / 1'000'000'000, step.failure ? step.failure->to_string() : "?");
      // Other objects may be due; a journal that fails every time must not spin.
      flush_wake_.wait_for(lock, std::chrono::milliseconds{10}, [&] { return flush_stopping_; });
      continue;
    }
    if (step.what != kind::idle) continue;
    auto wait = unsynced || flush_woken_ ? std::chrono::nanoseconds{sync_every} : std::chrono::nanoseconds::max();
    if (step.next_due_ns != 0) {
      wait = std::min(wait, std::chrono::nanoseconds{std::max<std::int64_t>(step.next_due_ns - wall_clock_ns(), 0)});
    }
    auto woken = [&] { return flush_woken_ || flush_stopping_; };
    if (wait == std::chrono::nanoseconds::max()) {
      flush_wake_.wait(lock, woken);
    } else {
      flush_wake_.wait_for(lock, wait, woken);
    }
  }
  lock.unlock();
  (void)journal_->sync();
}

std::string running_s3_gateway::write_back_note() const { return write_back_note_; }

std::string running_s3_gateway::cache_note() const { return cache_note_; }

std::string running_s3_gateway::access_note() const {
  if (!users_path_.empty()) return " (requests must be signed by a user of " + users_path_ + ", within their grants)";
  if (access_key_.empty()) return " (anonymous access: anyone may read and write)";
  return " (requests must be signed with SigV4, access key " + access_key_ + ")";
}

}  // namespace sluice::cli
