// The pure pieces of the S3 protocol: XML, request targets, names,
// ranges, dates and conditional headers.

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "actors/s3/conditions.hpp"
#include "actors/s3/names.hpp"
#include "actors/s3/request.hpp"
#include "actors/s3/xml.hpp"

using namespace sluice::s3;

TEST_CASE("s3 xml: a Delete body parses with namespaces, entities and comments") {
  auto root = parse_xml(
      "<?xml version=\"1.0\"?>\n<!-- c --><Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Quiet>true</Quiet><Object><Key>a&amp;b &lt;c&gt; &#x263A;</Key></Object><s3:Object><Key/></s3:Object></Delete>");
  REQUIRE(root.has_value());
  CHECK(root->name == "Delete");
  REQUIRE(root->children.size() == 3);
  CHECK(root->find("Quiet")->text == "true");
  CHECK(root->children[1].find("Key")->text == "a&b <c> \xe2\x98\xba");
  CHECK(root->children[2].name == "Object");
  CHECK(root->children[2].find("Key")->text.empty());
}

TEST_CASE("s3 xml: malformed or hostile bodies are refused") {
  CHECK_FALSE(parse_xml("").has_value());
  CHECK_FALSE(parse_xml("not xml").has_value());
  CHECK_FALSE(parse_xml("<a><b></a></b>").has_value());
  CHECK_FALSE(parse_xml("<a>").has_value());
  CHECK_FALSE(parse_xml("<a></a><b/>").has_value());
  CHECK_FALSE(parse_xml("<a>&bogus;</a>").has_value());
  CHECK_FALSE(parse_xml("<!DOCTYPE a [<!ENTITY x \"y\">]><a/>").has_value());
  std::string deep;
  for (int i = 0; i < 50; ++i) deep += "<a>";
  for (int i = 0; i < 50; ++i) deep += "</a>";
  CHECK_FALSE(parse_xml(deep).has_value());
  std::string wide = "<a>";
  for (int i = 0; i < 100; ++i) wide += "<b/>";
  wide += "</a>";
  CHECK(parse_xml(wide).has_value());
  CHECK_FALSE(parse_xml(wide, xml_limits{.depth_max = 8, .nodes_max = 50}).has_value());
}

TEST_CASE("s3 xml: the writer escapes text") {
  xml_writer x{"R"};
  x.leaf("K", "<&\">");
  CHECK(x.finish().ends_with("<K>&lt;&amp;&quot;&gt;</K></R>"));
}

TEST_CASE("s3 request: path style names bucket and key, percent-escapes and the query decoded") {
  auto r = parse_request(request_head{.method = "GET", .target = "/bkt/a%20b/c+d?list-type=2&prefix=x+y&flag"}, "");
  REQUIRE(r.has_value());
  CHECK(r->bucket == "bkt");
  CHECK(r->key == "a b/c+d");
  CHECK(r->param("prefix") == "x y");
  CHECK(r->has("flag"));
  CHECK_FALSE(r->has("marker"));
  auto service = parse_request(request_head{.method = "GET", .target = "/"}, "");
  CHECK(service->bucket.empty());
  CHECK_FALSE(parse_request(request_head{.method = "GET", .target = "/b/%zz"}, "").has_value());
  CHECK_FALSE(parse_request(request_head{.method = "GET", .target = "/b/%4"}, "").has_value());
  CHECK_FALSE(parse_request(request_head{.method = "GET", .target = "http://x/b"}, "").has_value());
}

TEST_CASE("s3 request: virtual-host style takes the bucket from Host under the gateway's domain") {
  request_head h{.method = "GET", .target = "/k/x", .headers = {{"Host", "photos.s3.local:9000"}}};
  auto r = parse_request(h, "s3.local");
  CHECK(r->bucket == "photos");
  CHECK(r->key == "k/x");
  auto other = parse_request(request_head{.method = "GET", .target = "/b/k", .headers = {{"Host", "127.0.0.1:9000"}}},
                             "s3.local");
  CHECK(other->bucket == "b");
}

TEST_CASE("s3 request: percent-encoding for listings keeps only unreserved bytes and slashes") {
  CHECK(percent_encode("a b+c/d~\xc3\xa9", true) == "a%20b%2Bc/d~%C3%A9");
  CHECK(percent_encode("a/b", false) == "a%2Fb");
}

TEST_CASE("s3 names: bucket names follow S3's rules") {
  CHECK(valid_bucket_name("data"));
  CHECK(valid_bucket_name("my.bucket-1"));
  CHECK_FALSE(valid_bucket_name("ab"));
  CHECK_FALSE(valid_bucket_name("Upper"));
  CHECK_FALSE(valid_bucket_name("a..b"));
  CHECK_FALSE(valid_bucket_name("-ab"));
  CHECK_FALSE(valid_bucket_name("192.168.1.1"));
  CHECK_FALSE(valid_bucket_name(std::string(64, 'a')));
}

TEST_CASE("s3 names: keys that are not safe paths or not UTF-8 are refused with the S3 code") {
  CHECK_FALSE(check_key("a/b/c.txt", 1024).has_value());
  CHECK_FALSE(check_key("\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87", 1024).has_value());
  CHECK_FALSE(check_key("dir/", 1024).has_value());  // a directory marker
  CHECK_FALSE(check_key("a/b/", 1024).has_value());
  for (const std::string& bad : std::vector<std::string>{"../x", "a/../b", "/abs", "a//b", "dir//", "/", ".", "a/./b", ".sluice-tmp-1", "x/.sluice-uploads/y",
                          std::string{"a\0b", 3}, std::string{"\xff"}, std::string{"\xc0\xaf"}, std::string{"\xed\xa0\x80"}}) {
    auto e = check_key(bad, 1024);
    REQUIRE(e.has_value());
    CHECK(e->code == s3_code::invalid_argument);
  }
  CHECK(check_key(std::string(1025, 'k'), 1024)->code == s3_code::key_too_long);
  CHECK(check_key(std::string(256, 'k'), 1024)->code == s3_code::key_too_long);
}

TEST_CASE("s3 range: single ranges resolve against the size, and the rest are ignored or unsatisfiable") {
  auto r = parse_range("bytes=10-19", 100);
  CHECK(r.kind == range_kind::satisfiable);
  CHECK(r.range.first == 10);
  CHECK(r.range.length == 10);
  CHECK(parse_range("bytes=90-", 100).range.length == 10);
  CHECK(parse_range("bytes=-30", 100).range.first == 70);
  CHECK(parse_range("bytes=-300", 100).range.length == 100);
  CHECK(parse_range("bytes=95-500", 100).range.length == 5);
  CHECK(parse_range("bytes=100-", 100).kind == range_kind::unsatisfiable);
  CHECK(parse_range("bytes=-0", 100).kind == range_kind::unsatisfiable);
  CHECK(parse_range("bytes=0-", 0).kind == range_kind::unsatisfiable);
  CHECK(parse_range("bytes=5-3", 100).kind == range_kind::none);
  CHECK(parse_range("bytes=0-1,5-6", 100).kind == range_kind::none);
  CHECK(parse_range("items=0-1", 100).kind == range_kind::none);
  CHECK(parse_range(std::nullopt, 100).kind == range_kind::none);
}

TEST_CASE("s3 dates: HTTP dates format and parse both ways") {
  CHECK(http_date(784111777) == "Sun, 06 Nov 1994 08:49:37 GMT");
  CHECK(parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT") == 784111777);
  CHECK(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT") == 784111777);
  CHECK_FALSE(parse_http_date("yesterday").has_value());
  CHECK_FALSE(parse_http_date("Sun, 06 Foo 1994 08:49:37 GMT").has_value());
  CHECK(iso8601(784111777'123'000'000) == "1994-11-06T08:49:37.123Z");
}

TEST_CASE("s3 conditions: If-Match and If-None-Match win over the date conditions") {
  std::int64_t t = 784111777;
  auto check = [&](header_list h, bool get = true) { return check_preconditions(h, "abc", t, get); };
  CHECK(check({}) == precondition::proceed);
  CHECK(check({{"If-Match", "\"abc\""}}) == precondition::proceed);
  CHECK(check({{"If-Match", "\"x\", \"abc\""}}) == precondition::proceed);
  CHECK(check({{"If-Match", "*"}}) == precondition::proceed);
  CHECK(check({{"If-Match", "\"x\""}}) == precondition::failed);
  CHECK(check({{"If-None-Match", "\"abc\""}}) == precondition::not_modified);
  CHECK(check({{"If-None-Match", "\"abc\""}}, false) == precondition::failed);
  CHECK(check({{"If-None-Match", "\"x\""}}) == precondition::proceed);
  CHECK(check({{"If-Modified-Since", http_date(t)}}) == precondition::not_modified);
  CHECK(check({{"If-Modified-Since", http_date(t - 1)}}) == precondition::proceed);
  CHECK(check({{"If-Unmodified-Since", http_date(t - 1)}}) == precondition::failed);
  CHECK(check({{"If-Unmodified-Since", http_date(t)}}) == precondition::proceed);
  // If-Match holding makes If-Unmodified-Since moot, as S3 documents.
  CHECK(check({{"If-Match", "\"abc\""}, {"If-Unmodified-Since", http_date(t - 1)}}) == precondition::proceed);
  CHECK(check({{"If-Modified-Since", "not a date"}}) == precondition::proceed);
  CHECK(if_range_holds({{"If-Range", "\"abc\""}}, "abc", t));
  CHECK_FALSE(if_range_holds({{"If-Range", "\"x\""}}, "abc", t));
  CHECK(if_range_holds({{"If-Range", http_date(t)}}, "abc", t));
  CHECK_FALSE(if_range_holds({{"If-Range", http_date(t - 1)}}, "abc", t));
}
