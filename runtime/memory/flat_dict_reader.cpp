// FlatDict's reader: validates an untrusted region (every offset, length,
// alignment and reserved byte) and builds a dict_view over it; field_view's
// typed accessors. The layout is the grammar in docs/values.md.
#include "runtime/memory/flat_dict.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/memory/flat_dict_detail.hpp"

namespace sluice {
namespace {

using namespace flat_dict_detail;

// ---- small pure helpers ----------------------------------------------------

template <class T>
T get_le(const std::byte* in) noexcept {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<T>(value | static_cast<T>(static_cast<T>(in[i]) << (8 * i)));
  }
  return value;
}

/// True when [offset, offset + length) lies inside [lo, hi), overflow-safe.
constexpr bool within(std::uint64_t offset, std::uint64_t length, std::uint64_t lo,
                      std::uint64_t hi) noexcept {
  return offset >= lo && offset <= hi && length <= hi - offset;
}

}  // namespace

// ---- field_view ------------------------------------------------------------

result<void> field_view::expect(field_kind wanted) const {
  if (record_.kind == wanted) return {};
  return fail(errc::invalid_argument, "field " + quoted(record_.name) + " is " +
                                          std::string{to_string(record_.kind)} + ", not " +
                                          std::string{to_string(wanted)});
}

result<std::int64_t> field_view::as_int64() const {
  if (auto ok = expect(field_kind::int64); !ok) return ok.error();
  return static_cast<std::int64_t>(record_.scalar_bits);
}

result<double> field_view::as_float64() const {
  if (auto ok = expect(field_kind::float64); !ok) return ok.error();
  double value = 0;
  std::memcpy(&value, &record_.scalar_bits, sizeof value);
  return value;
}

result<bool> field_view::as_bool() const {
  if (auto ok = expect(field_kind::boolean); !ok) return ok.error();
  return record_.scalar_bits != 0;
}

result<std::string_view> field_view::as_string() const {
  if (auto ok = expect(field_kind::string); !ok) return ok.error();
  return std::string_view{reinterpret_cast<const char*>(record_.data.data()), record_.data.size()};
}

result<std::span<const std::byte>> field_view::as_bytes() const {
  if (record_.kind == field_kind::string) return record_.data;
  if (auto ok = expect(field_kind::bytes); !ok) return ok.error();
  return record_.data;
}

result<tensor_view> field_view::as_tensor() const {
  if (auto ok = expect(field_kind::tensor); !ok) return ok.error();
  return tensor_view{.dtype = record_.dtype,
                     .shape = {record_.dims, record_.ndim},
                     .strides = {record_.dims + record_.ndim, record_.ndim},
                     .device = device{},
                     .data = record_.data};
}

// ---- dict_view: parsing untrusted regions -----------------------------------

namespace {

struct header_fields {
  std::uint32_t field_count = 0;
  std::uint64_t total = 0;
  std::uint64_t meta_offset = 0;
  std::uint64_t names_offset = 0;
  std::uint64_t data_offset = 0;
};

struct entry_fields {
  field_kind kind = field_kind::int64;
  std::uint64_t name_length = 0;
  std::uint64_t name_offset = 0;
  std::uint64_t scalar = 0;
  std::uint64_t meta_offset = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t data_length = 0;
};

error malformed(const std::string& what) {
  return fail(errc::protocol, "malformed dict: " + what);
}

error malformed_field(std::size_t index, const std::string& what) {
  return malformed("field " + std::to_string(index) + ": " + what);
}

result<header_fields> check_areas(const header_fields& h) {
  if (h.meta_offset != fd::entry_offset(h.field_count)) {
    return malformed("metadata area starts at " + std::to_string(h.meta_offset) +
                     ", not right after the field table");
  }
  if (h.names_offset < h.meta_offset || h.data_offset < h.names_offset || h.total < h.data_offset) {
    return malformed("areas are out of order or past the end of the region");
  }
  if (h.data_offset % dict_data_alignment != 0) {
    return malformed("data area at " + std::to_string(h.data_offset) + " is not 64-byte aligned");
  }
  return h;
}

result<header_fields> read_header(std::span<const std::byte> region) {
  if (region.size() < fd::header_bytes) {
    return malformed("region of " + std::to_string(region.size()) +
                     " bytes is shorter than the 64-byte header (truncated, or not a dict)");
  }
  const std::byte* p = region.data();
  if (get_le<std::uint32_t>(p + fd::header_at::magic) != fd::magic) {
    return malformed("bad magic (expected \"SLDT\"); the region does not hold a dict");
  }
  const auto version = get_le<std::uint16_t>(p + fd::header_at::version);
  if (version != fd::version) {
    return fail(errc::protocol, "unsupported dict version " + std::to_string(version) +
                                    " (this build reads " + std::to_string(fd::version) + ")");
  }
  if (get_le<std::uint16_t>(p + fd::header_at::entry_bytes) != fd::entry_bytes ||
      get_le<std::uint32_t>(p + fd::header_at::reserved) != 0 ||
      get_le<std::uint64_t>(p + fd::header_at::reserved_tail) != 0 ||
      get_le<std::uint64_t>(p + fd::header_at::reserved_tail + 8) != 0) {
    return malformed("header sets reserved bytes or a foreign entry size");
  }
  header_fields h;
  h.field_count = get_le<std::uint32_t>(p + fd::header_at::field_count);
  h.total = get_le<std::uint64_t>(p + fd::header_at::total_bytes);
  h.meta_offset = get_le<std::uint64_t>(p + fd::header_at::meta_offset);
  h.names_offset = get_le<std::uint64_t>(p + fd::header_at::names_offset);
  h.data_offset = get_le<std::uint64_t>(p + fd::header_at::data_offset);
  if (h.field_count > dict_fields_max) {
    return malformed(std::to_string(h.field_count) + " fields; the limit is " +
                     std::to_string(dict_fields_max));
  }
  if (h.total != region.size()) {
    return malformed("header says " + std::to_string(h.total) + " bytes but the region has " +
                     std::to_string(region.size()) + " (truncated or corrupted)");
  }
  return check_areas(h);
}

result<entry_fields> read_entry(std::span<const std::byte> region, std::size_t index) {
  const std::byte* e = region.data() + fd::entry_offset(index);
  const auto kind = std::to_integer<std::uint8_t>(e[fd::entry_at::kind]);
  if (kind < static_cast<std::uint8_t>(field_kind::int64) ||
      kind > static_cast<std::uint8_t>(field_kind::tensor)) {
    return malformed_field(index, "unknown kind " + std::to_string(kind));
  }
  if (e[fd::entry_at::reserved8] != std::byte{0} ||
      get_le<std::uint32_t>(e + fd::entry_at::reserved32) != 0) {
    return malformed_field(index, "reserved bytes are set");
  }
  entry_fields out;
  out.kind = static_cast<field_kind>(kind);
  out.name_length = get_le<std::uint16_t>(e + fd::entry_at::name_length);
  out.name_offset = get_le<std::uint64_t>(e + fd::entry_at::name_offset);
  out.scalar = get_le<std::uint64_t>(e + fd::entry_at::scalar);
  out.meta_offset = get_le<std::uint64_t>(e + fd::entry_at::meta_offset);
  out.data_offset = get_le<std::uint64_t>(e + fd::entry_at::data_offset);
  out.data_length = get_le<std::uint64_t>(e + fd::entry_at::data_length);
  return out;
}

/// Slots a kind does not use must be zero, and a bool must be 0 or 1, so
/// a region has exactly one reading.
result<void> check_unused_slots(std::size_t index, const entry_fields& e) {
  const bool scalar = !has_data(e.kind);
  const bool clean = scalar
                         ? (e.meta_offset == 0 && e.data_offset == 0 && e.data_length == 0)
                         : (e.scalar == 0 && (e.kind == field_kind::tensor || e.meta_offset == 0));
  if (!clean) return malformed_field(index, "sets slots its kind does not use");
  if (e.kind == field_kind::boolean && e.scalar > 1) {
    return malformed_field(index, "bool value " + std::to_string(e.scalar) + " is neither 0 nor 1");
  }
  return {};
}

result<void> read_name(std::span<const std::byte> region, const header_fields& h, std::size_t index,
                       const entry_fields& e, cursors& c, detail::field_record& out) {
  if (e.name_length == 0 || e.name_length > dict_name_bytes_max) {
    return malformed_field(index,
                           "name length " + std::to_string(e.name_length) + " is out of range");
  }
  if (!within(e.name_offset, e.name_length, c.names, h.data_offset)) {
    return malformed_field(index, "name lies outside the name area or overlaps the name before it");
  }
  out.name = {reinterpret_cast<const char*>(region.data() + e.name_offset), e.name_length};
  // A name starting with dict_reserved_prefix is one of Sluice's own
  // fields (single_tensor_field): builders refuse them from users, but a
  // reader takes them.
  c.names = e.name_offset + e.name_length;
  return {};
}

result<void> read_data(std::span<const std::byte> region, const header_fields& h, std::size_t index,
                       const entry_fields& e, cursors& c, detail::field_record& out) {
  if (e.data_offset % dict_data_alignment != 0) {
    return malformed_field(index,
                           "data at " + std::to_string(e.data_offset) + " is not 64-byte aligned");
  }
  if (!within(e.data_offset, e.data_length, c.data, h.total)) {
    return malformed_field(index, "data lies outside the data area or overlaps the data before it");
  }
  out.data = region.subspan(e.data_offset, e.data_length);
  c.data = e.data_offset + e.data_length;
  return {};
}

/// Reads shape and strides (appended to `dims`) and checks them against
/// the dtype and the data length.
result<void> read_dims(const std::byte* block, std::size_t index, const entry_fields& e,
                       detail::field_record& out, std::vector<std::int64_t>& dims) {
  const std::size_t ndim = out.ndim;
  std::int64_t shape[tensor_ndim_max] = {};
  std::int64_t strides[tensor_ndim_max] = {};
  for (std::size_t i = 0; i < ndim; ++i) {
    shape[i] = static_cast<std::int64_t>(get_le<std::uint64_t>(block + 8 * i));
    strides[i] = static_cast<std::int64_t>(get_le<std::uint64_t>(block + 8 * (ndim + i)));
  }
  auto bytes = tensor_bytes(out.dtype, std::span{shape, ndim});
  if (!bytes || *bytes != e.data_length) {
    return malformed_field(index, "shape " + format_dims(std::span{shape, ndim}) + " of " +
                                      to_string(out.dtype) + " does not match " +
                                      std::to_string(e.data_length) + " data bytes");
  }
  std::int64_t expected[tensor_ndim_max] = {};
  canonical_strides(std::span{shape, ndim}, std::span{expected, ndim});
  if (!std::equal(strides, strides + ndim, expected)) {
    return malformed_field(index, "strides are not the compact row-major strides of the shape");
  }
  out.dims_index = static_cast<std::uint32_t>(dims.size());
  dims.insert(dims.end(), shape, shape + ndim);
  dims.insert(dims.end(), strides, strides + ndim);
  return {};
}

result<void> read_meta(std::span<const std::byte> region, const header_fields& h, std::size_t index,
                       const entry_fields& e, cursors& c, detail::field_record& out,
                       std::vector<std::int64_t>& dims) {
  if (e.meta_offset % fd::meta_alignment != 0 ||
      !within(e.meta_offset, fd::meta_fixed_bytes, c.meta, h.names_offset)) {
    return malformed_field(index,
                           "metadata lies outside the metadata area, is misaligned, "
                           "or overlaps the block before it");
  }
  const std::byte* block = region.data() + e.meta_offset;
  out.dtype = dtype{static_cast<dtype_code>(std::to_integer<std::uint8_t>(block[0])),
                    std::to_integer<std::uint8_t>(block[1]), get_le<std::uint16_t>(block + 2)};
  if (!is_known(out.dtype)) return malformed_field(index, "unsupported " + to_string(out.dtype));
  const auto ndim = get_le<std::uint32_t>(block + 4);
  if (ndim > tensor_ndim_max) {
    return malformed_field(index, std::to_string(ndim) + " dimensions; the limit is " +
                                      std::to_string(tensor_ndim_max));
  }
  if (!within(e.meta_offset, meta_block_bytes(ndim), c.meta, h.names_offset)) {
    return malformed_field(index, "metadata runs past the metadata area");
  }
  out.ndim = ndim;
  if (auto ok = read_dims(block + fd::meta_fixed_bytes, index, e, out, dims); !ok) return ok;
  c.meta = e.meta_offset + meta_block_bytes(ndim);
  return {};
}

result<detail::field_record> read_field(std::span<const std::byte> region, const header_fields& h,
                                        std::size_t index, cursors& c,
                                        std::vector<std::int64_t>& dims) {
  auto e = read_entry(region, index);
  if (!e) return std::move(e).error();
  if (auto ok = check_unused_slots(index, *e); !ok) return ok.error();
  detail::field_record out;
  out.kind = e->kind;
  out.scalar_bits = e->scalar;
  if (auto ok = read_name(region, h, index, *e, c, out); !ok) return ok.error();
  if (has_data(e->kind)) {
    if (auto ok = read_data(region, h, index, *e, c, out); !ok) return ok.error();
  }
  if (e->kind == field_kind::tensor) {
    if (auto ok = read_meta(region, h, index, *e, c, out, dims); !ok) return ok.error();
  }
  return out;
}

}  // namespace

/// Builds dict_views; a friend so views are only ever made by parsing.
struct dict_parser {
  static result<dict_view> parse(std::span<const std::byte> region);
  static result<void> index_names(dict_view& view);
};

result<void> dict_parser::index_names(dict_view& view) {
  auto& by_name = view.by_name_;
  by_name.resize(view.fields_.size());
  for (std::size_t i = 0; i < by_name.size(); ++i) by_name[i] = static_cast<std::uint32_t>(i);
  auto name_of = [&view](std::uint32_t i) { return view.fields_[i].name(); };
  std::sort(by_name.begin(), by_name.end(),
            [&name_of](std::uint32_t a, std::uint32_t b) { return name_of(a) < name_of(b); });
  auto same = std::adjacent_find(
      by_name.begin(), by_name.end(),
      [&name_of](std::uint32_t a, std::uint32_t b) { return name_of(a) == name_of(b); });
  if (same != by_name.end()) return malformed("two fields are named " + quoted(name_of(*same)));
  return {};
}

result<dict_view> dict_parser::parse(std::span<const std::byte> region) {
  if (!is_aligned(region.data(), dict_data_alignment)) {
    return fail(errc::invalid_argument,
                "dict region does not start on a 64-byte boundary; map or "
                "allocate it with 64-byte alignment");
  }
  auto h = read_header(region);
  if (!h) return std::move(h).error();
  dict_view view;
  view.region_ = region;
  std::vector<detail::field_record> records;
  records.reserve(h->field_count);
  cursors c{.meta = h->meta_offset, .names = h->names_offset, .data = h->data_offset};
  for (std::size_t i = 0; i < h->field_count; ++i) {
    auto record = read_field(region, *h, i, c, view.dims_);
    if (!record) return std::move(record).error();
    records.push_back(*record);
  }
  // dims_ is complete now; point each tensor at its shape and strides.
  view.fields_.reserve(records.size());
  for (auto& record : records) {
    if (record.kind == field_kind::tensor) record.dims = view.dims_.data() + record.dims_index;
    view.fields_.emplace_back(record);
  }
  if (auto ok = index_names(view); !ok) return ok.error();
  return view;
}

result<dict_view> dict_view::parse(std::span<const std::byte> region) {
  return dict_parser::parse(region);
}

const field_view* dict_view::find(std::string_view name) const noexcept {
  auto at = std::lower_bound(
      by_name_.begin(), by_name_.end(), name,
      [this](std::uint32_t i, std::string_view key) { return fields_[i].name() < key; });
  if (at == by_name_.end() || fields_[*at].name() != name) return nullptr;
  return &fields_[*at];
}

}  // namespace sluice
