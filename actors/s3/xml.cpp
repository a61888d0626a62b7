#include "actors/s3/xml.hpp"

#include <charconv>
#include <cstdint>

namespace sluice::s3 {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

xml_writer::xml_writer(std::string_view root) : root_(root) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<";
  out_ += root;
  out_ += " xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">";
}

void xml_writer::open(std::string_view name) {
  out_ += '<';
  out_ += name;
  out_ += '>';
}

void xml_writer::close(std::string_view name) {
  out_ += "</";
  out_ += name;
  out_ += '>';
}

void xml_writer::leaf(std::string_view name, std::string_view text) {
  open(name);
  out_ += xml_escape(text);
  close(name);
}

std::string xml_writer::finish() {
  close(root_);
  return std::move(out_);
}

const xml_node* xml_node::find(std::string_view child) const {
  for (const auto& c : children) {
    if (c.name == child) return &c;
  }
  return nullptr;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
         c == '.' || c == ':' || static_cast<unsigned char>(c) >= 0x80;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

class parser {
 public:
  parser(std::string_view text, const xml_limits& limits) : s_(text), limits_(limits) {}

  std::optional<xml_node> document() {
    skip_misc();
    xml_node root;
    if (!element(root, 1)) return std::nullopt;
    skip_misc();
    if (pos_ != s_.size()) return std::nullopt;
    return root;
  }

 private:
  bool starts(std::string_view what) const { return s_.substr(pos_).starts_with(what); }
  void skip_space() {
    while (pos_ < s_.size() && is_space(s_[pos_])) ++pos_;
  }

  /// Whitespace, the declaration and comments between elements.
  void skip_misc() {
    for (;;) {
      skip_space();
      std::string_view end = starts("<?") ? "?>" : starts("<!--") ? "-->" : "";
      if (end.empty()) return;
      auto found = s_.find(end, pos_ + 2);
      if (found == std::string_view::npos) {
        pos_ = s_.size() + 1;  // unterminated: fails the document
        return;
      }
      pos_ = found + end.size();
    }
  }

  std::optional<std::string> name() {
    auto start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    if (pos_ == start) return std::nullopt;
    return std::string{s_.substr(start, pos_ - start)};
  }

  static std::string local(const std::string& qualified) {
    auto colon = qualified.rfind(':');
    return colon == std::string::npos ? qualified : qualified.substr(colon + 1);
  }

  bool attributes() {
    for (;;) {
      skip_space();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == '>' || s_[pos_] == '/') return true;
      if (!name()) return false;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '=') return false;
      ++pos_;
      skip_space();
      if (pos_ >= s_.size() || (s_[pos_] != '"' && s_[pos_] != '\'')) return false;
      auto close = s_.find(s_[pos_], pos_ + 1);
      if (close == std::string_view::npos) return false;
      pos_ = close + 1;
    }
  }

  bool reference(std::string& out) {
    auto semi = s_.find(';', pos_);
    if (semi == std::string_view::npos || semi - pos_ > 10) return false;
    auto ref = s_.substr(pos_ + 1, semi - pos_ - 1);
    pos_ = semi + 1;
    if (ref == "lt") return out += '<', true;
    if (ref == "gt") return out += '>', true;
    if (ref == "amp") return out += '&', true;
    if (ref == "quot") return out += '"', true;
    if (ref == "apos") return out += '\'', true;
    if (ref.size() < 2 || ref[0] != '#') return false;
    bool hex = ref[1] == 'x';
    auto digits = ref.substr(hex ? 2 : 1);
    std::uint32_t cp = 0;
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), cp, hex ? 16 : 10);
    if (ec != std::errc{} || end != digits.data() + digits.size() || cp == 0 || cp > 0x10ffff) return false;
    append_utf8(out, cp);
    return true;
  }

  bool element(xml_node& node, std::size_t depth) {
    if (depth > limits_.depth_max || ++nodes_ > limits_.nodes_max) return false;
    if (pos_ >= s_.size() || s_[pos_] != '<') return false;
    ++pos_;
    auto qualified = name();
    if (!qualified || !attributes()) return false;
    node.name = local(*qualified);
    if (starts("/>")) {
      pos_ += 2;
      return true;
    }
    ++pos_;  // '>'
    return content(node, *qualified, depth);
  }

  bool content(xml_node& node, const std::string& qualified, std::size_t depth) {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == '&') {
        if (!reference(node.text)) return false;
      } else if (starts("</")) {
        pos_ += 2;
        auto closing = name();
        skip_space();
        if (!closing || *closing != qualified || pos_ >= s_.size() || s_[pos_] != '>') return false;
        ++pos_;
        return true;
      } else if (starts("<!--")) {
        auto end = s_.find("-->", pos_ + 4);
        if (end == std::string_view::npos) return false;
        pos_ = end + 3;
      } else if (c == '<') {
        if (starts("<!") || starts("<?")) return false;
        node.children.emplace_back();
        if (!element(node.children.back(), depth + 1)) return false;
      } else {
        node.text += c;
        ++pos_;
      }
    }
    return false;
  }

  std::string_view s_;
  xml_limits limits_;
  std::size_t pos_ = 0;
  std::size_t nodes_ = 0;
};

}  // namespace

std::optional<xml_node> parse_xml(std::string_view text, const xml_limits& limits) {
  return parser{text, limits}.document();
}

}  // namespace sluice::s3
