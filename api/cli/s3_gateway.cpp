#include "api/cli/s3_gateway.hpp"

#include <chrono>

#include "actors/s3/names.hpp"
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
    if (resting()) return std::nullopt;
    auto got = client_->get(key, call_options{call_timeout});
    if (got) return std::move(*got);
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

 private:
  /// A chunk call's deadline: a read waits at most this for the cache.
  static constexpr std::chrono::milliseconds call_timeout{1000};
  /// How long the cache is left alone after it failed.
  static constexpr std::chrono::milliseconds rest_after_failure{2000};

  bool resting() const { return std::chrono::steady_clock::now().time_since_epoch().count() < rest_until_.load(); }
  void rest() {
    rest_until_ = (std::chrono::steady_clock::now() + rest_after_failure).time_since_epoch().count();
  }

  std::unique_ptr<client> client_;
  std::atomic<std::chrono::steady_clock::rep> rest_until_{0};
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
  if (s.threads < 1 || s.threads > 64) return fail(errc::invalid_argument, "threads must be 1 to 64");
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
  if (!s.users.empty()) {
    auto users = s3_user_store::open(s.users, false);
    if (!users) {
      return fail(users.code() == errc::not_found ? errc::invalid_argument : users.code(), users.error().message());
    }
    g->users_ = std::move(*users);
    g->users_path_ = s.users;
  }
  g->gateway_ = std::make_unique<s3::gateway>(*g->store_, *reads,
                                              s3::gateway_options{.domain = s.domain,
                                                                  .region = s.region,
                                                                  .auth = *access,
                                                                  .users = g->users_.get(),
                                                                  .seed = entropy_seed(),
                                                                  .now_ns = wall_clock_ns});
  auto server = s3_server::start(*g->gateway_,
                                 s3_server_options{.listen = s.listen.empty() ? "127.0.0.1:9000" : s.listen,
                                                   .threads = static_cast<std::size_t>(s.threads),
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
}

std::string running_s3_gateway::cache_note() const { return cache_note_; }

std::string running_s3_gateway::access_note() const {
  if (!users_path_.empty()) return " (requests must be signed by a user of " + users_path_ + ", within their grants)";
  if (access_key_.empty()) return " (anonymous access: anyone may read and write)";
  return " (requests must be signed with SigV4, access key " + access_key_ + ")";
}

}  // namespace sluice::cli
