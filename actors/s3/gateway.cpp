#include "actors/s3/gateway.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>

#include "actors/s3/aws_chunked.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/names.hpp"
#include "runtime/assert.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

/// Sub-resources S3 has and this gateway does not: answered with
/// NotImplemented rather than mistaken for a plain GET or PUT.
constexpr std::array<std::string_view, 27> unsupported_subresources = {
    "acl",        "policy",        "cors",         "lifecycle",      "versioning",          "tagging",
    "website",    "logging",       "notification", "replication",    "encryption",          "object-lock",
    "retention",  "legal-hold",    "torrent",      "restore",        "select",              "accelerate",
    "requestPayment", "analytics", "inventory",    "metrics",        "ownershipControls",   "publicAccessBlock",
    "intelligent-tiering", "versions", "attributes"};

std::optional<std::string_view> unsupported(const parsed_request& r) {
  for (auto name : unsupported_subresources) {
    // Reading the versioning state is answered (never enabled); changing it is not.
    if (name == "versioning" && r.method == "GET" && r.key.empty()) continue;
    // An object's tags are read (there are none: awscli asks before a multipart copy); setting them is not.
    if (name == "tagging" && r.method == "GET" && !r.key.empty()) continue;
    if (r.has(name)) return name;
  }
  return std::nullopt;
}

response not_allowed(const context& ctx) {
  return ctx.fail(s3_code::method_not_allowed, "The method " + ctx.r.method + " is not allowed on this resource.");
}

started service_request(const context& ctx) {
  if (ctx.r.method == "GET") return list_buckets(ctx);
  return not_allowed(ctx);
}

started bucket_request(const context& ctx) {
  const auto& m = ctx.r.method;
  if (m == "GET") {
    if (ctx.r.has("location")) return bucket_location(ctx);
    if (ctx.r.has("versioning")) return bucket_versioning(ctx);
    if (ctx.r.has("uploads")) return list_uploads(ctx);
    return list_objects(ctx, ctx.r.param("list-type") == "2");
  }
  if (m == "HEAD") return head_bucket(ctx);
  if (m == "PUT") return create_bucket(ctx);
  if (m == "DELETE") return delete_bucket(ctx);
  if (m == "POST" && ctx.r.has("delete")) return delete_objects(ctx);
  return not_allowed(ctx);
}

started object_request(const context& ctx) {
  if (auto bad = check_key(ctx.r.key, ctx.g.options.limits.key_bytes_max)) return ctx.fail(*bad);
  const auto& m = ctx.r.method;
  bool upload = ctx.r.has("uploadId");
  if (m == "PUT") {
    if (ctx.r.header("x-amz-copy-source")) {
      return upload ? upload_part_copy(ctx) : copy_object(ctx);
    }
    return upload ? upload_part(ctx) : put_object(ctx);
  }
  if (m == "GET" && ctx.r.has("tagging")) return object_tagging(ctx);
  if (m == "GET") return upload ? list_parts(ctx) : get_object(ctx, false);
  if (m == "HEAD") return get_object(ctx, true);
  if (m == "DELETE") return upload ? abort_upload(ctx) : delete_object(ctx);
  if (m == "POST" && ctx.r.has("uploads")) return create_upload(ctx);
  if (m == "POST" && upload) return complete_upload(ctx);
  return not_allowed(ctx);
}

/// Adds the request id to every response a sink gives.
class tagging_sink final : public body_sink {
 public:
  tagging_sink(std::unique_ptr<body_sink> inner, std::string id, bool head)
      : inner_(std::move(inner)), id_(std::move(id)), head_(head) {}
  std::optional<response> write(std::span<const std::byte> bytes) override {
    auto r = inner_->write(bytes);
    if (r) tag(*r);
    return r;
  }
  response finish() override {
    auto r = inner_->finish();
    tag(r);
    return r;
  }
  void tag(response& r) const {
    r.headers.emplace_back("x-amz-request-id", id_);
    if (head_) r.head = true;
  }

 private:
  std::unique_ptr<body_sink> inner_;
  std::string id_;
  bool head_;
};

/// Checks the body against the SHA-256 the signature covers before the
/// inner sink may commit anything.
class payload_checking_sink final : public body_sink {
 public:
  payload_checking_sink(std::unique_ptr<body_sink> inner, std::string expected, context ctx)
      : inner_(std::move(inner)), expected_(std::move(expected)), ctx_(std::move(ctx)) {}
  std::optional<response> write(std::span<const std::byte> bytes) override {
    hasher_.update(bytes);
    return inner_->write(bytes);
  }
  response finish() override {
    auto digest = hasher_.finish();
    if (to_hex(digest) != expected_) {
      inner_.reset();  // drops what it staged
      return ctx_.fail(s3_code::content_sha256_mismatch,
                       "The provided 'x-amz-content-sha256' header does not match what was computed.");
    }
    return inner_->finish();
  }

 private:
  std::unique_ptr<body_sink> inner_;
  std::string expected_;
  context ctx_;
  sha256_hasher hasher_;
};

/// Decodes an aws-chunked body, checking its chunk signatures, and hands
/// the payload to the inner sink, which commits only once the whole body
/// decoded (finish).
class aws_chunked_sink final : public body_sink {
 public:
  aws_chunked_sink(std::unique_ptr<body_sink> inner, std::optional<chunk_chain> chain, std::uint64_t payload_bytes,
                   context ctx)
      : inner_(std::move(inner)), decoder_(std::move(chain), payload_bytes), ctx_(std::move(ctx)) {}
  std::optional<response> write(std::span<const std::byte> bytes) override {
    while (!bytes.empty()) {
      auto step = decoder_.next(bytes);
      if (step.error) return refuse(*step.error);
      if (!step.payload.empty()) {
        if (auto early = inner_->write(step.payload)) return early;
      }
      bytes = bytes.subspan(step.consumed);
    }
    return std::nullopt;
  }
  response finish() override {
    if (auto bad = decoder_.finish()) return refuse(*bad);
    return inner_->finish();
  }

 private:
  response refuse(const s3_error& e) {
    inner_.reset();  // drops what it staged
    auto r = ctx_.fail(e);
    r.close = true;  // the rest of a broken body cannot be framed
    return r;
  }
  std::unique_ptr<body_sink> inner_;
  aws_chunked_decoder decoder_;
  context ctx_;
};

/// x-amz-decoded-content-length, which an aws-chunked body must declare.
std::optional<std::uint64_t> decoded_length(const parsed_request& r) {
  auto text = r.header("x-amz-decoded-content-length");
  if (!text) return std::nullopt;
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (text->empty() || ec != std::errc{} || end != text->data() + text->size()) return std::nullopt;
  return v;
}

bool streams(const parsed_request& r) { return r.header("x-amz-content-sha256") == streaming_signed_payload; }

started dispatch(const context& ctx) {
  if (auto name = unsupported(ctx.r)) {
    return ctx.fail(s3_code::not_implemented, "The '" + std::string{*name} + "' sub-resource is not supported.");
  }
  auto sha = ctx.r.header("x-amz-content-sha256");
  if (sha && sha->starts_with("STREAMING-") && *sha != streaming_signed_payload) {
    return ctx.fail(s3_code::not_implemented, "Of the aws-chunked bodies only " +
                                                  std::string{streaming_signed_payload} + " is supported, not " +
                                                  std::string{*sha} + ".");
  }
  if (ctx.r.bucket.empty()) return service_request(ctx);
  if (!valid_bucket_name(ctx.r.bucket)) {
    if (ctx.r.method == "PUT" && ctx.r.key.empty()) {
      return ctx.fail(s3_code::invalid_bucket_name, "The specified bucket is not valid.");
    }
    return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  }
  return ctx.r.key.empty() ? bucket_request(ctx) : object_request(ctx);
}

/// An aws-chunked request: dispatched as if its body were the decoded
/// payload, and its sink decoding first.
started dispatch_streaming(const context& ctx, std::optional<chunk_chain> chain) {
  auto payload_bytes = decoded_length(ctx.r);
  if (!payload_bytes) {
    auto r = ctx.fail(s3_code::invalid_request, "An aws-chunked body needs x-amz-decoded-content-length.");
    r.close = true;
    return r;
  }
  context decoded = ctx;
  decoded.r.content_length = *payload_bytes;
  auto out = dispatch(decoded);
  auto* sink = std::get_if<std::unique_ptr<body_sink>>(&out);
  if (!sink) return out;
  return std::make_unique<aws_chunked_sink>(std::move(*sink), std::move(chain), *payload_bytes, ctx);
}

/// Checks the signature when the gateway has credentials, then dispatches.
started authorized(context& ctx) {
  const auto& auth = ctx.g.options.auth;
  auto* users = ctx.g.options.users;
  if (!auth && users == nullptr) return streams(ctx.r) ? dispatch_streaming(ctx, std::nullopt) : dispatch(ctx);
  auto now_s = ctx.g.options.now_ns() / 1'000'000'000;
  auto checked = users == nullptr
                     ? verify_sigv4(ctx.r, *auth, ctx.g.options.region, now_s)
                     : verify_sigv4(
                           ctx.r,
                           [&ctx, users](std::string_view key) -> std::optional<std::string> {
                             ctx.user = users->find(key);
                             if (!ctx.user) return std::nullopt;
                             return ctx.user->keys.secret_key;
                           },
                           ctx.g.options.region, now_s);
  if (auto* e = std::get_if<s3_error>(&checked)) return ctx.fail(*e);
  if (ctx.user) {
    if (auto denied = check_grants(ctx.r, *ctx.user)) return ctx.fail(*denied);
  }
  auto& ok = std::get<verified>(checked);
  if (ok.chunks) return dispatch_streaming(ctx, std::move(ok.chunks));
  auto out = dispatch(ctx);
  auto* sink = std::get_if<std::unique_ptr<body_sink>>(&out);
  if (!sink || !ok.payload_sha256) return out;
  return std::make_unique<payload_checking_sink>(std::move(*sink), *ok.payload_sha256, ctx);
}

}  // namespace

gateway::gateway(bucket_store& store, read_path& reads, gateway_options options)
    : state_(new state{.store = store,
                       .reads = reads,
                       .options = options,
                       .uploads = upload_table{options.limits.uploads_max, options.seed}}) {
  SLUICE_ASSERT(state_->options.now_ns != nullptr);
  SLUICE_ASSERT(!(state_->options.auth && state_->options.users != nullptr));
}

gateway::~gateway() = default;

started gateway::start(const request_head& head) {
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(++state_->requests));
  auto parsed = parse_request(head, state_->options.domain);
  if (!parsed) {
    return error_response({s3_code::invalid_argument, "The request-target is not a valid path (a bad %-escape?)."},
                          head.target, id);
  }
  context ctx{.g = *state_, .r = std::move(*parsed), .request_id = id};
  started out = authorized(ctx);
  bool is_head = head.method == "HEAD";
  if (auto* r = std::get_if<response>(&out)) {
    r->headers.emplace_back("x-amz-request-id", id);
    if (is_head) r->head = true;
    return out;
  }
  return std::make_unique<tagging_sink>(std::move(std::get<std::unique_ptr<body_sink>>(out)), id, is_head);
}

response gateway::shell_error(s3_code code, std::string message, std::string_view resource) {
  char id[24];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(++state_->requests));
  auto r = error_response({code, std::move(message)}, resource, id);
  r.headers.emplace_back("x-amz-request-id", id);
  r.close = true;
  return r;
}

response context::store_failure(const error& e) const {
  if (e.code() == errc::not_found) {
    auto bucket = g.store.find_bucket(r.bucket);
    if (bucket && !*bucket) return fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  }
  return fail(from_store_error(e));
}

response context::xml(int status, std::string body) const {
  response out{.status = status};
  out.headers.emplace_back("Content-Type", "application/xml");
  out.content_length = body.size();
  out.body = std::move(body);
  return out;
}

std::string quoted(std::string_view etag) { return "\"" + std::string{etag} + "\""; }

}  // namespace sluice::s3
