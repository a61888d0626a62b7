// What the gateway's operations share, and the operations themselves.
// Internal to actors/s3: gateway.cpp dispatches, the *_ops.cpp files
// compute.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "actors/s3/conditions.hpp"
#include "actors/s3/gateway.hpp"
#include "actors/s3/request.hpp"
#include "actors/s3/upload_table.hpp"

namespace sluice::s3 {

struct gateway::state {
  bucket_store& store;
  read_path& reads;
  gateway_options options;
  upload_table uploads;
  std::atomic<std::uint64_t> requests{0};
};

/// One request being answered.
struct context {
  gateway::state& g;
  parsed_request r;
  std::string request_id;
  /// The user who signed the request, when the gateway has users.
  std::optional<s3_user> user{};

  response fail(s3_error e) const { return error_response(e, r.resource, request_id); }
  response fail(s3_code code, std::string message) const { return fail(s3_error{code, std::move(message)}); }
  /// A store failure about the request's bucket: NoSuchBucket when the
  /// bucket is gone, else the error as S3 names it.
  response store_failure(const error& e) const;
  response xml(int status, std::string body) const;
};

/// Reads a small XML body whole (at most xml_body_bytes_max), then calls
/// `done` with it.
std::unique_ptr<body_sink> make_xml_sink(const context& ctx, std::function<response(std::string body)> done);

/// The headers S3 keeps with an object (content-*, cache-control, expires,
/// x-amz-meta-*), lower-cased and sorted; an error when they break a limit.
std::variant<object_meta, s3_error> meta_from_request(const context& ctx);
/// Adds `meta`'s headers and ETag to a response.
void add_object_headers(response& out, const object_meta& meta, std::int64_t mtime_ns);
std::string quoted(std::string_view etag);

// Buckets and listings (bucket_ops.cpp, list_ops.cpp).
response list_buckets(const context& ctx);
response head_bucket(const context& ctx);
started create_bucket(const context& ctx);
response delete_bucket(const context& ctx);
response bucket_location(const context& ctx);
/// GetBucketVersioning: versioning was never enabled, and cannot be.
response bucket_versioning(const context& ctx);
response list_objects(const context& ctx, bool v2);
started delete_objects(const context& ctx);

/// The source a copy names (x-amz-copy-source), opened, its
/// x-amz-copy-source-if-* conditions held.
struct copy_source_opened {
  std::string bucket{};
  std::string key{};
  opened_object object{};
};
/// The opened source, or the error to answer (NoSuchKey, 412, ...).
std::variant<copy_source_opened, response> open_copy_source(const context& ctx);
/// Copies `range` of `from` into `to` in copy_chunk_bytes pieces; the
/// copied bytes' MD5 (hex).
result<std::string> copy_range(const context& ctx, object_reader& from, object_writer& to, byte_range range);

// Objects (object_ops.cpp, copy_ops.cpp).
started put_object(const context& ctx);
response get_object(const context& ctx, bool head);
response delete_object(const context& ctx);
/// GetObjectTagging: an empty TagSet, as no object has tags here.
response object_tagging(const context& ctx);
response copy_object(const context& ctx);

// Multipart (multipart_ops.cpp).
response create_upload(const context& ctx);
started upload_part(const context& ctx);
/// UploadPartCopy: a part copied from an object, whole or x-amz-copy-source-range.
response upload_part_copy(const context& ctx);
response list_parts(const context& ctx);
response list_uploads(const context& ctx);
response abort_upload(const context& ctx);
started complete_upload(const context& ctx);

/// A sink that writes the body into `writer`, hashing it, refusing more
/// than `bytes_max`, checking Content-MD5; on finish commits with `meta`
/// plus the ETag and answers with `done` (given the committed meta).
std::unique_ptr<body_sink> make_object_sink(const context& ctx, std::unique_ptr<object_writer> writer,
                                            object_meta meta, std::uint64_t bytes_max,
                                            std::function<response(const object_meta&)> done);

}  // namespace sluice::s3
