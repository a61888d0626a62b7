// ListBuckets, HeadBucket, CreateBucket, DeleteBucket, GetBucketLocation,
// DeleteObjects.

#include <algorithm>

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway_state.hpp"
#include "actors/s3/names.hpp"
#include "actors/s3/xml.hpp"

namespace sluice::s3 {
namespace {

std::optional<response> require_bucket(const context& ctx) {
  auto bucket = ctx.g.store.find_bucket(ctx.r.bucket);
  if (!bucket) return ctx.fail(from_store_error(bucket.error()));
  if (!*bucket) return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
  return std::nullopt;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string{s};
}

struct delete_request {
  bool quiet{};
  std::vector<std::string> keys{};
};

std::variant<delete_request, s3_error> parse_delete(const context& ctx, const std::string& body) {
  s3_error malformed{s3_code::malformed_xml, "The XML you provided was not well-formed or did not validate."};
  auto root = parse_xml(body);
  if (!root || root->name != "Delete") return malformed;
  delete_request out;
  for (const auto& child : root->children) {
    if (child.name == "Quiet") {
      out.quiet = trimmed(child.text) == "true";
    } else if (child.name == "Object") {
      auto key = child.find("Key");
      if (!key) return malformed;
      out.keys.push_back(key->text);
    }
  }
  if (out.keys.empty() || out.keys.size() > ctx.g.options.limits.keys_per_delete_max) return malformed;
  return out;
}

response delete_listed(const context& ctx, const delete_request& d) {
  xml_writer x{"DeleteResult"};
  for (const auto& key : d.keys) {
    std::optional<s3_error> failed = check_key(key, ctx.g.options.limits.key_bytes_max);
    if (!failed) {
      auto removed = ctx.g.store.remove(ctx.r.bucket, key);
      if (!removed) failed = from_store_error(removed.error());
    }
    if (failed) {
      x.open("Error");
      x.leaf("Key", key);
      x.leaf("Code", code_name(failed->code));
      x.leaf("Message", failed->message);
      x.close("Error");
    } else if (!d.quiet) {
      x.open("Deleted");
      x.leaf("Key", key);
      x.close("Deleted");
    }
  }
  return ctx.xml(200, x.finish());
}

}  // namespace

response list_buckets(const context& ctx) {
  auto all = ctx.g.store.buckets();
  if (!all) return ctx.fail(from_store_error(all.error()));
  xml_writer x{"ListAllMyBucketsResult"};
  x.open("Owner");
  x.leaf("ID", "sluice");
  x.leaf("DisplayName", "sluice");
  x.close("Owner");
  x.open("Buckets");
  for (const auto& b : *all) {
    if (!valid_bucket_name(b.name)) continue;  // a directory S3 could not name
    if (ctx.user && ctx.user->access_to(b.name) == bucket_access::none) continue;  // not theirs to see
    x.open("Bucket");
    x.leaf("Name", b.name);
    x.leaf("CreationDate", iso8601(b.created_ns));
    x.close("Bucket");
  }
  x.close("Buckets");
  return ctx.xml(200, x.finish());
}

response head_bucket(const context& ctx) {
  if (auto missing = require_bucket(ctx)) return std::move(*missing);
  response out;
  out.headers.emplace_back("x-amz-bucket-region", ctx.g.options.region);
  return out;
}

response bucket_location(const context& ctx) {
  if (auto missing = require_bucket(ctx)) return std::move(*missing);
  // us-east-1 is written as an empty constraint, as S3 does.
  std::string region = ctx.g.options.region == "us-east-1" ? "" : ctx.g.options.region;
  return ctx.xml(200, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<LocationConstraint "
                      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">" +
                          xml_escape(region) + "</LocationConstraint>");
}

response bucket_versioning(const context& ctx) {
  if (auto missing = require_bucket(ctx)) return std::move(*missing);
  xml_writer x{"VersioningConfiguration"};
  return ctx.xml(200, x.finish());
}

started create_bucket(const context& ctx) {
  return make_xml_sink(ctx, [ctx](std::string body) {
    if (!trimmed(body).empty()) {
      auto root = parse_xml(body);
      if (!root || root->name != "CreateBucketConfiguration") {
        return ctx.fail(s3_code::malformed_xml, "The XML you provided was not well-formed or did not validate.");
      }
    }
    auto made = ctx.g.store.create_bucket(ctx.r.bucket);
    if (!made) {
      if (made.code() == errc::conflict) {
        return ctx.fail(s3_code::bucket_already_owned_by_you, "Your previous request to create the named bucket succeeded and you already own it.");
      }
      if (made.code() == errc::permission_denied) {
        return ctx.fail(s3_code::access_denied, "This gateway creates buckets only under --root, and has none.");
      }
      return ctx.fail(from_store_error(made.error()));
    }
    response out;
    out.headers.emplace_back("Location", "/" + ctx.r.bucket);
    return out;
  });
}

response delete_bucket(const context& ctx) {
  auto removed = ctx.g.store.remove_bucket(ctx.r.bucket);
  if (removed) return response{.status = 204};
  switch (removed.code()) {
    case errc::not_found: return ctx.fail(s3_code::no_such_bucket, "The specified bucket does not exist.");
    case errc::conflict: return ctx.fail(s3_code::bucket_not_empty, "The bucket you tried to delete is not empty.");
    case errc::permission_denied:
      return ctx.fail(s3_code::access_denied, "A bucket exported with --bucket is never deleted by the gateway.");
    default: return ctx.fail(from_store_error(removed.error()));
  }
}

started delete_objects(const context& ctx) {
  if (auto missing = require_bucket(ctx)) return std::move(*missing);
  return make_xml_sink(ctx, [ctx](std::string body) {
    auto parsed = parse_delete(ctx, body);
    if (auto* e = std::get_if<s3_error>(&parsed)) return ctx.fail(*e);
    return delete_listed(ctx, std::get<delete_request>(parsed));
  });
}

}  // namespace sluice::s3
