// SigV4 against AWS's published example, and the gateway refusing what is
// not signed with its key.

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>

#include "actors/s3/gateway.hpp"
#include "actors/s3/sigv4.hpp"
#include "runtime/digest.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

using namespace sluice;
using namespace sluice::s3;

namespace {

constexpr const char* empty_sha256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
constexpr std::int64_t example_time_s = 1369353600;  // 2013-05-24T00:00:00Z
const credentials example_key{.access_key = "AKIAIOSFODNN7EXAMPLE",
                              .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"};

/// AWS's "GET Object" example from the SigV4 for S3 documentation.
parsed_request example(std::string range = "bytes=0-9") {
  auto r = parse_request(
      request_head{.method = "GET",
                   .target = "/test.txt",
                   .headers = {{"Host", "examplebucket.s3.amazonaws.com"},
                               {"Range", range},
                               {"x-amz-content-sha256", empty_sha256},
                               {"x-amz-date", "20130524T000000Z"},
                               {"Authorization",
                                "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                                "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
                                "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"}}},
      "");
  REQUIRE(r.has_value());
  return *r;
}

}  // namespace

TEST_CASE("sigv4: AWS's GET Object example gives AWS's canonical request and signature") {
  auto r = example();
  auto canonical = canonical_request(r, {"host", "range", "x-amz-content-sha256", "x-amz-date"}, empty_sha256, "");
  CHECK(canonical ==
        "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
        "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n"
        "x-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(to_hex(sha256_of(canonical)) == "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972");
  CHECK(sigv4_signature(example_key.secret_key, "20130524", "us-east-1",
                        "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n"
                        "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972") ==
        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  auto ok = verify_sigv4(r, example_key, "us-east-1", example_time_s + 60);
  REQUIRE(std::holds_alternative<verified>(ok));
  CHECK(std::get<verified>(ok).payload_sha256 == empty_sha256);
}

TEST_CASE("sigv4: a changed header, another key, another region or a stale time is refused") {
  auto code = [](const std::variant<verified, s3_error>& v) {
    return std::holds_alternative<s3_error>(v) ? std::get<s3_error>(v).code : s3_code::internal_error;
  };
  CHECK(code(verify_sigv4(example("bytes=0-10"), example_key, "us-east-1", example_time_s)) ==
        s3_code::signature_does_not_match);
  CHECK(code(verify_sigv4(example(), {.access_key = "OTHER", .secret_key = "x"}, "us-east-1", example_time_s)) ==
        s3_code::invalid_access_key_id);
  CHECK(code(verify_sigv4(example(), {.access_key = example_key.access_key, .secret_key = "wrong"}, "us-east-1",
                          example_time_s)) == s3_code::signature_does_not_match);
  CHECK(code(verify_sigv4(example(), example_key, "eu-west-1", example_time_s)) ==
        s3_code::authorization_header_malformed);
  CHECK(code(verify_sigv4(example(), example_key, "us-east-1", example_time_s + 16 * 60)) ==
        s3_code::request_time_too_skewed);
  auto unsigned_request = parse_request(request_head{.method = "GET", .target = "/b/k"}, "");
  CHECK(code(verify_sigv4(*unsigned_request, example_key, "us-east-1", example_time_s)) == s3_code::access_denied);
}

TEST_CASE("sigv4: with credentials the gateway refuses unsigned requests and bodies that are not the signed one") {
  namespace fs = std::filesystem;
  auto dir = fs::temp_directory_path() / ("sluice-sigv4-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    auto store = posix_bucket_store::open(posix_bucket_options{.exported = {{"data", dir.string()}}});
    REQUIRE(store.ok());
    store_read_path reads{**store};
    gateway gw{**store, reads,
               gateway_options{.auth = example_key, .now_ns = [] { return example_time_s * 1'000'000'000; }}};
    auto refused = gw.start(request_head{.method = "GET", .target = "/data/k"});
    REQUIRE(std::holds_alternative<response>(refused));
    CHECK(std::get<response>(refused).status == 403);

    std::string signed_body = "signed";
    auto hash = to_hex(sha256_of(signed_body));
    request_head put{.method = "PUT",
                     .target = "/data/k",
                     .headers = {{"Host", "gw"}, {"x-amz-content-sha256", hash}, {"x-amz-date", "20130524T000000Z"}},
                     .content_length = signed_body.size()};
    auto canonical = canonical_request(*parse_request(put, ""), {"host", "x-amz-content-sha256", "x-amz-date"}, hash, "");
    auto signature = sigv4_signature(example_key.secret_key, "20130524", "us-east-1",
                                     "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n" +
                                         to_hex(sha256_of(canonical)));
    put.headers.emplace_back("Authorization",
                             "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "
                             "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=" + signature);
    auto send = [&](std::string body) {
      auto started = gw.start(put);
      auto& sink = std::get<std::unique_ptr<body_sink>>(started);
      CHECK_FALSE(sink->write({reinterpret_cast<const std::byte*>(body.data()), body.size()}).has_value());
      return sink->finish();
    };
    auto swapped = send("swappd");
    CHECK(swapped.status == 400);
    CHECK(swapped.body.find("XAmzContentSHA256Mismatch") != std::string::npos);
    CHECK(fs::is_empty(dir));
    CHECK(send(signed_body).status == 200);
    CHECK(fs::exists(dir / "k"));
  }
  fs::remove_all(dir);
}
