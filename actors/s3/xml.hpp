// XML for S3 bodies: a writer for responses, and a small strict parser for
// the request bodies S3 defines (Delete, CompleteMultipartUpload,
// CreateBucketConfiguration). The parser knows elements, text,
// attributes (ignored), the XML declaration, comments and the five named
// and numeric character references; nothing else (no DTDs, no CDATA).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::s3 {

/// Text escaped for element content and attribute values.
std::string xml_escape(std::string_view text);

/// Builds a document: `<?xml ...?>` then elements in the S3 namespace.
class xml_writer {
 public:
  /// Opens the root element with S3's xmlns.
  explicit xml_writer(std::string_view root);
  void open(std::string_view name);
  void close(std::string_view name);
  void leaf(std::string_view name, std::string_view text);
  /// Closes the root and returns the document.
  std::string finish();

 private:
  std::string root_;
  std::string out_;
};

struct xml_node {
  std::string name{};  ///< the local name: a prefix ("s3:") is dropped
  std::string text{};  ///< the text directly inside, references decoded
  std::vector<xml_node> children{};

  /// The first child named `child`, or null.
  const xml_node* find(std::string_view child) const;
};

/// Bounds that keep a hostile body from costing more than a valid one.
struct xml_limits {
  std::size_t depth_max = 8;           ///< S3's bodies nest 3 deep
  std::size_t nodes_max = 40'000;      ///< 10,000 parts × (Part, PartNumber, ETag) + slack
};

/// The root element, or nullopt for anything that is not well-formed
/// within `limits`.
std::optional<xml_node> parse_xml(std::string_view text, const xml_limits& limits = {});

}  // namespace sluice::s3
