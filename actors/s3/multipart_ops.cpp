// Multipart uploads: create, upload part, list parts, list uploads,
// complete, abort. Parts are staged in the store under
// .sluice-uploads/<id>/<part>; completion assembles them into a new
// object through an ordinary writer (temp file + rename).

#include <charconv>

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/xml.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

response no_such_upload(const context& ctx) {
  return ctx.fail(s3_code::no_such_upload,
                  "The specified upload does not exist. The upload ID may be invalid, or the upload may have been "
                  "aborted or completed.");
}

/// The upload the request names, when it is for this bucket and key.
std::optional<upload_record> named_upload(const context& ctx) {
  auto u = ctx.g.uploads.find(ctx.r.param("uploadId").value_or(""));
  if (!u || u->bucket != ctx.r.bucket || u->key != ctx.r.key) return std::nullopt;
  return u;
}

std::optional<std::uint32_t> parse_u32(std::string_view text) {
  std::uint32_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string{s};
}

std::string unquoted(std::string_view etag) {
  auto t = trimmed(etag);
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') return t.substr(1, t.size() - 2);
  return t;
}

struct wanted_part {
  std::uint32_t number{};
  std::string etag{};
};

std::variant<std::vector<wanted_part>, s3_error> parse_complete(const std::string& body, std::uint32_t number_max) {
  s3_error malformed{s3_code::malformed_xml, "The XML you provided was not well-formed or did not validate."};
  auto root = parse_xml(body);
  if (!root || root->name != "CompleteMultipartUpload") return malformed;
  std::vector<wanted_part> parts;
  for (const auto& child : root->children) {
    if (child.name != "Part") continue;
    auto number = child.find("PartNumber");
    auto etag = child.find("ETag");
    auto n = number ? parse_u32(trimmed(number->text)) : std::nullopt;
    if (!n || !etag || *n < 1 || *n > number_max) return malformed;
    if (!parts.empty() && *n <= parts.back().number) {
      return s3_error{s3_code::invalid_part_order, "The list of parts was not in ascending order."};
    }
    parts.push_back(wanted_part{.number = *n, .etag = unquoted(etag->text)});
  }
  if (parts.empty()) return malformed;
  return parts;
}

/// Removes every staged part of `upload_id`.
void drop_staged(const context& ctx, const std::string& bucket, const std::string& upload_id) {
  auto prefix = staged_prefix(upload_id);
  for (int round = 0; round < 100; ++round) {  // 10,000 parts at most, 1000 a round
    auto parts = ctx.g.store.list(bucket, prefix, "", 1000);
    if (!parts || parts->empty()) return;
    for (const auto& p : *parts) (void)ctx.g.store.remove(bucket, p.key);
  }
}

std::optional<std::array<std::uint8_t, 16>> from_hex(std::string_view hex) {
  std::array<std::uint8_t, 16> out{};
  if (hex.size() != 32) return std::nullopt;
  for (std::size_t i = 0; i < 16; ++i) {
    auto [end, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, out[i], 16);
    if (ec != std::errc{} || end != hex.data() + 2 * i + 2) return std::nullopt;
  }
  return out;
}

/// Checks every part and writes them, in order, into one new object.
std::variant<object_meta, s3_error> assemble(const context& ctx, const upload_record& u,
                                             const std::vector<wanted_part>& parts) {
  auto writer = ctx.g.store.create(u.bucket, u.key);
  if (!writer) return from_store_error(writer.error());
  md5_hasher of_parts;
  std::vector<std::byte> buffer(ctx.g.options.limits.copy_chunk_bytes);
  s3_error invalid{s3_code::invalid_part,
                   "One or more of the specified parts could not be found, or its ETag did not match."};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    auto part = ctx.g.reads.open(u.bucket, staged_part_key(u.id, parts[i].number));
    if (!part || part->meta.etag != parts[i].etag) return invalid;
    bool last = i + 1 == parts.size();
    if (!last && part->identity.size < ctx.g.options.limits.part_bytes_min) {
      return s3_error{s3_code::entity_too_small, "Your proposed upload is smaller than the minimum allowed size."};
    }
    auto digest = from_hex(part->meta.etag);
    if (!digest) return invalid;
    of_parts.update(std::span<const std::byte>{reinterpret_cast<const std::byte*>(digest->data()), digest->size()});
    for (std::uint64_t offset = 0;;) {
      auto n = part->reader->read(offset, buffer);
      if (!n) return from_store_error(n.error());
      if (*n == 0) break;
      if (auto w = (*writer)->write(std::span<const std::byte>{buffer.data(), *n}); !w) return from_store_error(w.error());
      offset += *n;
    }
  }
  object_meta meta = u.meta;
  auto digest = of_parts.finish();
  meta.etag = to_hex(digest) + "-" + std::to_string(parts.size());
  if (auto committed = (*writer)->commit(meta); !committed) return from_store_error(committed.error());
  return meta;
}

/// x-amz-copy-source-range: exactly "bytes=first-last" inside an object
/// of `size` bytes (S3 takes no other form here).
std::variant<byte_range, s3_error> parse_copy_range(std::optional<std::string_view> header, std::uint64_t size) {
  if (!header) return byte_range{.first = 0, .length = size};
  std::string_view text = *header;
  s3_error malformed{s3_code::invalid_argument,
                     "The x-amz-copy-source-range value must be of the form bytes=first-last, where first and last "
                     "are the zero-based offsets of the first and last bytes to copy."};
  if (!text.starts_with("bytes=")) return malformed;
  text.remove_prefix(6);
  auto dash = text.find('-');
  if (dash == std::string_view::npos) return malformed;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  auto a = std::from_chars(text.data(), text.data() + dash, first);
  auto b = std::from_chars(text.data() + dash + 1, text.data() + text.size(), last);
  if (dash == 0 || a.ec != std::errc{} || a.ptr != text.data() + dash || dash + 1 == text.size() ||
      b.ec != std::errc{} || b.ptr != text.data() + text.size() || first > last) {
    return malformed;
  }
  if (last >= size) {
    return s3_error{s3_code::invalid_argument,
                    "Range specified is not valid for source object of size: " + std::to_string(size)};
  }
  return byte_range{.first = first, .length = last - first + 1};
}

std::optional<std::uint32_t> part_number_of(const context& ctx) {
  auto number = parse_u32(ctx.r.param("partNumber").value_or(""));
  if (!number || *number < 1 || *number > ctx.g.options.limits.part_number_max) return std::nullopt;
  return number;
}

response bad_part_number(const context& ctx) {
  return ctx.fail(s3_code::invalid_argument, "Part number must be an integer between 1 and " +
                                                 std::to_string(ctx.g.options.limits.part_number_max) + ", inclusive.");
}

}  // namespace

response create_upload(const context& ctx) {
  auto meta = meta_from_request(ctx);
  if (auto* e = std::get_if<s3_error>(&meta)) return ctx.fail(*e);
  auto bucket = ctx.g.store.find_bucket(ctx.r.bucket);
  if (!bucket || !*bucket) return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  auto id = ctx.g.uploads.create(upload_record{.bucket = ctx.r.bucket,
                                               .key = ctx.r.key,
                                               .meta = std::get<object_meta>(std::move(meta)),
                                               .initiated_ns = ctx.g.options.now_ns()});
  if (!id) {
    return ctx.fail(s3_code::slow_down, "Too many multipart uploads in progress (at most " +
                                            std::to_string(ctx.g.options.limits.uploads_max) +
                                            "); complete or abort some.");
  }
  xml_writer x{"InitiateMultipartUploadResult"};
  x.leaf("Bucket", ctx.r.bucket);
  x.leaf("Key", ctx.r.key);
  x.leaf("UploadId", *id);
  return ctx.xml(200, x.finish());
}

started upload_part(const context& ctx) {
  const auto& limits = ctx.g.options.limits;
  auto number = part_number_of(ctx);
  if (!number) return bad_part_number(ctx);
  auto u = named_upload(ctx);
  if (!u) return no_such_upload(ctx);
  if (ctx.r.content_length && *ctx.r.content_length > limits.part_bytes_max) {
    auto r = ctx.fail(s3_code::entity_too_large, "Your proposed part exceeds the maximum allowed size.");
    r.close = true;
    return r;
  }
  auto writer = ctx.g.store.create(u->bucket, staged_part_key(u->id, *number));
  if (!writer) return ctx.store_failure(writer.error());
  return make_object_sink(ctx, std::move(*writer), object_meta{}, limits.part_bytes_max, [](const object_meta& m) {
    response out;
    out.headers.emplace_back("ETag", quoted(m.etag));
    return out;
  });
}

response upload_part_copy(const context& ctx) {
  auto number = part_number_of(ctx);
  if (!number) return bad_part_number(ctx);
  auto u = named_upload(ctx);
  if (!u) return no_such_upload(ctx);
  auto source = open_copy_source(ctx);
  if (auto* r = std::get_if<response>(&source)) return std::move(*r);
  auto& opened = std::get<copy_source_opened>(source).object;
  auto range = parse_copy_range(ctx.r.header("x-amz-copy-source-range"), opened.identity.size);
  if (auto* e = std::get_if<s3_error>(&range)) return ctx.fail(*e);
  auto span = std::get<byte_range>(range);
  if (span.length > ctx.g.options.limits.part_bytes_max) {
    return ctx.fail(s3_code::invalid_request, "The specified copy source is larger than the maximum allowable size "
                                              "for a copy source: " +
                                                  std::to_string(ctx.g.options.limits.part_bytes_max));
  }
  auto writer = ctx.g.store.create(u->bucket, staged_part_key(u->id, *number));
  if (!writer) return ctx.store_failure(writer.error());
  auto etag = copy_range(ctx, *opened.reader, **writer, span);
  if (!etag) return ctx.store_failure(etag.error());
  auto committed = (*writer)->commit(object_meta{.etag = *etag});
  if (!committed) return ctx.store_failure(committed.error());
  xml_writer x{"CopyPartResult"};
  x.leaf("LastModified", iso8601(committed->mtime_ns));
  x.leaf("ETag", quoted(*etag));
  return ctx.xml(200, x.finish());
}

response list_parts(const context& ctx) {
  auto u = named_upload(ctx);
  if (!u) return no_such_upload(ctx);
  auto marker = parse_u32(ctx.r.param("part-number-marker").value_or("0")).value_or(0);
  auto max = std::min<std::uint32_t>(parse_u32(ctx.r.param("max-parts").value_or("1000")).value_or(1000), 1000);
  auto prefix = staged_prefix(u->id);
  auto after = marker == 0 ? std::string{} : staged_part_key(u->id, marker);
  auto parts = ctx.g.store.list(u->bucket, prefix, after, max + 1);
  if (!parts) return ctx.store_failure(parts.error());
  bool truncated = parts->size() > max;
  if (truncated) parts->resize(max);
  xml_writer x{"ListPartsResult"};
  x.leaf("Bucket", u->bucket);
  x.leaf("Key", u->key);
  x.leaf("UploadId", u->id);
  x.leaf("PartNumberMarker", std::to_string(marker));
  std::uint32_t last = marker;
  for (const auto& p : *parts) last = parse_u32(std::string_view{p.key}.substr(prefix.size())).value_or(0);
  x.leaf("NextPartNumberMarker", std::to_string(last));
  x.leaf("MaxParts", std::to_string(max));
  x.leaf("IsTruncated", truncated ? "true" : "false");
  for (const auto& p : *parts) {
    auto opened = ctx.g.reads.open(u->bucket, p.key);
    if (!opened) continue;  // aborted meanwhile
    x.open("Part");
    x.leaf("PartNumber", std::to_string(parse_u32(std::string_view{p.key}.substr(prefix.size())).value_or(0)));
    x.leaf("LastModified", iso8601(opened->identity.mtime_ns));
    x.leaf("ETag", quoted(opened->meta.etag));
    x.leaf("Size", std::to_string(opened->identity.size));
    x.close("Part");
  }
  return ctx.xml(200, x.finish());
}

response list_uploads(const context& ctx) {
  auto bucket = ctx.g.store.find_bucket(ctx.r.bucket);
  if (!bucket || !*bucket) return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  auto prefix = ctx.r.param("prefix").value_or("");
  auto key_marker = ctx.r.param("key-marker").value_or("");
  auto max = std::min<std::uint32_t>(parse_u32(ctx.r.param("max-uploads").value_or("1000")).value_or(1000), 1000);
  bool url = ctx.r.param("encoding-type") == "url";
  auto enc = [url](const std::string& s) { return url ? percent_encode(s, true) : s; };
  auto all = ctx.g.uploads.list(ctx.r.bucket, prefix);
  std::erase_if(all, [&](const upload_record& u) { return !key_marker.empty() && u.key <= key_marker; });
  bool truncated = all.size() > max;
  if (truncated) all.resize(max);
  xml_writer x{"ListMultipartUploadsResult"};
  x.leaf("Bucket", ctx.r.bucket);
  x.leaf("KeyMarker", enc(key_marker));
  x.leaf("UploadIdMarker", "");
  x.leaf("NextKeyMarker", enc(all.empty() ? "" : all.back().key));
  x.leaf("NextUploadIdMarker", all.empty() ? "" : all.back().id);
  x.leaf("Prefix", enc(prefix));
  if (url) x.leaf("EncodingType", "url");
  x.leaf("MaxUploads", std::to_string(max));
  x.leaf("IsTruncated", truncated ? "true" : "false");
  for (const auto& u : all) {
    x.open("Upload");
    x.leaf("Key", enc(u.key));
    x.leaf("UploadId", u.id);
    x.leaf("StorageClass", "STANDARD");
    x.leaf("Initiated", iso8601(u.initiated_ns));
    x.close("Upload");
  }
  return ctx.xml(200, x.finish());
}

response abort_upload(const context& ctx) {
  auto u = named_upload(ctx);
  if (!u) return no_such_upload(ctx);
  auto taken = ctx.g.uploads.take(u->id);
  if (!taken) return no_such_upload(ctx);
  drop_staged(ctx, taken->bucket, taken->id);
  return response{.status = 204};
}

started complete_upload(const context& ctx) {
  if (!named_upload(ctx)) return no_such_upload(ctx);
  return make_xml_sink(ctx, [ctx](std::string body) {
    auto parts = parse_complete(body, ctx.g.options.limits.part_number_max);
    if (auto* e = std::get_if<s3_error>(&parts)) return ctx.fail(*e);
    // Taken out of the table while assembling: a second Complete or an
    // Abort of the same upload meanwhile finds no such upload.
    auto u = ctx.g.uploads.take(ctx.r.param("uploadId").value_or(""));
    if (!u) return no_such_upload(ctx);
    auto done = assemble(ctx, *u, std::get<std::vector<wanted_part>>(parts));
    if (auto* e = std::get_if<s3_error>(&done)) {
      ctx.g.uploads.restore(std::move(*u));
      return ctx.fail(*e);
    }
    drop_staged(ctx, u->bucket, u->id);
    xml_writer x{"CompleteMultipartUploadResult"};
    x.leaf("Location", "/" + u->bucket + "/" + u->key);
    x.leaf("Bucket", u->bucket);
    x.leaf("Key", u->key);
    x.leaf("ETag", quoted(std::get<object_meta>(done).etag));
    return ctx.xml(200, x.finish());
  });
}

}  // namespace sluice::s3
