#include "runtime/storage/meta_record.hpp"

#include <charconv>

#include "runtime/assert.hpp"

namespace sluice {
namespace {

constexpr std::string_view magic = "sluice-meta 1";

/// The next line of `text` (without its NL), advancing `text`; nullopt
/// when no NL is left.
std::optional<std::string_view> next_line(std::string_view& text) {
  auto nl = text.find('\n');
  if (nl == std::string_view::npos) return std::nullopt;
  auto line = text.substr(0, nl);
  text.remove_prefix(nl + 1);
  return line;
}

template <class T>
bool parse_number(std::optional<std::string_view> line, T& out) {
  if (!line || line->empty()) return false;
  auto [end, ec] = std::from_chars(line->data(), line->data() + line->size(), out);
  return ec == std::errc{} && end == line->data() + line->size();
}

}  // namespace

std::string encode_meta_record(const meta_record& r) {
  std::string out{magic};
  out += '\n';
  out += std::to_string(r.identity.size) + '\n';
  out += std::to_string(r.identity.mtime_ns) + '\n';
  out += std::to_string(r.identity.inode) + '\n';
  out += r.meta.etag + '\n';
  for (const auto& [name, value] : r.meta.headers) {
    SLUICE_ASSERT(name.find_first_of("\t\r\n") == std::string::npos);
    SLUICE_ASSERT(value.find_first_of("\r\n") == std::string::npos);
    out += name + '\t' + value + '\n';
  }
  return out;
}

std::optional<meta_record> decode_meta_record(std::string_view text) {
  if (next_line(text) != magic) return std::nullopt;
  meta_record r;
  if (!parse_number(next_line(text), r.identity.size)) return std::nullopt;
  if (!parse_number(next_line(text), r.identity.mtime_ns)) return std::nullopt;
  if (!parse_number(next_line(text), r.identity.inode)) return std::nullopt;
  auto etag = next_line(text);
  if (!etag || etag->empty()) return std::nullopt;
  r.meta.etag = std::string{*etag};
  while (!text.empty()) {
    auto line = next_line(text);
    if (!line) return std::nullopt;
    auto tab = line->find('\t');
    if (tab == std::string_view::npos || tab == 0) return std::nullopt;
    r.meta.headers.emplace_back(std::string{line->substr(0, tab)}, std::string{line->substr(tab + 1)});
  }
  return r;
}

}  // namespace sluice
