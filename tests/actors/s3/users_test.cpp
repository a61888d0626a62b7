// Grants: which requests a user's grants allow.

#include <doctest/doctest.h>

#include "actors/s3/users.hpp"

namespace {

using namespace sluice::s3;

parsed_request req(std::string method, std::string bucket, std::string key = {}, header_list headers = {}) {
  parsed_request r;
  r.method = std::move(method);
  r.bucket = std::move(bucket);
  r.key = std::move(key);
  r.headers = std::move(headers);
  return r;
}

s3_user user_with(std::vector<std::pair<std::string, bucket_access>> grants) {
  return s3_user{.name = "ann", .keys = {"AK", "SK"}, .grants = std::move(grants)};
}

}  // namespace

TEST_CASE("s3 users: a bucket's own grant wins over the grant for every bucket") {
  auto u = user_with({{"*", bucket_access::read}, {"logs", bucket_access::write}, {"secret", bucket_access::none}});
  CHECK(u.access_to("logs") == bucket_access::write);
  CHECK(u.access_to("photos") == bucket_access::read);
  CHECK(u.access_to("secret") == bucket_access::none);
  CHECK(user_with({}).access_to("photos") == bucket_access::none);
}

TEST_CASE("s3 users: reads need read, everything else needs write") {
  auto u = user_with({{"ro", bucket_access::read}, {"rw", bucket_access::write}});
  CHECK_FALSE(check_grants(req("GET", "ro", "k"), u));
  CHECK_FALSE(check_grants(req("HEAD", "ro", "k"), u));
  CHECK_FALSE(check_grants(req("GET", "ro"), u));  // a listing
  for (const char* method : {"PUT", "DELETE", "POST"}) {
    auto e = check_grants(req(method, "ro", "k"), u);
    REQUIRE(e);
    CHECK(e->code == s3_code::access_denied);
    CHECK(e->message.find("may not write bucket 'ro'") != std::string::npos);
    CHECK_FALSE(check_grants(req(method, "rw", "k"), u));
  }
  auto other = check_grants(req("GET", "other", "k"), u);
  REQUIRE(other);
  CHECK(other->message.find("may not read bucket 'other'") != std::string::npos);
  CHECK_FALSE(check_grants(req("GET", ""), u));  // ListBuckets: filtered, not refused
  CHECK(check_grants(req("PUT", "newbucket"), u));  // CreateBucket needs write on the name
  CHECK_FALSE(check_grants(req("PUT", "newbucket"), user_with({{"*", bucket_access::write}})));
}

TEST_CASE("s3 users: a copy needs read on its source's bucket") {
  auto u = user_with({{"dst", bucket_access::write}, {"src", bucket_access::read}});
  CHECK_FALSE(check_grants(req("PUT", "dst", "k", {{"x-amz-copy-source", "/src/a/b"}}), u));
  CHECK_FALSE(check_grants(req("PUT", "dst", "k", {{"x-amz-copy-source", "src/a"}}), u));
  auto e = check_grants(req("PUT", "dst", "k", {{"x-amz-copy-source", "/hidden/a"}}), u);
  REQUIRE(e);
  CHECK(e->message.find("may not read bucket 'hidden'") != std::string::npos);
}

TEST_CASE("s3 users: access levels read and print") {
  for (auto a : {bucket_access::none, bucket_access::read, bucket_access::write}) {
    CHECK(parse_bucket_access(to_string(a)) == a);
  }
  CHECK_FALSE(parse_bucket_access("rw"));
}
