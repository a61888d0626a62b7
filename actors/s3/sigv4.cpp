#include "actors/s3/sigv4.hpp"

#include <algorithm>
#include <charconv>
#include <ctime>

#include "runtime/digest.hpp"

namespace sluice::s3 {
namespace {

constexpr std::string_view algorithm = "AWS4-HMAC-SHA256";
constexpr std::int64_t skew_s_max = 15 * 60;            // S3's
constexpr std::int64_t presigned_expires_s_max = 604800;  // S3's: 7 days
constexpr std::string_view unsigned_payload = "UNSIGNED-PAYLOAD";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string hex(const sha256_digest& d) { return to_hex(d); }

std::string as_key(const sha256_digest& d) { return std::string{reinterpret_cast<const char*>(d.data()), d.size()}; }

/// A header's value as SigV4 signs it: every occurrence, trimmed, joined
/// by ',', runs of spaces collapsed.
std::string canonical_value(const header_list& headers, std::string_view lower_name) {
  std::string out;
  bool first = true;
  for (const auto& [name, value] : headers) {
    if (name.size() != lower_name.size() || !find_header({{name, value}}, lower_name)) continue;
    if (!first) out += ',';
    first = false;
    bool space = false;
    for (char c : trim(value)) {
      if (c == ' ' || c == '\t') {
        space = true;
        continue;
      }
      if (space) out += ' ';
      space = false;
      out += c;
    }
  }
  return out;
}

std::vector<std::string> split(std::string_view s, char by) {
  std::vector<std::string> out;
  while (true) {
    auto at = s.find(by);
    out.emplace_back(trim(s.substr(0, at)));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

/// "20130524T000000Z" → seconds since the epoch.
std::optional<std::int64_t> parse_amz_date(std::string_view t) {
  if (t.size() != 16 || t[8] != 'T' || t[15] != 'Z') return std::nullopt;
  auto num = [&](std::size_t at, std::size_t n) {
    int v = -1;
    std::from_chars(t.data() + at, t.data() + at + n, v);
    return v;
  };
  std::tm tm{};
  tm.tm_year = num(0, 4) - 1900;
  tm.tm_mon = num(4, 2) - 1;
  tm.tm_mday = num(6, 2);
  tm.tm_hour = num(9, 2);
  tm.tm_min = num(11, 2);
  tm.tm_sec = num(13, 2);
  if (tm.tm_year < 70 || tm.tm_mon < 0 || tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_hour < 0 || tm.tm_min < 0 ||
      tm.tm_sec < 0) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(timegm(&tm));
}

/// What an Authorization header or a presigned query says.
struct signed_claim {
  std::string credential{};  // AKID/DATE/REGION/s3/aws4_request
  std::vector<std::string> signed_headers{};
  std::string signature{};
  std::string amz_date{};
  std::string payload_hash{};
  std::string excluded{};  // the query parameter not signed (the signature itself)
  std::optional<std::int64_t> expires_s{};
};

s3_error malformed(std::string message) { return {s3_code::authorization_header_malformed, std::move(message)}; }

std::variant<signed_claim, s3_error> from_header(const parsed_request& r, std::string_view auth) {
  if (!auth.starts_with(algorithm)) {
    return s3_error{s3_code::invalid_request, "Only AWS4-HMAC-SHA256 (SigV4) signatures are accepted."};
  }
  signed_claim c;
  for (const auto& item : split(auth.substr(algorithm.size()), ',')) {
    auto eq = item.find('=');
    if (eq == std::string::npos) return malformed("The authorization header is malformed.");
    auto name = item.substr(0, eq);
    auto value = item.substr(eq + 1);
    if (name == "Credential") c.credential = value;
    if (name == "SignedHeaders") c.signed_headers = split(value, ';');
    if (name == "Signature") c.signature = value;
  }
  c.amz_date = std::string{r.header("x-amz-date").value_or("")};
  auto payload = r.header("x-amz-content-sha256");
  if (!payload) return s3_error{s3_code::invalid_request, "Missing required header for this request: x-amz-content-sha256"};
  c.payload_hash = std::string{*payload};
  return c;
}

std::variant<signed_claim, s3_error> from_query(const parsed_request& r) {
  if (r.param("X-Amz-Algorithm") != algorithm) {
    return s3_error{s3_code::invalid_request, "Only AWS4-HMAC-SHA256 (SigV4) presigned URLs are accepted."};
  }
  signed_claim c{.credential = r.param("X-Amz-Credential").value_or(""),
                 .signed_headers = split(r.param("X-Amz-SignedHeaders").value_or(""), ';'),
                 .signature = r.param("X-Amz-Signature").value_or(""),
                 .amz_date = r.param("X-Amz-Date").value_or(""),
                 .payload_hash = std::string{r.header("x-amz-content-sha256").value_or(unsigned_payload)},
                 .excluded = "X-Amz-Signature"};
  std::int64_t expires = -1;
  auto text = r.param("X-Amz-Expires").value_or("");
  std::from_chars(text.data(), text.data() + text.size(), expires);
  if (expires < 0 || expires > presigned_expires_s_max) {
    return s3_error{s3_code::authorization_query_parameters_error, "X-Amz-Expires must be 0 to 604800 seconds."};
  }
  c.expires_s = expires;
  return c;
}

std::optional<s3_error> check_time(const signed_claim& c, std::int64_t now_s) {
  auto t = parse_amz_date(c.amz_date);
  if (!t) return malformed("The request time (x-amz-date) is missing or not YYYYMMDDTHHMMSSZ.");
  if (c.expires_s) {
    if (now_s > *t + *c.expires_s) return s3_error{s3_code::access_denied, "Request has expired"};
    if (*t - now_s > skew_s_max) return s3_error{s3_code::request_time_too_skewed, "The request time is in the future."};
    return std::nullopt;
  }
  if (std::abs(now_s - *t) > skew_s_max) {
    return s3_error{s3_code::request_time_too_skewed,
                    "The difference between the request time and the server's time is too large."};
  }
  return std::nullopt;
}

}  // namespace

std::string canonical_request(const parsed_request& r, const std::vector<std::string>& signed_headers,
                              std::string_view payload_hash, std::string_view excluded) {
  std::vector<std::pair<std::string, std::string>> query;
  for (const auto& [name, value] : r.query) {
    if (name != excluded) query.emplace_back(percent_encode(name, false), percent_encode(value, false));
  }
  std::sort(query.begin(), query.end());
  std::string out = r.method + "\n" + percent_encode(r.resource, true) + "\n";
  for (std::size_t i = 0; i < query.size(); ++i) {
    out += (i == 0 ? "" : "&") + query[i].first + "=" + query[i].second;
  }
  out += "\n";
  std::string names;
  for (const auto& h : signed_headers) {
    out += h + ":" + canonical_value(r.headers, h) + "\n";
    names += (names.empty() ? "" : ";") + h;
  }
  out += "\n" + names + "\n" + std::string{payload_hash};
  return out;
}

std::string sigv4_signing_key(std::string_view secret, std::string_view date, std::string_view region) {
  auto k_date = hmac_sha256("AWS4" + std::string{secret}, date);
  auto k_region = hmac_sha256(as_key(k_date), region);
  auto k_service = hmac_sha256(as_key(k_region), "s3");
  return as_key(hmac_sha256(as_key(k_service), "aws4_request"));
}

std::string sigv4_signature(std::string_view secret, std::string_view date, std::string_view region,
                            std::string_view string_to_sign) {
  return hex(hmac_sha256(sigv4_signing_key(secret, date, region), string_to_sign));
}

std::variant<verified, s3_error> verify_sigv4(const parsed_request& r, const credentials& creds,
                                              std::string_view region, std::int64_t now_s) {
  return verify_sigv4(
      r,
      [&creds](std::string_view key) -> std::optional<std::string> {
        if (!equal_in_constant_time(key, creds.access_key)) return std::nullopt;
        return creds.secret_key;
      },
      region, now_s);
}

std::variant<verified, s3_error> verify_sigv4(const parsed_request& r, const secret_lookup& secret_of,
                                              std::string_view region, std::int64_t now_s) {
  auto auth = r.header("authorization");
  if (!auth && r.has("AWSAccessKeyId")) {
    return s3_error{s3_code::invalid_request, "Only AWS4-HMAC-SHA256 (SigV4) presigned URLs are accepted."};
  }
  if (!auth && !r.has("X-Amz-Signature")) {
    return s3_error{s3_code::access_denied, "Anonymous requests are not accepted: sign them with SigV4."};
  }
  auto claim = auth ? from_header(r, *auth) : from_query(r);
  if (auto* e = std::get_if<s3_error>(&claim)) return *e;
  auto& c = std::get<signed_claim>(claim);
  auto scope = split(c.credential, '/');
  if (scope.size() != 5 || scope[3] != "s3" || scope[4] != "aws4_request") {
    return malformed("The credential is not ACCESSKEY/DATE/REGION/s3/aws4_request.");
  }
  auto secret = secret_of(scope[0]);
  if (!secret) {
    return s3_error{s3_code::invalid_access_key_id, "The access key Id you provided does not exist in our records."};
  }
  if (scope[2] != region) return malformed("The authorization header is malformed; the region '" + scope[2] + "' is wrong; expecting '" + std::string{region} + "'");
  if (auto late = check_time(c, now_s)) return *late;
  if (c.amz_date.substr(0, 8) != scope[1]) return malformed("The credential's date is not the request's date.");
  if (std::find(c.signed_headers.begin(), c.signed_headers.end(), "host") == c.signed_headers.end()) {
    return malformed("The Host header must be signed.");
  }
  auto canonical = canonical_request(r, c.signed_headers, c.payload_hash, c.excluded);
  std::string to_sign{algorithm};
  for (const auto& piece : {std::string{"\n"}, c.amz_date, std::string{"\n"}, scope[1], std::string{"/"}, scope[2],
                            std::string{"/s3/aws4_request\n"}, hex(sha256_of(canonical))}) {
    to_sign.append(piece);
  }
  if (!equal_in_constant_time(sigv4_signature(*secret, scope[1], region, to_sign), c.signature)) {
    return s3_error{s3_code::signature_does_not_match,
                    "The request signature we calculated does not match the signature you provided. Check your key "
                    "and signing method."};
  }
  verified out;
  if (c.payload_hash == streaming_signed_payload) {
    out.chunks = chunk_chain{.signing_key = sigv4_signing_key(*secret, scope[1], region),
                             .amz_date = c.amz_date,
                             .scope = scope[1] + "/" + std::string{region} + "/s3/aws4_request",
                             .seed_signature = c.signature};
  } else if (c.payload_hash != unsigned_payload) {
    out.payload_sha256 = c.payload_hash;
  }
  return out;
}

}  // namespace sluice::s3
