// The request-body sinks: objects and parts streamed into the store, and
// small XML bodies read whole.

#include <algorithm>
#include <cctype>

#include "actors/s3/gateway_state.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

class object_sink final : public body_sink {
 public:
  object_sink(context ctx, std::unique_ptr<object_writer> writer, object_meta meta, std::uint64_t bytes_max,
              std::optional<md5_digest> expected, std::function<response(const object_meta&)> done)
      : ctx_(std::move(ctx)),
        writer_(std::move(writer)),
        meta_(std::move(meta)),
        bytes_max_(bytes_max),
        expected_(expected),
        done_(std::move(done)) {}

  std::optional<response> write(std::span<const std::byte> bytes) override {
    bytes_ += bytes.size();
    if (bytes_ > bytes_max_) {
      writer_.reset();
      return too_large();
    }
    hasher_.update(bytes);
    if (auto w = writer_->write(bytes); !w) {
      writer_.reset();
      return ctx_.store_failure(w.error());
    }
    return std::nullopt;
  }

  response finish() override {
    auto digest = hasher_.finish();
    if (expected_ && *expected_ != digest) {
      writer_.reset();  // the temp file goes before the client hears why
      return ctx_.fail(s3_code::bad_digest, "The Content-MD5 you specified did not match what was received.");
    }
    meta_.etag = to_hex(digest);
    auto committed = writer_->commit(meta_);
    writer_.reset();
    if (!committed) return ctx_.store_failure(committed.error());
    return done_(meta_);
  }

 private:
  response too_large() const {
    auto r = ctx_.fail(s3_code::entity_too_large,
                       "Your upload exceeds the maximum allowed size of " + std::to_string(bytes_max_) + " bytes.");
    r.close = true;
    return r;
  }

  context ctx_;
  std::unique_ptr<object_writer> writer_;
  object_meta meta_;
  std::uint64_t bytes_max_;
  std::optional<md5_digest> expected_;
  std::function<response(const object_meta&)> done_;
  md5_hasher hasher_;
  std::uint64_t bytes_ = 0;
};

class xml_sink final : public body_sink {
 public:
  xml_sink(context ctx, std::function<response(std::string)> done) : ctx_(std::move(ctx)), done_(std::move(done)) {}

  std::optional<response> write(std::span<const std::byte> bytes) override {
    if (body_.size() + bytes.size() > ctx_.g.options.limits.xml_body_bytes_max) {
      auto r = ctx_.fail(s3_code::malformed_xml, "The XML you provided is larger than this gateway accepts.");
      r.close = true;
      return r;
    }
    body_.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return std::nullopt;
  }

  response finish() override {
    if (auto md5 = ctx_.r.header("content-md5")) {
      auto expected = base64_decode(*md5);
      if (!expected || expected->size() != 16) return ctx_.fail(s3_code::invalid_digest, "The Content-MD5 is not valid.");
      auto digest = md5_of(body_);
      if (std::string_view{reinterpret_cast<const char*>(digest.data()), digest.size()} != *expected) {
        return ctx_.fail(s3_code::bad_digest, "The Content-MD5 you specified did not match what was received.");
      }
    }
    return done_(std::move(body_));
  }

 private:
  context ctx_;
  std::function<response(std::string)> done_;
  std::string body_;
};

bool kept_header(std::string_view lower) {
  return lower == "content-type" || lower == "content-encoding" || lower == "content-disposition" ||
         lower == "content-language" || lower == "cache-control" || lower == "expires" ||
         lower.starts_with("x-amz-meta-");
}

/// A Content-Encoding list without its aws-chunked entry: "aws-chunked,gzip" → "gzip".
std::string without_aws_chunked(std::string_view list) {
  std::string out;
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = list.substr(0, comma);
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty() || item == "aws-chunked") continue;
    if (!out.empty()) out += ',';
    out += item;
  }
  return out;
}

}  // namespace

std::unique_ptr<body_sink> make_object_sink(const context& ctx, std::unique_ptr<object_writer> writer,
                                            object_meta meta, std::uint64_t bytes_max,
                                            std::function<response(const object_meta&)> done) {
  std::optional<md5_digest> expected;
  if (auto md5 = ctx.r.header("content-md5")) {
    auto bytes = base64_decode(*md5);
    // A malformed Content-MD5 is checked before the body (object_ops); here it is valid.
    if (bytes && bytes->size() == 16) {
      md5_digest d{};
      std::copy(bytes->begin(), bytes->end(), reinterpret_cast<char*>(d.data()));
      expected = d;
    }
  }
  return std::make_unique<object_sink>(ctx, std::move(writer), std::move(meta), bytes_max, expected, std::move(done));
}

std::unique_ptr<body_sink> make_xml_sink(const context& ctx, std::function<response(std::string body)> done) {
  return std::make_unique<xml_sink>(ctx, std::move(done));
}

std::variant<object_meta, s3_error> meta_from_request(const context& ctx) {
  object_meta meta;
  std::size_t user_bytes = 0;
  for (const auto& [name, value] : ctx.r.headers) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
    if (!kept_header(lower)) continue;
    if (lower.starts_with("x-amz-meta-")) user_bytes += lower.size() - 11 + value.size();
    if (lower == "content-encoding") {
      // aws-chunked names how the body was sent, not what the object is: S3 drops it.
      auto kept = without_aws_chunked(value);
      if (!kept.empty()) meta.headers.emplace_back(std::move(lower), std::move(kept));
      continue;
    }
    meta.headers.emplace_back(std::move(lower), value);
  }
  if (user_bytes > ctx.g.options.limits.user_meta_bytes_max) {
    return s3_error{s3_code::metadata_too_large, "Your metadata headers exceed the maximum allowed metadata size (" +
                                                     std::to_string(ctx.g.options.limits.user_meta_bytes_max) +
                                                     " bytes)."};
  }
  std::sort(meta.headers.begin(), meta.headers.end());
  return meta;
}

}  // namespace sluice::s3
