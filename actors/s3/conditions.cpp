#include "actors/s3/conditions.hpp"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace sluice::s3 {
namespace {

constexpr const char* day_names[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
constexpr const char* month_names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

std::tm utc(std::int64_t unix_s) {
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return tm;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<std::uint64_t> number(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string http_date(std::int64_t unix_s) {
  auto tm = utc(unix_s);
  char out[96];
  std::snprintf(out, sizeof out, "%s, %02d %s %04d %02d:%02d:%02d GMT", day_names[tm.tm_wday], tm.tm_mday,
                month_names[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
  return out;
}

std::optional<std::int64_t> parse_http_date(std::string_view text) {
  std::string s{trim(text)};
  std::tm tm{};
  char month[4] = {};
  int year = 0;
  int n = 0;
  if (std::sscanf(s.c_str(), "%*3s, %2d %3s %4d %2d:%2d:%2d GMT%n", &tm.tm_mday, month, &year, &tm.tm_hour,
                  &tm.tm_min, &tm.tm_sec, &n) != 6 ||
      static_cast<std::size_t>(n) != s.size()) {
    n = 0;
    if (std::sscanf(s.c_str(), "%*[A-Za-z], %2d-%3s-%2d %2d:%2d:%2d GMT%n", &tm.tm_mday, month, &year, &tm.tm_hour,
                    &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        static_cast<std::size_t>(n) != s.size()) {
      return std::nullopt;
    }
    year += year < 70 ? 2000 : 1900;
  }
  tm.tm_mon = -1;
  for (int i = 0; i < 12; ++i) {
    if (std::strcmp(month, month_names[i]) == 0) tm.tm_mon = i;
  }
  if (tm.tm_mon < 0 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  return static_cast<std::int64_t>(timegm(&tm));
}

std::string iso8601(std::int64_t unix_ns) {
  auto tm = utc(unix_ns / 1'000'000'000);
  char out[96];
  std::snprintf(out, sizeof out, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>((unix_ns / 1'000'000) % 1000));
  return out;
}

range_request parse_range(std::optional<std::string_view> header, std::uint64_t size) {
  if (!header) return {};
  auto spec = trim(*header);
  if (!spec.starts_with("bytes=")) return {};
  spec.remove_prefix(6);
  if (spec.find(',') != std::string_view::npos) return {};  // several ranges: S3 sends the whole object
  auto dash = spec.find('-');
  if (dash == std::string_view::npos) return {};
  auto first_text = trim(spec.substr(0, dash));
  auto last_text = trim(spec.substr(dash + 1));
  range_request unsatisfiable{.kind = range_kind::unsatisfiable};
  if (first_text.empty()) {  // "-n": the last n bytes
    auto n = number(last_text);
    if (!n) return {};
    if (*n == 0 || size == 0) return unsatisfiable;
    auto length = std::min(*n, size);
    return {.kind = range_kind::satisfiable, .range = {.first = size - length, .length = length}};
  }
  auto first = number(first_text);
  if (!first) return {};
  std::uint64_t last = size == 0 ? 0 : size - 1;
  if (!last_text.empty()) {
    auto l = number(last_text);
    if (!l || *l < *first) return {};  // "5-3" is invalid syntax: ignored
    last = std::min(*l, last);
  }
  if (*first >= size) return unsatisfiable;
  return {.kind = range_kind::satisfiable, .range = {.first = *first, .length = last - *first + 1}};
}

bool etag_list_matches(std::string_view list, std::string_view etag) {
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = trim(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
    if (item == "*") return true;
    if (item.starts_with("W/")) item.remove_prefix(2);
    if (item.size() >= 2 && item.front() == '"' && item.back() == '"') item = item.substr(1, item.size() - 2);
    if (item == etag) return true;
  }
  return false;
}

precondition check_preconditions(const header_list& headers, std::string_view etag, std::int64_t modified_s,
                                 bool get_or_head) {
  auto if_match = find_header(headers, "if-match");
  if (if_match && !etag_list_matches(*if_match, etag)) return precondition::failed;
  if (!if_match) {
    auto since = find_header(headers, "if-unmodified-since");
    auto t = since ? parse_http_date(*since) : std::nullopt;
    if (t && modified_s > *t) return precondition::failed;
  }
  auto none_match = find_header(headers, "if-none-match");
  if (none_match) {
    if (etag_list_matches(*none_match, etag)) return get_or_head ? precondition::not_modified : precondition::failed;
  } else if (get_or_head) {
    auto since = find_header(headers, "if-modified-since");
    auto t = since ? parse_http_date(*since) : std::nullopt;
    if (t && modified_s <= *t) return precondition::not_modified;
  }
  return precondition::proceed;
}

bool if_range_holds(const header_list& headers, std::string_view etag, std::int64_t modified_s) {
  auto value = find_header(headers, "if-range");
  if (!value) return true;
  auto v = trim(*value);
  if (v.starts_with('"') || v.starts_with("W/")) return etag_list_matches(v, etag) && !v.starts_with("W/");
  auto t = parse_http_date(v);
  return t && modified_s <= *t;
}

}  // namespace sluice::s3
