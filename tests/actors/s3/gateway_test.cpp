// The S3 protocol core driven directly — no sockets — over a real
// bucket store in a temporary directory.

#include <doctest/doctest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>

#include "actors/s3/gateway.hpp"
#include "runtime/digest.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

namespace {

namespace fs = std::filesystem;
using namespace sluice;
using namespace sluice::s3;

struct answer {
  int status = 0;
  header_list headers;
  std::string body;
  bool close = false;
  std::string header(std::string_view name) const { return std::string{find_header(headers, name).value_or("")}; }
  bool has_code(std::string_view code) const {
    return body.find("<Code>" + std::string{code} + "</Code>") != std::string::npos;
  }
};

/// Counts opens, as a cache in front of the store would see them.
class counting_read_path final : public read_path {
 public:
  explicit counting_read_path(read_path& inner) : inner_(inner) {}
  result<opened_object> open(std::string_view bucket, std::string_view key) override {
    ++opens;
    return inner_.open(bucket, key);
  }
  std::atomic<int> opens{0};

 private:
  read_path& inner_;
};

struct world {
  fs::path dir;
  std::unique_ptr<posix_bucket_store> store;
  std::unique_ptr<store_read_path> direct;
  std::unique_ptr<counting_read_path> reads;
  std::unique_ptr<gateway> gw;

  explicit world(gateway_limits limits = {}) {
    static int n = 0;
    dir = fs::temp_directory_path() / ("sluice-s3-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir / "data");
    fs::create_directories(dir / "root");
    auto s = posix_bucket_store::open(
        posix_bucket_options{.exported = {{"data", (dir / "data").string()}}, .root = (dir / "root").string()});
    REQUIRE(s.ok());
    store = std::move(*s);
    direct = std::make_unique<store_read_path>(*store);
    reads = std::make_unique<counting_read_path>(*direct);
    gw = std::make_unique<gateway>(*store, *reads,
                                   gateway_options{.limits = limits, .seed = 7, .now_ns = [] { return std::int64_t{1'000'000'000}; }});
  }
  ~world() { fs::remove_all(dir); }

  answer call(std::string method, std::string target, header_list headers = {}, std::string body = {}) {
    auto started = gw->start(request_head{.method = std::move(method), .target = std::move(target),
                                          .headers = std::move(headers), .content_length = body.size()});
    response r;
    if (auto* sink = std::get_if<std::unique_ptr<body_sink>>(&started)) {
      std::optional<response> early;
      // Small pieces, as a network would deliver them.
      for (std::size_t at = 0; at < body.size() && !early; at += 7) {
        auto piece = std::string_view{body}.substr(at, 7);
        early = (*sink)->write({reinterpret_cast<const std::byte*>(piece.data()), piece.size()});
      }
      r = early ? std::move(*early) : (*sink)->finish();
    } else {
      r = std::move(std::get<response>(started));
    }
    answer out{.status = r.status, .headers = r.headers, .body = r.body, .close = r.close};
    if (r.source) {
      out.body.clear();
      std::byte chunk[5];
      for (;;) {
        auto n = r.source->read(chunk);
        REQUIRE(n.ok());
        if (*n == 0) break;
        out.body.append(reinterpret_cast<const char*>(chunk), *n);
      }
      CHECK(out.body.size() == r.content_length);
    }
    if (r.head) CHECK(r.source == nullptr);
    return out;
  }
};

std::string etag_of(std::string_view body) { return "\"" + to_hex(md5_of(body)) + "\""; }

}  // namespace

TEST_CASE("s3 gateway: an object put is got back with the same ETag on PUT, GET, HEAD and in listings") {
  world w;
  auto put = w.call("PUT", "/data/dir/obj", {{"Content-Type", "text/plain"}, {"x-amz-meta-color", "blue"}}, "some bytes");
  CHECK(put.status == 200);
  CHECK(put.header("ETag") == etag_of("some bytes"));
  auto get = w.call("GET", "/data/dir/obj");
  CHECK(get.status == 200);
  CHECK(get.body == "some bytes");
  CHECK(get.header("ETag") == put.header("ETag"));
  CHECK(get.header("content-type") == "text/plain");
  CHECK(get.header("x-amz-meta-color") == "blue");
  CHECK(!get.header("x-amz-request-id").empty());
  auto head = w.call("HEAD", "/data/dir/obj");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(head.header("ETag") == put.header("ETag"));
  auto list = w.call("GET", "/data?list-type=2");
  CHECK(list.body.find("<Key>dir/obj</Key>") != std::string::npos);
  CHECK(list.body.find("<ETag>&quot;" + to_hex(md5_of("some bytes")) + "&quot;</ETag>") != std::string::npos);
  CHECK(w.call("DELETE", "/data/dir/obj").status == 204);
  auto gone = w.call("GET", "/data/dir/obj");
  CHECK(gone.status == 404);
  CHECK(gone.has_code("NoSuchKey"));
}

TEST_CASE("s3 gateway: reads go through the read path, where a cache can sit") {
  world w;
  w.call("PUT", "/data/k", {}, "v");
  int before = w.reads->opens;
  w.call("GET", "/data/k");
  w.call("HEAD", "/data/k");
  w.call("PUT", "/data/copy", {{"x-amz-copy-source", "/data/k"}});
  CHECK(w.reads->opens - before == 3);
}

TEST_CASE("s3 gateway: a file changed behind the gateway gets a new ETag, computed once") {
  world w;
  w.call("PUT", "/data/k", {}, "first");
  { std::ofstream{w.dir / "data" / "k", std::ios::binary} << "second version"; }
  CHECK_FALSE(w.store->stat("data", "k")->value().meta.has_value());
  auto get = w.call("GET", "/data/k");
  CHECK(get.body == "second version");
  CHECK(get.header("ETag") == etag_of("second version"));
  // The new record is kept beside the file for the next reader.
  CHECK(w.store->stat("data", "k")->value().meta->etag == to_hex(md5_of("second version")));
  CHECK(w.call("HEAD", "/data/k").header("ETag") == etag_of("second version"));
}

TEST_CASE("s3 gateway: Content-MD5 is checked, and a mismatch leaves the old object in place") {
  world w;
  w.call("PUT", "/data/k", {}, "old");
  auto md5 = md5_of("other");
  auto wrong = base64_encode(std::string_view{reinterpret_cast<const char*>(md5.data()), md5.size()});
  auto bad = w.call("PUT", "/data/k", {{"Content-MD5", wrong}}, "new");
  CHECK(bad.status == 400);
  CHECK(bad.has_code("BadDigest"));
  CHECK(w.call("GET", "/data/k").body == "old");
  CHECK(w.call("PUT", "/data/k", {{"Content-MD5", "not base64!"}}, "new").has_code("InvalidDigest"));
  auto right_md5 = md5_of("new");
  auto right = base64_encode(std::string_view{reinterpret_cast<const char*>(right_md5.data()), right_md5.size()});
  CHECK(w.call("PUT", "/data/k", {{"Content-MD5", right}}, "new").status == 200);
}

TEST_CASE("s3 gateway: bodies past the object limit get EntityTooLarge and close the connection") {
  world w{gateway_limits{.object_bytes_max = 10}};
  auto declared = w.call("PUT", "/data/k", {}, std::string(11, 'x'));
  CHECK(declared.has_code("EntityTooLarge"));
  CHECK(declared.close);
  // A body whose length was not declared is cut off as it arrives.
  auto started = w.gw->start(request_head{.method = "PUT", .target = "/data/k"});
  auto& sink = std::get<std::unique_ptr<body_sink>>(started);
  std::string piece(8, 'y');
  CHECK_FALSE(sink->write({reinterpret_cast<const std::byte*>(piece.data()), piece.size()}).has_value());
  auto early = sink->write({reinterpret_cast<const std::byte*>(piece.data()), piece.size()});
  REQUIRE(early.has_value());
  CHECK(early->status == 400);
  CHECK(fs::is_empty(w.dir / "data"));
}

TEST_CASE("s3 gateway: ranges and conditions answer 206, 304, 412 and 416") {
  world w;
  auto etag = w.call("PUT", "/data/k", {}, "0123456789").header("ETag");
  auto part = w.call("GET", "/data/k", {{"Range", "bytes=2-4"}});
  CHECK(part.status == 206);
  CHECK(part.body == "234");
  CHECK(part.header("Content-Range") == "bytes 2-4/10");
  auto bad = w.call("GET", "/data/k", {{"Range", "bytes=10-"}});
  CHECK(bad.status == 416);
  CHECK(bad.has_code("InvalidRange"));
  CHECK(bad.header("Content-Range") == "bytes */10");
  CHECK(w.call("GET", "/data/k", {{"If-None-Match", etag}}).status == 304);
  CHECK(w.call("HEAD", "/data/k", {{"If-None-Match", etag}}).status == 304);
  auto failed = w.call("GET", "/data/k", {{"If-Match", "\"nope\""}});
  CHECK(failed.status == 412);
  CHECK(failed.has_code("PreconditionFailed"));
  CHECK(w.call("GET", "/data/k", {{"Range", "bytes=0-0"}, {"If-Range", "\"old\""}}).body == "0123456789");
}

TEST_CASE("s3 gateway: ListObjectsV2 pages through keys and common prefixes with continuation tokens") {
  world w;
  for (auto k : {"a/1", "a/2", "b", "c/1", "d"}) w.call("PUT", std::string{"/data/"} + k, {}, "x");
  std::vector<std::string> seen;
  std::string token;
  for (int page = 0; page < 10; ++page) {
    auto target = std::string{"/data?list-type=2&delimiter=/&max-keys=2"};
    if (!token.empty()) target += "&continuation-token=" + token;
    auto l = w.call("GET", target);
    REQUIRE(l.status == 200);
    for (std::size_t at = 0; (at = l.body.find("<Key>", at)) != std::string::npos; at += 5) {
      seen.push_back(l.body.substr(at + 5, l.body.find('<', at + 5) - at - 5));
    }
    for (std::size_t at = 0; (at = l.body.find("<Prefix>", at)) != std::string::npos; at += 8) {
      auto p = l.body.substr(at + 8, l.body.find('<', at + 8) - at - 8);
      if (!p.empty()) seen.push_back(p);
    }
    auto next = l.body.find("<NextContinuationToken>");
    if (next == std::string::npos) break;
    token = l.body.substr(next + 23, l.body.find('<', next + 23) - next - 23);
    for (std::size_t i = 0; (i = token.find('+', i)) != std::string::npos;) token.replace(i, 1, "%2B");
    for (std::size_t i = 0; (i = token.find('/', i)) != std::string::npos;) token.replace(i, 1, "%2F");
    for (std::size_t i = 0; (i = token.find('=', i)) != std::string::npos;) token.replace(i, 1, "%3D");
  }
  std::sort(seen.begin(), seen.end());
  CHECK(seen == std::vector<std::string>{"a/", "b", "c/", "d"});
  CHECK(w.call("GET", "/data?list-type=2&continuation-token=***").has_code("InvalidArgument"));
  CHECK(w.call("GET", "/data?list-type=2&max-keys=abc").has_code("InvalidArgument"));
  CHECK(w.call("GET", "/nosuch?list-type=2").has_code("NoSuchBucket"));
}

TEST_CASE("s3 gateway: DeleteObjects deletes what it can and reports what it could not") {
  world w;
  w.call("PUT", "/data/x", {}, "1");
  auto r = w.call("POST", "/data?delete", {},
                  "<Delete><Object><Key>x</Key></Object><Object><Key>a/../../b</Key></Object></Delete>");
  CHECK(r.status == 200);
  CHECK(r.body.find("<Deleted><Key>x</Key></Deleted>") != std::string::npos);
  CHECK(r.body.find("<Error><Key>a/../../b</Key><Code>InvalidArgument</Code>") != std::string::npos);
  CHECK(w.call("POST", "/data?delete", {}, "<Delete><Object>").has_code("MalformedXML"));
  CHECK(w.call("POST", "/data?delete", {}, "<Delete></Delete>").has_code("MalformedXML"));
}

TEST_CASE("s3 gateway: a multipart upload completes with md5-of-md5s-N and checks its parts") {
  world w{gateway_limits{.part_bytes_min = 4, .uploads_max = 2}};
  auto created = w.call("POST", "/data/big?uploads", {{"Content-Type", "app/x"}});
  auto at = created.body.find("<UploadId>");
  REQUIRE(at != std::string::npos);
  auto id = created.body.substr(at + 10, 32);
  auto e1 = w.call("PUT", "/data/big?partNumber=1&uploadId=" + id, {}, "aaaa").header("ETag");
  auto e2 = w.call("PUT", "/data/big?partNumber=2&uploadId=" + id, {}, "bb").header("ETag");
  auto e3 = w.call("PUT", "/data/big?partNumber=3&uploadId=" + id, {}, "c").header("ETag");
  CHECK(e1 == etag_of("aaaa"));
  auto complete = [&](std::string parts) {
    return w.call("POST", "/data/big?uploadId=" + id, {}, "<CompleteMultipartUpload>" + parts + "</CompleteMultipartUpload>");
  };
  auto part = [](int n, std::string etag) {
    return "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + etag + "</ETag></Part>";
  };
  CHECK(complete(part(2, e2) + part(1, e1)).has_code("InvalidPartOrder"));
  CHECK(complete(part(1, e1) + part(2, "\"bad\"")).has_code("InvalidPart"));
  CHECK(complete(part(1, e1) + part(4, e3)).has_code("InvalidPart"));
  CHECK(complete(part(2, e2) + part(3, e3)).has_code("EntityTooSmall"));  // part 2 is under 4 bytes
  auto done = complete(part(1, e1) + part(3, e3));
  REQUIRE(done.status == 200);
  auto d1 = md5_of("aaaa");
  auto d3 = md5_of("c");
  std::string both{reinterpret_cast<const char*>(d1.data()), 16};
  both.append(reinterpret_cast<const char*>(d3.data()), 16);
  auto expected = "\"" + to_hex(md5_of(both)) + "-2\"";
  CHECK(done.body.find("<ETag>" + expected.substr(0, 0) + "&quot;" + to_hex(md5_of(both)) + "-2&quot;</ETag>") !=
        std::string::npos);
  auto get = w.call("GET", "/data/big");
  CHECK(get.body == "aaaac");
  CHECK(get.header("ETag") == expected);
  CHECK(get.header("content-type") == "app/x");
  CHECK_FALSE(fs::exists(w.dir / "data" / ".sluice-uploads" / id));  // staged parts are gone
  CHECK(w.call("PUT", "/data/big?partNumber=1&uploadId=" + id, {}, "x").has_code("NoSuchUpload"));
}

TEST_CASE("s3 gateway: multipart uploads in progress are bounded, and abort frees one") {
  world w{gateway_limits{.uploads_max = 1}};
  auto created = w.call("POST", "/data/k?uploads");
  auto id = created.body.substr(created.body.find("<UploadId>") + 10, 32);
  auto refused = w.call("POST", "/data/k2?uploads");
  CHECK(refused.status == 503);
  CHECK(refused.has_code("SlowDown"));
  CHECK(w.call("DELETE", "/data/k?uploadId=" + id).status == 204);
  CHECK(w.call("POST", "/data/k2?uploads").status == 200);
  CHECK(w.call("PUT", "/data/k?partNumber=0&uploadId=x", {}, "x").has_code("InvalidArgument"));
}

TEST_CASE("s3 gateway: unknown methods, sub-resources and bad names get the S3 error for them") {
  world w;
  CHECK(w.call("PATCH", "/data/k").has_code("MethodNotAllowed"));
  CHECK(w.call("GET", "/data?acl").has_code("NotImplemented"));
  CHECK(w.call("GET", "/data/k?tagging").has_code("NoSuchKey"));  // read, and there is no such object
  CHECK(w.call("PUT", "/data/k?tagging", {}, "<Tagging/>").has_code("NotImplemented"));
  CHECK(w.call("GET", "/data?tagging").has_code("NotImplemented"));
  CHECK(w.call("PUT", "/data?versioning", {}, "<VersioningConfiguration/>").has_code("NotImplemented"));
  auto versioning = w.call("GET", "/data?versioning");
  CHECK(versioning.status == 200);
  CHECK(versioning.body.find("<VersioningConfiguration") != std::string::npos);
  CHECK(versioning.body.find("<Status>") == std::string::npos);
  CHECK(w.call("PUT", "/Bad_Name").has_code("InvalidBucketName"));
  CHECK(w.call("GET", "/nosuch/k").has_code("NoSuchBucket"));
  CHECK(w.call("PUT", "/nosuch/k", {}, "x").has_code("NoSuchBucket"));
  CHECK(w.call("PUT", "/data/a%2F..%2F..%2Fescape", {}, "x").has_code("InvalidArgument"));
  CHECK(w.call("PUT", "/data/k", {{"x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"}}, "x")
            .has_code("NotImplemented"));
  CHECK(w.call("PUT", "/data/k", {{"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"}}, "x")
            .has_code("InvalidRequest"));  // no x-amz-decoded-content-length
  CHECK(w.call("PUT", "/data/k", {{"x-amz-meta-big", std::string(3000, 'v')}}, "x").has_code("MetadataTooLarge"));
  auto made = w.call("PUT", "/newbucket");
  CHECK(made.status == 200);
  CHECK(w.call("PUT", "/newbucket").has_code("BucketAlreadyOwnedByYou"));
  CHECK(w.call("PUT", "/newbucket", {}, "<NotConfig/>").has_code("MalformedXML"));
  CHECK(w.call("DELETE", "/data").has_code("AccessDenied"));
  CHECK(w.call("DELETE", "/newbucket").status == 204);
}

TEST_CASE("s3 gateway: CopyObject copies bytes and headers, or replaces the headers") {
  world w;
  w.call("PUT", "/data/src", {{"Content-Type", "a/b"}}, "payload");
  auto copied = w.call("PUT", "/data/dst", {{"x-amz-copy-source", "data/src"}});
  CHECK(copied.status == 200);
  CHECK(copied.body.find("<ETag>&quot;" + to_hex(md5_of("payload")) + "&quot;</ETag>") != std::string::npos);
  auto got = w.call("GET", "/data/dst");
  CHECK(got.body == "payload");
  CHECK(got.header("content-type") == "a/b");
  w.call("PUT", "/data/dst", {{"x-amz-copy-source", "/data/src"}, {"x-amz-metadata-directive", "REPLACE"},
                              {"Content-Type", "c/d"}});
  CHECK(w.call("HEAD", "/data/dst").header("content-type") == "c/d");
  CHECK(w.call("PUT", "/data/src", {{"x-amz-copy-source", "data/src"}}).has_code("InvalidRequest"));
  CHECK(w.call("PUT", "/data/x", {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-if-match", "\"no\""}})
            .has_code("PreconditionFailed"));
  CHECK(w.call("PUT", "/data/x", {{"x-amz-copy-source", "data/none"}}).has_code("NoSuchKey"));
}

TEST_CASE("s3 gateway: GetObjectTagging answers an empty tag set for an object") {
  world w;
  w.call("PUT", "/data/tagged", {}, "x");
  auto tags = w.call("GET", "/data/tagged?tagging");
  CHECK(tags.status == 200);
  CHECK(tags.body.find("<Tagging") != std::string::npos);
  CHECK(tags.body.find("<TagSet></TagSet>") != std::string::npos);
}

TEST_CASE("s3 gateway: UploadPartCopy copies a source object, whole or a range, into a part") {
  world w{gateway_limits{.part_bytes_min = 4}};
  std::string source;
  for (int i = 0; i < 3000; ++i) source += static_cast<char>('a' + i % 26);
  w.call("PUT", "/data/src", {}, source);
  auto created = w.call("POST", "/data/joined?uploads");
  auto id = created.body.substr(created.body.find("<UploadId>") + 10, 32);
  auto part = [&](int n, header_list headers) { return w.call("PUT", "/data/joined?partNumber=" + std::to_string(n) + "&uploadId=" + id, std::move(headers)); };
  auto p1 = part(1, {{"x-amz-copy-source", "/data/src"}, {"x-amz-copy-source-range", "bytes=0-999"}});
  CHECK(p1.status == 200);
  CHECK(p1.body.find("<CopyPartResult") != std::string::npos);
  CHECK(p1.body.find("<ETag>&quot;" + to_hex(md5_of(source.substr(0, 1000))) + "&quot;</ETag>") != std::string::npos);
  auto p2 = part(2, {{"x-amz-copy-source", "data/src"}});  // the whole object
  CHECK(p2.body.find("<ETag>&quot;" + to_hex(md5_of(source)) + "&quot;</ETag>") != std::string::npos);
  auto p3 = part(3, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-range", "bytes=2990-2999"}});
  CHECK(p3.status == 200);
  // Ranges S3 does not take, sources that are not there, conditions that fail.
  CHECK(part(4, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-range", "bytes=0-3000"}}).has_code("InvalidArgument"));
  CHECK(part(4, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-range", "bytes=5-4"}}).has_code("InvalidArgument"));
  CHECK(part(4, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-range", "bytes=-5"}}).has_code("InvalidArgument"));
  CHECK(part(4, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-range", "0-5"}}).has_code("InvalidArgument"));
  CHECK(part(4, {{"x-amz-copy-source", "data/none"}}).has_code("NoSuchKey"));
  CHECK(part(4, {{"x-amz-copy-source", "data/src"}, {"x-amz-copy-source-if-match", "\"other\""}}).has_code("PreconditionFailed"));
  CHECK(part(0, {{"x-amz-copy-source", "data/src"}}).has_code("InvalidArgument"));
  CHECK(w.call("PUT", "/data/joined?partNumber=1&uploadId=nope", {{"x-amz-copy-source", "data/src"}}).has_code("NoSuchUpload"));
  auto etag = [](const answer& a) {
    auto at = a.body.find("<ETag>");
    return a.body.substr(at + 6, a.body.find("</ETag>") - at - 6);
  };
  std::string parts;
  for (auto [n, a] : {std::pair{1, &p1}, std::pair{2, &p2}, std::pair{3, &p3}}) {
    parts += "<Part><PartNumber>" + std::to_string(n) + "</PartNumber><ETag>" + etag(*a) + "</ETag></Part>";
  }
  auto done = w.call("POST", "/data/joined?uploadId=" + id, {}, "<CompleteMultipartUpload>" + parts + "</CompleteMultipartUpload>");
  REQUIRE(done.status == 200);
  CHECK(w.call("GET", "/data/joined").body == source.substr(0, 1000) + source + source.substr(2990));
}
