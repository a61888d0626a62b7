#include "actors/s3/request.hpp"

#include <cctype>

namespace sluice::s3 {

std::optional<std::string_view> find_header(const header_list& headers, std::string_view name) {
  for (const auto& [n, v] : headers) {
    if (n.size() != name.size()) continue;
    bool same = true;
    for (std::size_t i = 0; i < n.size() && same; ++i) {
      same = std::tolower(static_cast<unsigned char>(n[i])) == std::tolower(static_cast<unsigned char>(name[i]));
    }
    if (same) return std::string_view{v};
  }
  return std::nullopt;
}

bool parsed_request::has(std::string_view name) const {
  for (const auto& [n, v] : query) {
    if (n == name) return true;
  }
  return false;
}

std::optional<std::string> parsed_request::param(std::string_view name) const {
  for (const auto& [n, v] : query) {
    if (n == name) return v;
  }
  return std::nullopt;
}

namespace {
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::optional<std::vector<std::pair<std::string, std::string>>> parse_query(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    auto amp = text.find('&');
    auto item = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view{} : text.substr(amp + 1);
    if (item.empty()) continue;
    auto eq = item.find('=');
    auto name = percent_decode(item.substr(0, eq), true);
    auto value = percent_decode(eq == std::string_view::npos ? std::string_view{} : item.substr(eq + 1), true);
    if (!name || !value) return std::nullopt;
    out.emplace_back(std::move(*name), std::move(*value));
  }
  return out;
}

/// The bucket named by a virtual-host Host header, or "".
std::string host_bucket(const header_list& headers, std::string_view domain) {
  auto host = find_header(headers, "host");
  if (domain.empty() || !host) return {};
  auto name = host->substr(0, host->rfind(':') == std::string_view::npos || host->back() == ']'
                                  ? host->size()
                                  : host->rfind(':'));
  if (name.size() <= domain.size() + 1 || !name.ends_with(domain)) return {};
  if (name[name.size() - domain.size() - 1] != '.') return {};
  return std::string{name.substr(0, name.size() - domain.size() - 1)};
}
}  // namespace

std::optional<std::string> percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = hex_value(text[i + 1]);
      int lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus_is_space && c == '+' ? ' ' : c;
    }
  }
  return out;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      out += c;
    } else {
      out += '%';
      out += digits[u >> 4];
      out += digits[u & 0xf];
    }
  }
  return out;
}

std::optional<parsed_request> parse_request(const request_head& head, std::string_view domain) {
  parsed_request r{.method = head.method, .headers = head.headers, .content_length = head.content_length};
  std::string_view target = head.target;
  auto question = target.find('?');
  auto raw_path = target.substr(0, question);
  if (raw_path.empty() || raw_path.front() != '/') return std::nullopt;
  auto path = percent_decode(raw_path, false);
  auto query = parse_query(question == std::string_view::npos ? std::string_view{} : target.substr(question + 1));
  if (!path || !query) return std::nullopt;
  r.query = std::move(*query);
  r.resource = *path;
  std::string_view rest = std::string_view{*path}.substr(1);
  r.bucket = host_bucket(head.headers, domain);
  if (r.bucket.empty()) {
    auto slash = rest.find('/');
    r.bucket = std::string{rest.substr(0, slash)};
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  }
  r.key = std::string{rest};
  return r;
}

}  // namespace sluice::s3
