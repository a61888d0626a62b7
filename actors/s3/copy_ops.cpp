// CopyObject: x-amz-copy-source, the COPY / REPLACE metadata directive
// and the x-amz-copy-source-if-* conditions. The source side is shared
// with UploadPartCopy (multipart_ops.cpp).

#include <algorithm>
#include <vector>

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/names.hpp"
#include "actors/s3/xml.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

struct copy_source {
  std::string bucket{};
  std::string key{};
};

std::variant<copy_source, s3_error> parse_copy_source(const context& ctx, std::string_view header) {
  auto question = header.find('?');
  auto version = question == std::string_view::npos ? std::string_view{} : header.substr(question + 1);
  if (!version.empty() && version != "versionId=null") {
    return s3_error{s3_code::not_implemented, "Copying a version other than the current one is not supported."};
  }
  auto decoded = percent_decode(header.substr(0, question), false);
  if (!decoded) return s3_error{s3_code::invalid_argument, "x-amz-copy-source is not a valid %-encoded path."};
  std::string_view path = *decoded;
  if (path.starts_with('/')) path.remove_prefix(1);
  auto slash = path.find('/');
  if (slash == std::string_view::npos) {
    return s3_error{s3_code::invalid_argument, "x-amz-copy-source must name a bucket and a key: BUCKET/KEY."};
  }
  copy_source out{.bucket = std::string{path.substr(0, slash)}, .key = std::string{path.substr(slash + 1)}};
  if (!valid_bucket_name(out.bucket)) return s3_error{s3_code::no_such_bucket, "The source bucket does not exist."};
  if (auto bad = check_key(out.key, ctx.g.options.limits.key_bytes_max)) return *bad;
  return out;
}

/// The copy-source conditions, as the ordinary ones they mirror.
header_list source_conditions(const parsed_request& r) {
  header_list out;
  for (auto name : {"if-match", "if-none-match", "if-modified-since", "if-unmodified-since"}) {
    if (auto v = r.header(std::string{"x-amz-copy-source-"} + name)) out.emplace_back(name, std::string{*v});
  }
  return out;
}

}  // namespace

std::variant<copy_source_opened, response> open_copy_source(const context& ctx) {
  auto parsed = parse_copy_source(ctx, *ctx.r.header("x-amz-copy-source"));
  if (auto* e = std::get_if<s3_error>(&parsed)) return ctx.fail(*e);
  auto source = std::get<copy_source>(std::move(parsed));
  auto opened = ctx.g.reads.open(source.bucket, source.key);
  if (!opened) {
    if (opened.code() != errc::not_found) return ctx.fail(from_store_error(opened.error()));
    auto b = ctx.g.store.find_bucket(source.bucket);
    if (b && !*b) return ctx.fail(s3_code::no_such_bucket, "The source bucket does not exist.");
    return ctx.fail(s3_code::no_such_key, "The specified source key does not exist.");
  }
  auto modified_s = opened->identity.mtime_ns / 1'000'000'000;
  if (check_preconditions(source_conditions(ctx.r), opened->meta.etag, modified_s, false) != precondition::proceed) {
    return ctx.fail(s3_code::precondition_failed, "At least one of the copy-source preconditions did not hold.");
  }
  return copy_source_opened{.bucket = std::move(source.bucket), .key = std::move(source.key), .object = std::move(*opened)};
}

result<std::string> copy_range(const context& ctx, object_reader& from, object_writer& to, byte_range range) {
  md5_hasher hasher;
  std::vector<std::byte> buffer(ctx.g.options.limits.copy_chunk_bytes);
  for (std::uint64_t done = 0; done < range.length;) {
    auto want = std::min<std::uint64_t>(buffer.size(), range.length - done);
    auto n = from.read(range.first + done, std::span<std::byte>{buffer.data(), want});
    if (!n) return std::move(n).error();
    // The reader holds one version open; a file truncated in place behind
    // the gateway's back is the only way to come up short.
    if (*n == 0) return fail(errc::conflict, "The source object became shorter while it was copied.");
    std::span<const std::byte> chunk{buffer.data(), *n};
    hasher.update(chunk);
    if (auto w = to.write(chunk); !w) return w.error();
    done += *n;
  }
  auto digest = hasher.finish();
  return to_hex(digest);
}

response copy_object(const context& ctx) {
  auto directive = ctx.r.header("x-amz-metadata-directive").value_or("COPY");
  if (directive != "COPY" && directive != "REPLACE") {
    return ctx.fail(s3_code::invalid_argument, "x-amz-metadata-directive must be COPY or REPLACE.");
  }
  auto source = open_copy_source(ctx);
  if (auto* r = std::get_if<response>(&source)) return std::move(*r);
  auto& opened = std::get<copy_source_opened>(source);
  if (directive == "COPY" && opened.bucket == ctx.r.bucket && opened.key == ctx.r.key) {
    return ctx.fail(s3_code::invalid_request,
                    "This copy request is illegal because it is trying to copy an object to itself without changing "
                    "the object's metadata.");
  }
  object_meta meta{.headers = opened.object.meta.headers};
  if (directive == "REPLACE") {
    auto replaced = meta_from_request(ctx);
    if (auto* e = std::get_if<s3_error>(&replaced)) return ctx.fail(*e);
    meta = std::get<object_meta>(std::move(replaced));
  }
  auto writer = ctx.g.store.create(ctx.r.bucket, ctx.r.key);
  if (!writer) return ctx.store_failure(writer.error());
  auto etag = copy_range(ctx, *opened.object.reader, **writer, {.first = 0, .length = opened.object.identity.size});
  if (!etag) return ctx.store_failure(etag.error());
  meta.etag = std::move(*etag);
  auto committed = (*writer)->commit(meta);
  if (!committed) return ctx.store_failure(committed.error());
  xml_writer x{"CopyObjectResult"};
  x.leaf("LastModified", iso8601(committed->mtime_ns));
  x.leaf("ETag", quoted(meta.etag));
  return ctx.xml(200, x.finish());
}

}  // namespace sluice::s3
