// PutObject, GetObject, HeadObject, DeleteObject, GetObjectTagging.

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/xml.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

constexpr std::string_view default_content_type = "binary/octet-stream";

std::int64_t seconds(std::int64_t ns) { return ns / 1'000'000'000; }

/// response-content-type and friends: a GET may ask for other headers.
void apply_overrides(const parsed_request& r, response& out) {
  static constexpr std::pair<std::string_view, std::string_view> overrides[] = {
      {"response-content-type", "Content-Type"},         {"response-content-language", "Content-Language"},
      {"response-expires", "Expires"},                   {"response-cache-control", "Cache-Control"},
      {"response-content-disposition", "Content-Disposition"}, {"response-content-encoding", "Content-Encoding"}};
  for (auto [param, header] : overrides) {
    auto value = r.param(param);
    if (!value) continue;
    std::erase_if(out.headers, [header](const auto& h) { return find_header({h}, header).has_value(); });
    out.headers.emplace_back(std::string{header}, *value);
  }
}

/// nullopt when the bucket exists; else the NoSuchBucket answer.
std::optional<response> missing_bucket(const context& ctx) {
  auto bucket = ctx.g.store.find_bucket(ctx.r.bucket);
  if (!bucket) return ctx.fail(from_store_error(bucket.error()));
  if (!*bucket) return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  return std::nullopt;
}

}  // namespace

void add_object_headers(response& out, const object_meta& meta, std::int64_t mtime_ns) {
  out.headers.emplace_back("ETag", quoted(meta.etag));
  out.headers.emplace_back("Last-Modified", http_date(seconds(mtime_ns)));
  bool typed = false;
  for (const auto& [name, value] : meta.headers) {
    typed = typed || name == "content-type";
    out.headers.emplace_back(name, value);
  }
  if (!typed) out.headers.emplace_back("Content-Type", std::string{default_content_type});
}

started put_object(const context& ctx) {
  const auto& limits = ctx.g.options.limits;
  if (ctx.r.content_length && *ctx.r.content_length > limits.object_bytes_max) {
    auto r = ctx.fail(s3_code::entity_too_large, "Your proposed upload exceeds the maximum allowed size of " +
                                                     std::to_string(limits.object_bytes_max) + " bytes.");
    r.close = true;
    return r;
  }
  if (auto md5 = ctx.r.header("content-md5")) {
    auto bytes = base64_decode(*md5);
    if (!bytes || bytes->size() != 16) return ctx.fail(s3_code::invalid_digest, "The Content-MD5 you specified is not valid.");
  }
  auto meta = meta_from_request(ctx);
  if (auto* e = std::get_if<s3_error>(&meta)) return ctx.fail(*e);
  if (auto missing = missing_bucket(ctx)) return std::move(*missing);
  auto writer = ctx.g.store.create(ctx.r.bucket, ctx.r.key);
  if (!writer) return ctx.store_failure(writer.error());
  return make_object_sink(ctx, std::move(*writer), std::get<object_meta>(std::move(meta)), limits.object_bytes_max,
                          [](const object_meta& m) {
                            response out;
                            out.headers.emplace_back("ETag", quoted(m.etag));
                            return out;
                          });
}

response get_object(const context& ctx, bool head) {
  auto opened = ctx.g.reads.open(ctx.r.bucket, ctx.r.key);
  if (!opened) return ctx.store_failure(opened.error());
  const auto& meta = opened->meta;
  auto size = opened->identity.size;
  auto modified_s = seconds(opened->identity.mtime_ns);
  response out;
  switch (check_preconditions(ctx.r.headers, meta.etag, modified_s, true)) {
    case precondition::failed:
      return ctx.fail(s3_code::precondition_failed, "At least one of the preconditions you specified did not hold.");
    case precondition::not_modified:
      out.status = 304;
      out.head = true;
      out.headers.emplace_back("ETag", quoted(meta.etag));
      out.headers.emplace_back("Last-Modified", http_date(modified_s));
      return out;
    case precondition::proceed: break;
  }
  auto range = if_range_holds(ctx.r.headers, meta.etag, modified_s) ? parse_range(ctx.r.header("range"), size)
                                                                     : range_request{};
  if (range.kind == range_kind::unsatisfiable) {
    auto r = ctx.fail(s3_code::invalid_range, "The requested range is not satisfiable.");
    r.headers.emplace_back("Content-Range", "bytes */" + std::to_string(size));
    return r;
  }
  add_object_headers(out, meta, opened->identity.mtime_ns);
  out.headers.emplace_back("Accept-Ranges", "bytes");
  byte_range span{.first = 0, .length = size};
  if (range.kind == range_kind::satisfiable) {
    span = range.range;
    out.status = 206;
    out.headers.emplace_back("Content-Range", "bytes " + std::to_string(span.first) + "-" +
                                                  std::to_string(span.first + span.length - 1) + "/" +
                                                  std::to_string(size));
  }
  apply_overrides(ctx.r, out);
  out.content_length = span.length;
  out.head = head;
  if (!head) out.source = make_range_source(std::move(opened->reader), span.first, span.length);
  return out;
}

response delete_object(const context& ctx) {
  auto removed = ctx.g.store.remove(ctx.r.bucket, ctx.r.key);
  if (!removed) return ctx.store_failure(removed.error());
  return response{.status = 204};
}

response object_tagging(const context& ctx) {
  auto found = ctx.g.store.stat(ctx.r.bucket, ctx.r.key);
  if (!found) return ctx.store_failure(found.error());
  if (!*found) return ctx.store_failure(error{errc::not_found, "no such object"});
  xml_writer x{"Tagging"};
  x.open("TagSet");
  x.close("TagSet");
  return ctx.xml(200, x.finish());
}

}  // namespace sluice::s3
