#include "actors/s3/s3_error.hpp"

#include "actors/s3/xml.hpp"

namespace sluice::s3 {

std::string_view code_name(s3_code code) {
  switch (code) {
    case s3_code::access_denied: return "AccessDenied";
    case s3_code::bad_digest: return "BadDigest";
    case s3_code::bucket_already_owned_by_you: return "BucketAlreadyOwnedByYou";
    case s3_code::bucket_not_empty: return "BucketNotEmpty";
    case s3_code::entity_too_large: return "EntityTooLarge";
    case s3_code::entity_too_small: return "EntityTooSmall";
    case s3_code::internal_error: return "InternalError";
    case s3_code::invalid_argument: return "InvalidArgument";
    case s3_code::invalid_bucket_name: return "InvalidBucketName";
    case s3_code::invalid_digest: return "InvalidDigest";
    case s3_code::invalid_part: return "InvalidPart";
    case s3_code::invalid_part_order: return "InvalidPartOrder";
    case s3_code::invalid_range: return "InvalidRange";
    case s3_code::invalid_request: return "InvalidRequest";
    case s3_code::key_too_long: return "KeyTooLongError";
    case s3_code::malformed_xml: return "MalformedXML";
    case s3_code::metadata_too_large: return "MetadataTooLarge";
    case s3_code::method_not_allowed: return "MethodNotAllowed";
    case s3_code::no_such_bucket: return "NoSuchBucket";
    case s3_code::no_such_key: return "NoSuchKey";
    case s3_code::no_such_upload: return "NoSuchUpload";
    case s3_code::not_implemented: return "NotImplemented";
    case s3_code::precondition_failed: return "PreconditionFailed";
    case s3_code::request_header_section_too_large: return "RequestHeaderSectionTooLarge";
    case s3_code::request_timeout: return "RequestTimeout";
    case s3_code::service_unavailable: return "ServiceUnavailable";
    case s3_code::slow_down: return "SlowDown";
    case s3_code::insufficient_storage: return "InsufficientStorage";
    case s3_code::invalid_access_key_id: return "InvalidAccessKeyId";
    case s3_code::signature_does_not_match: return "SignatureDoesNotMatch";
    case s3_code::request_time_too_skewed: return "RequestTimeTooSkewed";
    case s3_code::authorization_header_malformed: return "AuthorizationHeaderMalformed";
    case s3_code::authorization_query_parameters_error: return "AuthorizationQueryParametersError";
    case s3_code::content_sha256_mismatch: return "XAmzContentSHA256Mismatch";
    case s3_code::incomplete_body: return "IncompleteBody";
  }
  return "InternalError";
}

int code_status(s3_code code) {
  switch (code) {
    case s3_code::access_denied:
    case s3_code::invalid_access_key_id:
    case s3_code::signature_does_not_match:
    case s3_code::request_time_too_skewed: return 403;
    case s3_code::authorization_header_malformed:
    case s3_code::authorization_query_parameters_error:
    case s3_code::content_sha256_mismatch:
    case s3_code::incomplete_body: return 400;
    case s3_code::bucket_already_owned_by_you:
    case s3_code::bucket_not_empty: return 409;
    case s3_code::entity_too_large:
    case s3_code::entity_too_small:
    case s3_code::bad_digest:
    case s3_code::invalid_argument:
    case s3_code::invalid_bucket_name:
    case s3_code::invalid_digest:
    case s3_code::invalid_part:
    case s3_code::invalid_part_order:
    case s3_code::invalid_request:
    case s3_code::key_too_long:
    case s3_code::malformed_xml:
    case s3_code::metadata_too_large:
    case s3_code::request_header_section_too_large:
    case s3_code::request_timeout: return 400;
    case s3_code::method_not_allowed: return 405;
    case s3_code::no_such_bucket:
    case s3_code::no_such_key:
    case s3_code::no_such_upload: return 404;
    case s3_code::invalid_range: return 416;
    case s3_code::precondition_failed: return 412;
    case s3_code::not_implemented: return 501;
    case s3_code::service_unavailable:
    case s3_code::slow_down: return 503;
    case s3_code::insufficient_storage: return 507;
    case s3_code::internal_error: return 500;
  }
  return 500;
}

response error_response(const s3_error& e, std::string_view resource, std::string_view request_id) {
  std::string body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>";
  body += code_name(e.code);
  body += "</Code><Message>" + xml_escape(e.message) + "</Message><Resource>" + xml_escape(resource) +
          "</Resource><RequestId>" + xml_escape(request_id) + "</RequestId></Error>";
  response r{.status = code_status(e.code)};
  r.headers.emplace_back("Content-Type", "application/xml");
  r.content_length = body.size();
  r.body = std::move(body);
  return r;
}

s3_error from_store_error(const error& e) {
  switch (e.code()) {
    case errc::not_found: return {s3_code::no_such_key, "The specified key does not exist."};
    case errc::no_capacity: return {s3_code::insufficient_storage, "The backing directory is full: " + e.message()};
    case errc::permission_denied: return {s3_code::access_denied, e.message()};
    case errc::invalid_argument: return {s3_code::invalid_argument, e.message()};
    case errc::conflict: return {s3_code::invalid_request, e.message()};
    // The pool or an owner a write-back PUT needs: worth trying again.
    case errc::unavailable:
    case errc::timeout:
    case errc::overloaded: return {s3_code::service_unavailable, e.message()};
    default: return {s3_code::internal_error, e.message()};
  }
}

}  // namespace sluice::s3
