#include "actors/s3/users.hpp"

namespace sluice::s3 {

std::string_view to_string(bucket_access a) {
  switch (a) {
    case bucket_access::none: return "none";
    case bucket_access::read: return "read";
    case bucket_access::write: return "write";
  }
  return "none";
}

std::optional<bucket_access> parse_bucket_access(std::string_view text) {
  if (text == "none") return bucket_access::none;
  if (text == "read") return bucket_access::read;
  if (text == "write") return bucket_access::write;
  return std::nullopt;
}

bucket_access s3_user::access_to(std::string_view bucket) const {
  std::optional<bucket_access> any;
  for (const auto& [name, access] : grants) {
    if (name == bucket) return access;
    if (name == any_bucket) any = access;
  }
  return any.value_or(bucket_access::none);
}

namespace {

s3_error denied(const s3_user& user, std::string_view bucket, bucket_access needed) {
  return s3_error{s3_code::access_denied, "Access Denied: user '" + user.name + "' may not " +
                                              (needed == bucket_access::write ? "write" : "read") + " bucket '" +
                                              std::string{bucket} + "'."};
}

/// The bucket of an x-amz-copy-source value ("/bucket/key" or
/// "bucket/key", maybe with ?versionId): bucket names need no decoding.
std::string_view source_bucket(std::string_view source) {
  if (source.starts_with('/')) source.remove_prefix(1);
  return source.substr(0, source.find('/'));
}

}  // namespace

std::optional<s3_error> check_grants(const parsed_request& r, const s3_user& user) {
  if (r.bucket.empty()) return std::nullopt;  // ListBuckets: filtered by what the user may read
  bool reads = r.method == "GET" || r.method == "HEAD";
  auto needed = reads ? bucket_access::read : bucket_access::write;
  if (static_cast<int>(user.access_to(r.bucket)) < static_cast<int>(needed)) return denied(user, r.bucket, needed);
  if (auto source = r.header("x-amz-copy-source")) {
    auto bucket = source_bucket(*source);
    if (static_cast<int>(user.access_to(bucket)) < static_cast<int>(bucket_access::read)) {
      return denied(user, bucket, bucket_access::read);
    }
  }
  return std::nullopt;
}

}  // namespace sluice::s3
