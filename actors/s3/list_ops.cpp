// ListObjectsV2 and ListObjects (v1): prefix, delimiter with
// CommonPrefixes, max-keys, continuation-token / start-after / marker,
// encoding-type=url.

#include <charconv>

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/names.hpp"
#include "runtime/assert.hpp"
#include "actors/s3/xml.hpp"
#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

/// No valid UTF-8 key holds byte 0xFF, so `p + "\xff"` sorts after every
/// key that starts with `p`: resuming after it skips a whole common prefix.
std::string past_prefix(const std::string& p) { return p + '\xff'; }

struct list_params {
  std::string prefix{};
  std::string delimiter{};
  std::size_t max_keys{1000};
  std::string start_after{};  ///< where the store walk resumes
  bool url{};
};

struct listed {
  std::vector<listed_object> contents{};
  std::vector<std::string> prefixes{};
  bool truncated{};
  std::string resume{};  ///< start_after for the next page, when truncated
  std::string last{};    ///< the last key or prefix returned (v1's NextMarker)
};

/// The common prefix `key` rolls up into, or "".
std::string common_prefix(const list_params& p, const std::string& key) {
  if (p.delimiter.empty()) return {};
  auto at = key.find(p.delimiter, p.prefix.size());
  if (at == std::string::npos) return {};
  return key.substr(0, at + p.delimiter.size());
}

result<listed> collect(const context& ctx, const list_params& p) {
  listed out;
  std::string start = p.start_after;
  std::size_t count = 0;
  for (;;) {
    std::size_t want = p.max_keys - count + 1;
    auto batch = ctx.g.store.list(ctx.r.bucket, p.prefix, start, want);
    if (!batch) return std::move(batch).error();
    bool jumped = false;
    for (auto& obj : *batch) {
      // A file no GET could name (a name that is not UTF-8, say) is not listed either.
      if (check_key(obj.key, ctx.g.options.limits.key_bytes_max)) {
        start = obj.key;
        continue;
      }
      if (count == p.max_keys) {
        out.truncated = true;
        out.resume = start;
        return out;
      }
      auto cp = common_prefix(p, obj.key);
      ++count;
      if (!cp.empty()) {
        out.prefixes.push_back(cp);
        out.last = cp;
        start = past_prefix(cp);
        jumped = true;  // the rest of this batch may sit under cp: ask again
        break;
      }
      out.last = obj.key;
      start = obj.key;
      out.contents.push_back(std::move(obj));
    }
    SLUICE_ASSERT(out.contents.size() + out.prefixes.size() <= p.max_keys);
    if (!jumped && batch->size() < want) return out;
  }
}

std::optional<std::size_t> parse_max_keys(const std::optional<std::string>& text, std::size_t ceiling) {
  if (!text) return ceiling;
  std::size_t v = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc{} || end != text->data() + text->size()) return std::nullopt;
  return std::min(v, ceiling);
}

std::string encoded(const list_params& p, const std::string& text) { return p.url ? percent_encode(text, true) : text; }

void write_contents(const context& ctx, const list_params& p, xml_writer& x, const listed_object& obj) {
  auto identity = obj.stat.identity;
  std::string etag;
  if (obj.stat.meta) {
    etag = obj.stat.meta->etag;
  } else if (auto opened = ctx.g.reads.open(ctx.r.bucket, obj.key)) {
    // Changed behind the gateway's back: the same ETag a GET would give.
    etag = opened->meta.etag;
    identity = opened->identity;
  }
  x.open("Contents");
  x.leaf("Key", encoded(p, obj.key));
  x.leaf("LastModified", iso8601(identity.mtime_ns));
  x.leaf("ETag", quoted(etag));
  x.leaf("Size", std::to_string(identity.size));
  x.leaf("StorageClass", "STANDARD");
  x.close("Contents");
}

std::variant<list_params, s3_error> params_of(const context& ctx, bool v2) {
  list_params p{.prefix = ctx.r.param("prefix").value_or(""), .delimiter = ctx.r.param("delimiter").value_or("")};
  auto max = parse_max_keys(ctx.r.param("max-keys"), ctx.g.options.limits.keys_per_list_max);
  if (!max) return s3_error{s3_code::invalid_argument, "max-keys must be a non-negative integer."};
  p.max_keys = *max;
  auto encoding = ctx.r.param("encoding-type");
  if (encoding && *encoding != "url") return s3_error{s3_code::invalid_argument, "Invalid Encoding Method specified in Request"};
  p.url = encoding.has_value();
  if (!v2) {
    p.start_after = ctx.r.param("marker").value_or("");
    // A marker that is itself a common prefix resumes past everything under it.
    if (!p.delimiter.empty() && p.start_after.ends_with(p.delimiter) && p.start_after.starts_with(p.prefix)) {
      p.start_after = past_prefix(p.start_after);
    }
    return p;
  }
  p.start_after = ctx.r.param("start-after").value_or("");
  if (auto token = ctx.r.param("continuation-token")) {
    auto decoded = base64_decode(*token);
    if (!decoded || token->empty()) {
      return s3_error{s3_code::invalid_argument, "The continuation token provided is incorrect."};
    }
    p.start_after = std::max(p.start_after, *decoded);
  }
  return p;
}

void write_header(const context& ctx, const list_params& p, xml_writer& x, const listed& l, bool v2) {
  x.leaf("Name", ctx.r.bucket);
  x.leaf("Prefix", encoded(p, p.prefix));
  if (!p.delimiter.empty()) x.leaf("Delimiter", encoded(p, p.delimiter));
  x.leaf("MaxKeys", std::to_string(p.max_keys));
  if (p.url) x.leaf("EncodingType", "url");
  x.leaf("IsTruncated", l.truncated ? "true" : "false");
  if (v2) {
    x.leaf("KeyCount", std::to_string(l.contents.size() + l.prefixes.size()));
    if (auto token = ctx.r.param("continuation-token")) x.leaf("ContinuationToken", *token);
    if (auto after = ctx.r.param("start-after")) x.leaf("StartAfter", encoded(p, *after));
    if (l.truncated) x.leaf("NextContinuationToken", base64_encode(l.resume));
  } else {
    x.leaf("Marker", encoded(p, ctx.r.param("marker").value_or("")));
    if (l.truncated && !p.delimiter.empty()) x.leaf("NextMarker", encoded(p, l.last));
  }
}

}  // namespace

response list_objects(const context& ctx, bool v2) {
  auto params = params_of(ctx, v2);
  if (auto* e = std::get_if<s3_error>(&params)) return ctx.fail(*e);
  const auto& p = std::get<list_params>(params);
  auto l = p.max_keys == 0 ? result<listed>{listed{}} : collect(ctx, p);
  if (!l) return ctx.store_failure(l.error());
  xml_writer x{"ListBucketResult"};
  write_header(ctx, p, x, *l, v2);
  for (const auto& obj : l->contents) write_contents(ctx, p, x, obj);
  for (const auto& cp : l->prefixes) {
    x.open("CommonPrefixes");
    x.leaf("Prefix", encoded(p, cp));
    x.close("CommonPrefixes");
  }
  return ctx.xml(200, x.finish());
}

}  // namespace sluice::s3
