// FlatDict: the vocabulary and encoding (dict_builder); the reader is
// flat_dict_reader.cpp, DLPack interop flat_dict_dlpack.cpp. The layout is
// the grammar in docs/values.md.
#include "runtime/memory/flat_dict.hpp"

#include <cstring>
#include <string>

#include "runtime/assert.hpp"
#include "runtime/memory/flat_dict_detail.hpp"

namespace sluice {
namespace {

using namespace flat_dict_detail;

// ---- small pure helpers ----------------------------------------------------

template <class T>
void put_le(std::byte* out, T value) noexcept {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out[i] = static_cast<std::byte>((value >> (8 * i)) & 0xff);
  }
}

constexpr std::uint64_t align_up(std::uint64_t n, std::uint64_t alignment) noexcept {
  return (n + alignment - 1) / alignment * alignment;
}

result<void> check_name_form(std::string_view name, bool sluice_names) {
  if (name.empty()) {
    return fail(errc::invalid_argument, "a field name is empty; give every field a non-empty name");
  }
  if (name.size() > dict_name_bytes_max) {
    return fail(errc::invalid_argument, "field name " + quoted(name) + " is " +
                                            std::to_string(name.size()) + " bytes; the limit is " +
                                            std::to_string(dict_name_bytes_max));
  }
  if (name.starts_with(dict_reserved_prefix) && !sluice_names) {
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
  // Room only: the caller writes the elements in place afterwards.
  if (f.room_only) at += f.data_bytes;
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
    case dtype_code::complex: return type.bits == 64 || type.bits == 128;
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
    static constexpr std::string_view names[] = {"int", "uint", "float", "", "bfloat", "complex", "bool"};
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
  if (auto form = check_name_form(name, sluice_names_); !form) return form;
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

result<void> dict_builder::add_tensor_room(std::string_view name, const tensor_info& info) {
  auto needed = validate_tensor(name, info);
  if (!needed) return std::move(needed).error();
  return admit({.name = std::string{name},
                .kind = field_kind::tensor,
                .data_bytes = *needed,
                .room_only = true,
                .dtype = info.dtype,
                .shape = info.shape});
}

dict_builder dict_reserved::builder() {
  dict_builder b;
  b.sluice_names_ = true;
  return b;
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

}  // namespace sluice
