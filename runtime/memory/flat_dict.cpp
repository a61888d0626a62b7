// FlatDict: encoding (dict_builder), validation and decoding (dict_view),
// and DLPack interop. The layout is the grammar in docs/values.md.
#include "runtime/memory/flat_dict.hpp"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/assert.hpp"

namespace sluice {
namespace {

namespace fd = flat_dict;

// ---- small pure helpers ----------------------------------------------------

template <class T>
void put_le(std::byte* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  }
}

template <class T>
T get_le(const std::byte* in) noexcept {
  T value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    value = static_cast<T>(value | static_cast<T>(static_cast<T>(in[i]) << (8 * i)));
  }
  return value;
}

constexpr std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) noexcept {
  return (n + alignment - 1) / alignment * alignment;
}

bool is_aligned(const void* p, std::size_t alignment) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
}

/// True when [offset, offset + length) lies inside [lo, hi), overflow-safe.
constexpr bool within(std::uint64_t offset, std::uint64_t length, std::uint64_t lo,
                      std::uint64_t hi) noexcept {
  return offset >= lo && offset <= hi && length <= hi - offset;
}

bool has_data(field_kind kind) noexcept {
  return kind == field_kind::string || kind == field_kind::bytes || kind == field_kind::tensor;
}

std::uint64_t meta_block_bytes(std::size_t ndim) noexcept {
  return fd::meta_fixed_bytes + 2 * sizeof(std::int64_t) * ndim;
}

std::string format_dims(std::span<const std::int64_t> dims) {
  std::string out = "(";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i != 0) out += ", ";
    out += std::to_string(dims[i]);
  }
  return out + ")";
}

std::string quoted(std::string_view name) {
  constexpr std::size_t shown_max = 40;  // keep messages readable
  std::string out = "'";
  out += name.substr(0, shown_max);
  if (name.size() > shown_max) out += "...";
  return out + "'";
}

// ---- tensor shape arithmetic (shared by writer and reader) ----------------

/// Bytes of a C-contiguous tensor, or nullopt when an extent is negative or
/// the product of the non-zero extents times the itemsize passes
/// dict_encoded_bytes_max (which also bounds every canonical stride).
std::optional<std::uint64_t> tensor_bytes(dtype type, std::span<const std::int64_t> shape) {
  std::uint64_t product = itemsize_bytes(type);
  bool empty = false;
  for (std::int64_t extent : shape) {
    if (extent < 0) return std::nullopt;
    if (extent == 0) {
      empty = true;
      continue;
    }
    auto e = static_cast<std::uint64_t>(extent);
    if (e > dict_encoded_bytes_max / product) return std::nullopt;
    product *= e;
  }
  return empty ? 0 : product;
}

/// The compact row-major strides of `shape`. REQUIRES: tensor_bytes(shape)
/// succeeded, so no product overflows.
void canonical_strides(std::span<const std::int64_t> shape, std::span<std::int64_t> out) {
  SLUICE_ASSERT(out.size() == shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    out[i] = stride;
    stride *= shape[i];
  }
}

/// C-contiguous as frameworks mean it: an empty tensor has any strides;
/// otherwise extent-1 dimensions may carry any stride and the others must
/// be the canonical ones.
bool is_c_contiguous(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

/// Checks a writer's tensor metadata; returns its byte count.
result<std::uint64_t> validate_tensor(std::string_view name, const tensor_info& info) {
  const std::string field = "field " + quoted(name) + ": ";
  if (!is_known(info.dtype)) {
    return fail(errc::invalid_argument, field + "unsupported tensor " + to_string(info.dtype));
  }
  if (info.device != device{}) {
    return fail(errc::invalid_argument,
                field + "tensor is on device type " +
                    std::to_string(static_cast<std::int32_t>(info.device.type)) + " id " +
                    std::to_string(info.device.id) +
                    "; only the CPU (type 1, id 0) is supported, copy it to host memory first");
  }
  if (info.shape.size() > tensor_ndim_max) {
    return fail(errc::invalid_argument, field + "tensor has " + std::to_string(info.shape.size()) +
                                            " dimensions; the limit is " +
                                            std::to_string(tensor_ndim_max));
  }
  auto bytes = tensor_bytes(info.dtype, info.shape);
  if (!bytes) {
    return fail(errc::invalid_argument, field + "shape " + format_dims(info.shape) +
                                            " has a negative extent or exceeds " +
                                            std::to_string(dict_encoded_bytes_max) + " bytes");
  }
  if (info.strides &&
      (info.strides->size() != info.shape.size() || !is_c_contiguous(info.shape, *info.strides))) {
    return fail(errc::invalid_argument, field + "strides " + format_dims(*info.strides) +
                                            " are not C-contiguous for shape " +
                                            format_dims(info.shape) +
                                            "; make the tensor contiguous first");
  }
  return *bytes;
}

result<void> check_name_form(std::string_view name) {
  if (name.empty()) {
    return fail(errc::invalid_argument, "a field name is empty; give every field a non-empty name");
  }
  if (name.size() > dict_name_bytes_max) {
    return fail(errc::invalid_argument, "field name " + quoted(name) + " is " +
                                            std::to_string(name.size()) + " bytes; the limit is " +
                                            std::to_string(dict_name_bytes_max));
  }
  if (name.starts_with(dict_reserved_prefix)) {
    return fail(errc::invalid_argument,
                "field name " + quoted(name) +
                    " is reserved (names starting with \"__\" belong to Sluice); rename it");
  }
  return {};
}

result<std::uint64_t> gathered_bytes(std::string_view name,
                                     std::span<const std::span<const std::byte>> parts) {
  if (parts.size() > dict_gather_parts_max) {
    return fail(errc::invalid_argument,
                "field " + quoted(name) + " is gathered from " + std::to_string(parts.size()) +
                    " buffers; the limit is " + std::to_string(dict_gather_parts_max));
  }
  std::uint64_t total = 0;
  for (auto part : parts) {
    if (part.size() > dict_encoded_bytes_max - total) {
      return fail(errc::invalid_argument, "field " + quoted(name) + " is larger than " +
                                              std::to_string(dict_encoded_bytes_max) + " bytes");
    }
    total += part.size();
  }
  return total;
}

// ---- layout of an encoding -------------------------------------------------

struct areas {
  std::uint64_t meta_offset = 0;
  std::uint64_t names_offset = 0;
  std::uint64_t data_offset = 0;
  std::uint64_t total = 0;
};

areas plan_areas(const std::vector<detail::pending_field>& fields) {
  areas a;
  a.meta_offset = fd::entry_offset(fields.size());
  std::uint64_t meta = 0;
  std::uint64_t names = 0;
  for (const auto& f : fields) {
    if (f.kind == field_kind::tensor) meta += meta_block_bytes(f.shape.size());
    names += f.name.size();
  }
  a.names_offset = a.meta_offset + meta;
  a.data_offset = align_up(a.names_offset + names, dict_data_alignment);
  std::uint64_t cursor = a.data_offset;
  for (const auto& f : fields) {
    if (has_data(f.kind)) cursor = align_up(cursor, dict_data_alignment) + f.data_bytes;
  }
  a.total = cursor;
  return a;
}

/// Where the next name, metadata block and data area go.
struct cursors {
  std::uint64_t meta = 0;
  std::uint64_t names = 0;
  std::uint64_t data = 0;
};

void write_header(std::byte* out, const areas& a, std::size_t field_count) {
  put_le<std::uint32_t>(out + fd::header_at::magic, fd::magic);
  put_le<std::uint16_t>(out + fd::header_at::version, fd::version);
  put_le<std::uint16_t>(out + fd::header_at::entry_bytes, fd::entry_bytes);
  put_le<std::uint32_t>(out + fd::header_at::field_count, static_cast<std::uint32_t>(field_count));
  put_le<std::uint64_t>(out + fd::header_at::total_bytes, a.total);
  put_le<std::uint64_t>(out + fd::header_at::meta_offset, a.meta_offset);
  put_le<std::uint64_t>(out + fd::header_at::names_offset, a.names_offset);
  put_le<std::uint64_t>(out + fd::header_at::data_offset, a.data_offset);
}

/// Writes a tensor's metadata block at `at`; returns its size.
std::uint64_t write_meta(std::byte* at, const detail::pending_field& f) {
  const std::size_t ndim = f.shape.size();
  at[0] = static_cast<std::byte>(f.dtype.code);
  at[1] = static_cast<std::byte>(f.dtype.bits);
  put_le<std::uint16_t>(at + 2, f.dtype.lanes);
  put_le<std::uint32_t>(at + 4, static_cast<std::uint32_t>(ndim));
  std::int64_t strides[tensor_ndim_max] = {};
  canonical_strides(f.shape, std::span{strides, ndim});
  std::byte* dims = at + fd::meta_fixed_bytes;
  for (std::size_t i = 0; i < ndim; ++i) {
    put_le<std::uint64_t>(dims + 8 * i, static_cast<std::uint64_t>(f.shape[i]));
    put_le<std::uint64_t>(dims + 8 * (ndim + i), static_cast<std::uint64_t>(strides[i]));
  }
  return meta_block_bytes(ndim);
}

/// Copies a field's data (gathered) to its aligned place, zeroing the pad
/// before it so an encoding never carries stale bytes.
std::uint64_t write_data(std::byte* out, const detail::pending_field& f, cursors& c) {
  const std::uint64_t start = align_up(c.data, dict_data_alignment);
  std::memset(out + c.data, 0, start - c.data);
  std::uint64_t at = start;
  if (f.kind == field_kind::string) {
    if (!f.text.empty()) std::memcpy(out + at, f.text.data(), f.text.size());
    at += f.text.size();
  }
  for (auto part : f.parts) {
    if (!part.empty()) std::memcpy(out + at, part.data(), part.size());
    at += part.size();
  }
  SLUICE_ASSERT(at - start == f.data_bytes);
  c.data = at;
  return start;
}

void write_field(std::byte* out, std::size_t index, const detail::pending_field& f, cursors& c) {
  std::byte* entry = out + fd::entry_offset(index);
  entry[fd::entry_at::kind] = static_cast<std::byte>(f.kind);
  put_le<std::uint16_t>(entry + fd::entry_at::name_length,
                        static_cast<std::uint16_t>(f.name.size()));
  put_le<std::uint64_t>(entry + fd::entry_at::name_offset, c.names);
  std::memcpy(out + c.names, f.name.data(), f.name.size());
  c.names += f.name.size();
  put_le<std::uint64_t>(entry + fd::entry_at::scalar, f.scalar_bits);
  if (f.kind == field_kind::tensor) {
    put_le<std::uint64_t>(entry + fd::entry_at::meta_offset, c.meta);
    c.meta += write_meta(out + c.meta, f);
  }
  if (has_data(f.kind)) {
    put_le<std::uint64_t>(entry + fd::entry_at::data_offset, write_data(out, f, c));
    put_le<std::uint64_t>(entry + fd::entry_at::data_length, f.data_bytes);
  }
}

}  // namespace

// ---- vocabulary ------------------------------------------------------------

std::string_view to_string(field_kind kind) noexcept {
  switch (kind) {
    case field_kind::int64: return "int64";
    case field_kind::float64: return "float64";
    case field_kind::boolean: return "bool";
    case field_kind::string: return "string";
    case field_kind::bytes: return "bytes";
    case field_kind::tensor: return "tensor";
  }
  return "unknown";
}

bool is_known(dtype type) noexcept {
  if (type.lanes != 1) return false;
  switch (type.code) {
    case dtype_code::signed_int:
    case dtype_code::unsigned_int:
      return type.bits == 8 || type.bits == 16 || type.bits == 32 || type.bits == 64;
    case dtype_code::ieee_float: return type.bits == 16 || type.bits == 32 || type.bits == 64;
    case dtype_code::bfloat: return type.bits == 16;
    case dtype_code::boolean: return type.bits == 8;
  }
  return false;
}

std::uint64_t itemsize_bytes(dtype type) noexcept {
  SLUICE_ASSERT(is_known(type));
  return std::uint64_t{type.bits} / 8 * type.lanes;
}

std::string to_string(dtype type) {
  if (is_known(type)) {
    static constexpr std::string_view names[] = {"int", "uint", "float", "", "bfloat", "", "bool"};
    std::string out{names[static_cast<std::size_t>(type.code)]};
    return type.code == dtype_code::boolean ? out : out + std::to_string(type.bits);
  }
  return "dtype(code=" + std::to_string(static_cast<unsigned>(type.code)) +
         ", bits=" + std::to_string(type.bits) + ", lanes=" + std::to_string(type.lanes) + ")";
}

std::uint64_t tensor_view::element_count() const noexcept {
  std::uint64_t n = 1;
  for (std::int64_t extent : shape) n *= static_cast<std::uint64_t>(extent);
  return n;
}

tensor_info tensor_view::info() const {
  return tensor_info{dtype, std::vector<std::int64_t>(shape.begin(), shape.end()),
                     std::vector<std::int64_t>(strides.begin(), strides.end()), device};
}

// ---- dict_builder ----------------------------------------------------------

result<void> dict_builder::check_new_name(std::string_view name) const {
  if (auto form = check_name_form(name); !form) return form;
  if (names_.contains(name)) {
    return fail(errc::invalid_argument,
                "field " + quoted(name) + " is already in this dict; names must be unique");
  }
  return {};
}

result<void> dict_builder::admit(detail::pending_field field) {
  if (fields_.size() >= dict_fields_max) {
    return fail(errc::invalid_argument, "field " + quoted(field.name) + " would be field " +
                                            std::to_string(fields_.size() + 1) + "; the limit is " +
                                            std::to_string(dict_fields_max));
  }
  if (auto name = check_new_name(field.name); !name) return name;
  // Entry, name, metadata, data and the worst-case alignment pad.
  const std::uint64_t bound = fd::entry_bytes + field.name.size() +
                              meta_block_bytes(field.shape.size()) + field.data_bytes +
                              dict_data_alignment;
  const std::uint64_t base =
      encoded_bytes_bound_ == 0 ? fd::header_bytes + dict_data_alignment : encoded_bytes_bound_;
  if (field.data_bytes > dict_encoded_bytes_max || bound > dict_encoded_bytes_max - base) {
    return fail(errc::invalid_argument, "field " + quoted(field.name) +
                                            " would make the dict larger than " +
                                            std::to_string(dict_encoded_bytes_max) + " bytes");
  }
  encoded_bytes_bound_ = base + bound;
  names_.insert(field.name);
  fields_.push_back(std::move(field));
  return {};
}

result<void> dict_builder::add_int64(std::string_view name, std::int64_t value) {
  return admit({.name = std::string{name},
                .kind = field_kind::int64,
                .scalar_bits = static_cast<std::uint64_t>(value)});
}

result<void> dict_builder::add_float64(std::string_view name, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return admit({.name = std::string{name}, .kind = field_kind::float64, .scalar_bits = bits});
}

result<void> dict_builder::add_bool(std::string_view name, bool value) {
  return admit(
      {.name = std::string{name}, .kind = field_kind::boolean, .scalar_bits = value ? 1u : 0u});
}

result<void> dict_builder::add_string(std::string_view name, std::string_view text) {
  return admit({.name = std::string{name},
                .kind = field_kind::string,
                .text = std::string{text},
                .data_bytes = text.size()});
}

result<void> dict_builder::add_bytes(std::string_view name, std::span<const std::byte> bytes) {
  return add_bytes(name, std::span{&bytes, 1});
}

result<void> dict_builder::add_bytes(std::string_view name,
                                     std::initializer_list<std::span<const std::byte>> parts) {
  return add_bytes(name, std::span{parts.begin(), parts.size()});
}

result<void> dict_builder::add_bytes(std::string_view name,
                                     std::span<const std::span<const std::byte>> parts) {
  auto bytes = gathered_bytes(name, parts);
  if (!bytes) return std::move(bytes).error();
  return admit({.name = std::string{name},
                .kind = field_kind::bytes,
                .parts = std::vector<std::span<const std::byte>>(parts.begin(), parts.end()),
                .data_bytes = *bytes});
}

result<void> dict_builder::add_tensor(std::string_view name, const tensor_info& info,
                                      std::span<const std::byte> data) {
  return add_tensor(name, info, std::span{&data, 1});
}

result<void> dict_builder::add_tensor(std::string_view name, const tensor_info& info,
                                      std::initializer_list<std::span<const std::byte>> parts) {
  return add_tensor(name, info, std::span{parts.begin(), parts.size()});
}

result<void> dict_builder::add_tensor(std::string_view name, const tensor_info& info,
                                      std::span<const std::span<const std::byte>> parts) {
  auto needed = validate_tensor(name, info);
  if (!needed) return std::move(needed).error();
  auto supplied = gathered_bytes(name, parts);
  if (!supplied) return std::move(supplied).error();
  if (*supplied != *needed) {
    return fail(errc::invalid_argument,
                "field " + quoted(name) + ": shape " + format_dims(info.shape) + " of " +
                    to_string(info.dtype) + " needs " + std::to_string(*needed) + " bytes but " +
                    std::to_string(*supplied) + " were given");
  }
  return admit({.name = std::string{name},
                .kind = field_kind::tensor,
                .parts = std::vector<std::span<const std::byte>>(parts.begin(), parts.end()),
                .data_bytes = *supplied,
                .dtype = info.dtype,
                .shape = info.shape});
}

std::uint64_t dict_builder::encoded_size() const {
  return plan_areas(fields_).total;
}

result<void> dict_builder::encode_into(std::span<std::byte> out) const {
  const areas a = plan_areas(fields_);
  if (out.size() != a.total) {
    return fail(errc::invalid_argument, "output region is " + std::to_string(out.size()) +
                                            " bytes but the dict encodes to " +
                                            std::to_string(a.total) +
                                            "; allocate encoded_size() bytes");
  }
  if (!is_aligned(out.data(), dict_data_alignment)) {
    return fail(errc::invalid_argument,
                "output region does not start on a 64-byte boundary; "
                "allocate it with 64-byte alignment");
  }
  std::byte* base = out.data();
  std::memset(base, 0, a.data_offset);
  write_header(base, a, fields_.size());
  cursors c{.meta = a.meta_offset, .names = a.names_offset, .data = a.data_offset};
  for (std::size_t i = 0; i < fields_.size(); ++i) write_field(base, i, fields_[i], c);
  SLUICE_ASSERT(c.meta == a.names_offset);
  SLUICE_ASSERT(c.data == a.total);
  return {};
}

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
  if (out.name.starts_with(dict_reserved_prefix)) return malformed_field(index, "name is reserved");
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

// ---- DLPack ----------------------------------------------------------------

static_assert(kDLInt == static_cast<int>(dtype_code::signed_int));
static_assert(kDLUInt == static_cast<int>(dtype_code::unsigned_int));
static_assert(kDLFloat == static_cast<int>(dtype_code::ieee_float));
static_assert(kDLBfloat == static_cast<int>(dtype_code::bfloat));
static_assert(dlpack_bool_code == static_cast<int>(dtype_code::boolean));
static_assert(kDLCPU == static_cast<int>(device_type::cpu));
static_assert(kDLCUDA == static_cast<int>(device_type::cuda));

DLDataType to_dlpack(dtype type) noexcept {
  return DLDataType{static_cast<std::uint8_t>(type.code), type.bits, type.lanes};
}

result<dtype> dtype_from_dlpack(DLDataType type) {
  const dtype out{static_cast<dtype_code>(type.code), type.bits, type.lanes};
  if (!is_known(out)) {
    return fail(errc::invalid_argument, "unsupported DLPack " + to_string(out));
  }
  return out;
}

DLTensor as_dltensor(const tensor_view& view) noexcept {
  DLTensor out{};
  // DLTensor has no const; consumers must treat all three as read-only.
  out.data = const_cast<std::byte*>(view.data.data());
  out.device = DLDevice{kDLCPU, 0};
  out.ndim = static_cast<int>(view.shape.size());
  out.dtype = to_dlpack(view.dtype);
  out.shape = const_cast<std::int64_t*>(view.shape.data());
  out.strides = const_cast<std::int64_t*>(view.strides.data());
  out.byte_offset = 0;
  return out;
}

void dlpack_deleter::operator()(DLManagedTensor* tensor) const noexcept {
  if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
}

namespace {
/// What a DLManagedTensor from to_dlpack owns.
struct dlpack_context {
  DLManagedTensor managed{};
  std::shared_ptr<const void> owner;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

void delete_dlpack_context(DLManagedTensor* self) {
  delete static_cast<dlpack_context*>(self->manager_ctx);
}
}  // namespace

dlpack_ptr to_dlpack(const tensor_view& view, std::shared_ptr<const void> owner) {
  auto context = std::make_unique<dlpack_context>();
  context->owner = std::move(owner);
  context->shape.assign(view.shape.begin(), view.shape.end());
  context->strides.assign(view.strides.begin(), view.strides.end());
  DLManagedTensor& managed = context->managed;
  managed.dl_tensor = as_dltensor(view);
  managed.dl_tensor.shape = context->shape.data();
  managed.dl_tensor.strides = context->strides.data();
  managed.manager_ctx = context.get();
  managed.deleter = &delete_dlpack_context;
  context.release();
  return dlpack_ptr{&managed};
}

result<tensor_info> tensor_info_from_dlpack(std::string_view name, const DLTensor& tensor) {
  const std::string field = "field " + quoted(name) + ": ";
  if (tensor.ndim < 0 || static_cast<std::size_t>(tensor.ndim) > tensor_ndim_max) {
    return fail(errc::invalid_argument, field + "DLPack tensor has " + std::to_string(tensor.ndim) +
                                            " dimensions; the limit is " +
                                            std::to_string(tensor_ndim_max));
  }
  const auto ndim = static_cast<std::size_t>(tensor.ndim);
  if (ndim > 0 && tensor.shape == nullptr) {
    return fail(errc::invalid_argument, field + "DLPack tensor has no shape");
  }
  auto type = dtype_from_dlpack(tensor.dtype);
  if (!type) return fail(errc::invalid_argument, field + type.error().message());
  tensor_info info;
  info.dtype = *type;
  info.device =
      device{static_cast<device_type>(tensor.device.device_type), tensor.device.device_id};
  info.shape.assign(tensor.shape, tensor.shape + ndim);
  if (tensor.strides != nullptr) info.strides.emplace(tensor.strides, tensor.strides + ndim);
  if (auto ok = validate_tensor(name, info); !ok) return std::move(ok).error();
  return info;
}

result<void> add_dltensor(dict_builder& builder, std::string_view name, const DLTensor& tensor) {
  auto info = tensor_info_from_dlpack(name, tensor);
  if (!info) return std::move(info).error();
  const std::uint64_t bytes = *tensor_bytes(info->dtype, info->shape);
  if (bytes == 0) return builder.add_tensor(name, *info, std::span<const std::byte>{});
  if (tensor.data == nullptr) {
    return fail(errc::invalid_argument, "field " + quoted(name) + ": DLPack tensor has no data");
  }
  const auto* first = static_cast<const std::byte*>(tensor.data) + tensor.byte_offset;
  return builder.add_tensor(name, *info, std::span{first, bytes});
}

}  // namespace sluice
