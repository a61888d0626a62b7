// aws-chunked (SigV4 streaming) bodies: AWS's published PUT Object
// example, chunk by chunk and through the gateway, and bodies that are
// tampered with, cut short or framed wrongly.

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "actors/s3/aws_chunked.hpp"
#include "actors/s3/gateway.hpp"
#include "actors/s3/sigv4.hpp"
#include "runtime/digest.hpp"
#include "runtime/storage/posix_bucket_store.hpp"

using namespace sluice;
using namespace sluice::s3;

namespace {

namespace fs = std::filesystem;

// AWS's "Example: PUT Object" for chunked uploads: 66,560 bytes of 'a' in a
// 64 KiB chunk, a 1 KiB chunk and the empty last chunk.
constexpr std::int64_t example_time_s = 1369353600;  // 2013-05-24T00:00:00Z
constexpr const char* example_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
constexpr const char* example_seed = "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9";
constexpr const char* example_chunk_signatures[] = {"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
                                                    "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
                                                    "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"};

chunk_chain example_chain() {
  return chunk_chain{.signing_key = sigv4_signing_key(example_secret, "20130524", "us-east-1"),
                     .amz_date = "20130524T000000Z",
                     .scope = "20130524/us-east-1/s3/aws4_request",
                     .seed_signature = example_seed};
}

std::string example_body() {
  return std::string{"10000;chunk-signature="} + example_chunk_signatures[0] + "\r\n" + std::string(65536, 'a') +
         "\r\n400;chunk-signature=" + example_chunk_signatures[1] + "\r\n" + std::string(1024, 'a') +
         "\r\n0;chunk-signature=" + example_chunk_signatures[2] + "\r\n\r\n";
}

std::span<const std::byte> bytes_of(std::string_view s) { return {reinterpret_cast<const std::byte*>(s.data()), s.size()}; }

struct decoded {
  std::string payload;
  std::optional<s3_error> error;
};

/// Feeds `body` in pieces of `piece` bytes, as a network would deliver it.
decoded decode(std::optional<chunk_chain> chain, std::uint64_t payload_bytes, std::string_view body,
               std::size_t piece = 1 << 20, aws_chunked_limits limits = {}) {
  aws_chunked_decoder d{std::move(chain), payload_bytes, limits};
  decoded out;
  for (std::size_t at = 0; at < body.size(); at += piece) {
    auto in = bytes_of(body.substr(at, piece));
    while (!in.empty()) {
      auto s = d.next(in);
      REQUIRE(s.consumed > 0);
      out.payload.append(reinterpret_cast<const char*>(s.payload.data()), s.payload.size());
      if (s.error) {
        out.error = s.error;
        return out;
      }
      in = in.subspan(s.consumed);
    }
  }
  out.error = d.finish();
  return out;
}

/// Our own encoder: `payload` cut into `chunk_bytes` chunks signed under `chain`.
std::string encode(const chunk_chain& chain, std::string_view payload, std::size_t chunk_bytes) {
  std::string out;
  std::string previous = chain.seed_signature;
  for (std::size_t at = 0;; at += chunk_bytes) {
    auto data = payload.substr(std::min(at, payload.size()), chunk_bytes);
    previous = chunk_signature(chain, previous, sha256_of(data));
    std::ostringstream size;
    size << std::hex << data.size();
    out += size.str() + ";chunk-signature=" + previous + "\r\n" + std::string{data} + (data.empty() ? "" : "\r\n");
    if (data.empty()) return out + "\r\n";
  }
}

s3_code code_of(const decoded& d) { return d.error ? d.error->code : s3_code::internal_error; }

}  // namespace

TEST_CASE("aws-chunked: AWS's PUT Object example chains its chunk signatures from the seed signature") {
  auto chain = example_chain();
  auto first = chunk_signature(chain, example_seed, sha256_of(std::string(65536, 'a')));
  CHECK(first == example_chunk_signatures[0]);
  auto second = chunk_signature(chain, first, sha256_of(std::string(1024, 'a')));
  CHECK(second == example_chunk_signatures[1]);
  CHECK(chunk_signature(chain, second, sha256_of("")) == example_chunk_signatures[2]);
  CHECK(encode(chain, std::string(66560, 'a'), 65536) == example_body());
}

TEST_CASE("aws-chunked: AWS's example body decodes to its payload however the bytes arrive") {
  for (std::size_t piece : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{65536}, std::size_t{1} << 20}) {
    CAPTURE(piece);
    auto d = decode(example_chain(), 66560, example_body(), piece);
    CHECK(!d.error.has_value());
    CHECK(d.payload == std::string(66560, 'a'));
  }
  // Without the secret (an anonymous gateway) only the framing is checked.
  auto d = decode(std::nullopt, 66560, example_body(), 3);
  CHECK(!d.error.has_value());
  CHECK(d.payload.size() == 66560);
  // The CRLF after the last chunk is optional.
  auto body = example_body();
  CHECK(!decode(example_chain(), 66560, std::string_view{body}.substr(0, body.size() - 2)).error.has_value());
}

TEST_CASE("aws-chunked: a changed byte, a changed signature or reordered chunks fail with SignatureDoesNotMatch") {
  auto body = example_body();
  auto changed_data = body;
  changed_data[100] = 'b';
  CHECK(code_of(decode(example_chain(), 66560, changed_data)) == s3_code::signature_does_not_match);
  auto changed_last = body;
  changed_last[changed_last.size() - 5] = changed_last[changed_last.size() - 5] == '0' ? '1' : '0';
  CHECK(code_of(decode(example_chain(), 66560, changed_last)) == s3_code::signature_does_not_match);
  // Another key's chain.
  auto other = example_chain();
  other.signing_key = sigv4_signing_key("another secret", "20130524", "us-east-1");
  CHECK(code_of(decode(other, 66560, body)) == s3_code::signature_does_not_match);
  // Two chunks, each validly signed in its own place, swapped.
  auto chain = example_chain();
  auto good = encode(chain, std::string(10, 'x') + std::string(10, 'y'), 10);
  auto first = good.substr(0, good.find("\r\n", good.find("\r\n") + 2) + 2);
  auto rest = good.substr(first.size());
  auto second = rest.substr(0, rest.find("\r\n", rest.find("\r\n") + 2) + 2);
  auto swapped = second + first + rest.substr(second.size());
  CHECK(!decode(chain, 20, good).error.has_value());
  CHECK(code_of(decode(chain, 20, swapped)) == s3_code::signature_does_not_match);
}

TEST_CASE("aws-chunked: bodies shorter or longer than x-amz-decoded-content-length are refused") {
  auto chain = example_chain();
  auto body = example_body();
  CHECK(code_of(decode(chain, 66561, body)) == s3_code::incomplete_body);
  CHECK(code_of(decode(chain, 66559, body)) == s3_code::invalid_request);
  CHECK(code_of(decode(chain, 66560, std::string_view{body}.substr(0, 66000))) == s3_code::incomplete_body);
  CHECK(code_of(decode(chain, 66560, body + "x")) == s3_code::invalid_request);
  CHECK(code_of(decode(chain, 0, "")) == s3_code::incomplete_body);  // not even the last chunk
  CHECK(!decode(chain, 0, encode(chain, "", 10)).error.has_value());
}

TEST_CASE("aws-chunked: malformed chunk headers and overlong ones are refused, bounded") {
  auto chain = example_chain();
  std::string sig(64, 'a');
  for (const std::string& bad : std::vector<std::string>{"zz;chunk-signature=" + sig + "\r\n", "5\r\nhello\r\n",  // no signature
                          "5;chunk-signature=" + sig.substr(1) + "\r\n",          // 63 digits
                          "5;chunk-signature=" + std::string(64, 'A') + "\r\n",  // upper case
                          "5;chunk-signature=" + sig + "\n",                      // LF alone
                          "5;chunk-signature=" + sig + ";x=y\r\n",               // an extra extension
                          ";chunk-signature=" + sig + "\r\n", "11111111111111111;chunk-signature=" + sig + "\r\n"}) {
    CAPTURE(bad);
    CHECK(code_of(decode(std::nullopt, 5, bad)) == s3_code::invalid_request);
  }
  // Data not followed by CRLF.
  auto good = encode(chain, "hello", 5);
  auto no_crlf = good;
  no_crlf.replace(no_crlf.find("hello") + 5, 2, "xx");
  CHECK(code_of(decode(chain, 5, no_crlf)) == s3_code::invalid_request);
  // A header line that never ends is cut off at the bound, not buffered.
  auto endless = decode(std::nullopt, 5, std::string(10000, '1'), 100, aws_chunked_limits{.header_bytes_max = 200});
  CHECK(code_of(endless) == s3_code::invalid_request);
}

TEST_CASE("aws-chunked: our own chunks of any size round-trip") {
  auto chain = example_chain();
  std::string payload;
  for (int i = 0; i < 5000; ++i) payload += static_cast<char>(i * 7 + i / 13);
  for (std::size_t chunk : {std::size_t{1}, std::size_t{17}, std::size_t{4096}, std::size_t{5000}, std::size_t{8192}}) {
    CAPTURE(chunk);
    auto d = decode(chain, payload.size(), encode(chain, payload, chunk), 33);
    CHECK(!d.error.has_value());
    CHECK(d.payload == payload);
  }
}

namespace {

/// A gateway over a bucket named "examplebucket", checking the example's key, at the example's time.
struct example_world {
  fs::path dir;
  std::unique_ptr<posix_bucket_store> store;
  std::unique_ptr<store_read_path> reads;
  std::unique_ptr<gateway> gw;

  explicit example_world(bool anonymous = false) {
    static int n = 0;
    dir = fs::temp_directory_path() / ("sluice-chunked-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(dir / "b");
    auto s = posix_bucket_store::open(posix_bucket_options{.exported = {{"examplebucket", (dir / "b").string()}}});
    REQUIRE(s.ok());
    store = std::move(*s);
    reads = std::make_unique<store_read_path>(*store);
    std::optional<credentials> auth;
    if (!anonymous) auth = credentials{.access_key = "AKIAIOSFODNN7EXAMPLE", .secret_key = example_secret};
    gw = std::make_unique<gateway>(*store, *reads,
                                   gateway_options{.auth = auth, .seed = 1, .now_ns = [] {
                                                     return example_time_s * 1'000'000'000 + 5'000'000'000;
                                                   }});
  }
  ~example_world() { fs::remove_all(dir); }

  /// The example's PUT with `body`; the status and the body of the answer.
  std::pair<int, std::string> put(std::string_view body, std::size_t piece = 4096) {
    request_head head{
        .method = "PUT",
        .target = "/examplebucket/chunkObject.txt",
        .headers = {{"Host", "s3.amazonaws.com"},
                    {"x-amz-date", "20130524T000000Z"},
                    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
                    {"Authorization",
                     std::string{"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
                                 "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;"
                                 "x-amz-decoded-content-length;x-amz-storage-class,Signature="} +
                         example_seed},
                    {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
                    {"Content-Encoding", "aws-chunked"},
                    {"x-amz-decoded-content-length", "66560"},
                    {"Content-Length", "66824"}},
        .content_length = 66824};
    auto started = gw->start(head);
    if (auto* r = std::get_if<response>(&started)) return {r->status, r->body};
    auto& sink = std::get<std::unique_ptr<body_sink>>(started);
    for (std::size_t at = 0; at < body.size(); at += piece) {
      if (auto early = sink->write(bytes_of(body.substr(at, piece)))) return {early->status, early->body};
    }
    auto r = sink->finish();
    return {r.status, r.body};
  }

  std::optional<std::string> stored() const {
    std::ifstream in{dir / "b" / "chunkObject.txt", std::ios::binary};
    if (!in) return std::nullopt;
    return std::string{std::istreambuf_iterator<char>{in}, {}};
  }
};

}  // namespace

TEST_CASE("aws-chunked: the gateway stores AWS's example PUT, and nothing of a tampered one") {
  {
    example_world w;
    auto [status, body] = w.put(example_body());
    CHECK(status == 200);
    CHECK(w.stored() == std::string(66560, 'a'));
  }
  {
    example_world w;
    auto tampered = example_body();
    tampered[66000] = 'b';  // in the second chunk, after the first was good
    auto [status, body] = w.put(tampered);
    CHECK(status == 403);
    CHECK(body.find("<Code>SignatureDoesNotMatch</Code>") != std::string::npos);
    CHECK(!w.stored().has_value());
    CHECK(fs::is_empty(w.dir / "b"));  // no temp file either
  }
  {
    example_world w;
    auto body = example_body();
    auto [status, answer] = w.put(std::string_view{body}.substr(0, 66000));
    CHECK(status == 400);
    CHECK(answer.find("<Code>IncompleteBody</Code>") != std::string::npos);
    CHECK(!w.stored().has_value());
  }
  {
    example_world w{true};  // anonymous: the framing is still decoded
    auto [status, body] = w.put(example_body(), 1);
    CHECK(status == 200);
    CHECK(w.stored() == std::string(66560, 'a'));
    auto meta = w.store->stat("examplebucket", "chunkObject.txt");
    REQUIRE(meta.ok());
    REQUIRE(meta->has_value());
    REQUIRE((*meta)->meta.has_value());
    CHECK((*meta)->meta->etag == to_hex(md5_of(std::string(66560, 'a'))));
    // Content-Encoding: aws-chunked described the transfer, not the object.
    for (const auto& [name, value] : (*meta)->meta->headers) CHECK(name != "content-encoding");
  }
}
