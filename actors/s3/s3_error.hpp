// S3 error codes, their HTTP statuses, and the XML error body.
#pragma once

#include <string>
#include <string_view>

#include "actors/s3/http_types.hpp"

namespace sluice::s3 {

/// The S3 error codes this gateway answers with (names as S3 spells them).
enum class s3_code {
  access_denied,
  bad_digest,
  bucket_already_owned_by_you,
  bucket_not_empty,
  entity_too_large,
  entity_too_small,
  internal_error,
  invalid_argument,
  invalid_bucket_name,
  invalid_digest,
  invalid_part,
  invalid_part_order,
  invalid_range,
  invalid_request,
  key_too_long,
  malformed_xml,
  metadata_too_large,
  method_not_allowed,
  no_such_bucket,
  no_such_key,
  no_such_upload,
  not_implemented,
  precondition_failed,
  request_header_section_too_large,
  request_timeout,
  service_unavailable,
  slow_down,
  insufficient_storage,
  invalid_access_key_id,
  signature_does_not_match,
  request_time_too_skewed,
  authorization_header_malformed,
  authorization_query_parameters_error,
  content_sha256_mismatch,
  incomplete_body,
};

std::string_view code_name(s3_code code);
int code_status(s3_code code);

/// An S3 error: code, message and the resource it was about.
struct s3_error {
  s3_code code{s3_code::internal_error};
  std::string message{};
};

/// The XML error response.
response error_response(const s3_error& e, std::string_view resource, std::string_view request_id);

/// A store error as the S3 error a client expects.
s3_error from_store_error(const error& e);

}  // namespace sluice::s3
