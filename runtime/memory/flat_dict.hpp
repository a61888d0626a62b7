// FlatDict internals: the byte layout's constants (docs/values.md is the
// grammar; this file and that one agree) and DLPack interop for the public
// sluice::dict_builder / sluice::dict_view (api/include/sluice/dict.hpp),
// kept here so dlpack.h never reaches the public headers.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "sluice/dict.hpp"
#include "sluice/result.hpp"

namespace sluice::flat_dict {

// On-region constants. Every integer in a region is little-endian. These
// are format: never change one without bumping `version`.
inline constexpr std::uint32_t magic = 0x54444C53;  // "SLDT" as bytes
inline constexpr std::uint16_t version = 1;
inline constexpr std::size_t header_bytes = 64;
inline constexpr std::size_t entry_bytes = 48;
/// A tensor metadata block: code u8, bits u8, lanes u16, ndim u32, then
/// shape[ndim] i64 and strides[ndim] i64.
inline constexpr std::size_t meta_fixed_bytes = 8;
inline constexpr std::size_t meta_alignment = 8;

// Byte offsets inside the header.
namespace header_at {
inline constexpr std::size_t magic = 0;           // u32
inline constexpr std::size_t version = 4;         // u16
inline constexpr std::size_t entry_bytes = 6;     // u16
inline constexpr std::size_t field_count = 8;     // u32
inline constexpr std::size_t reserved = 12;       // u32, 0
inline constexpr std::size_t total_bytes = 16;    // u64
inline constexpr std::size_t meta_offset = 24;    // u64
inline constexpr std::size_t names_offset = 32;   // u64
inline constexpr std::size_t data_offset = 40;    // u64
inline constexpr std::size_t reserved_tail = 48;  // 16 bytes, 0
}  // namespace header_at

// Byte offsets inside one field table entry.
namespace entry_at {
inline constexpr std::size_t kind = 0;          // u8
inline constexpr std::size_t reserved8 = 1;     // u8, 0
inline constexpr std::size_t name_length = 2;   // u16
inline constexpr std::size_t reserved32 = 4;    // u32, 0
inline constexpr std::size_t name_offset = 8;   // u64
inline constexpr std::size_t scalar = 16;       // u64
inline constexpr std::size_t meta_offset = 24;  // u64
inline constexpr std::size_t data_offset = 32;  // u64
inline constexpr std::size_t data_length = 40;  // u64
}  // namespace entry_at

/// Offset of field `index`'s table entry.
constexpr std::size_t entry_offset(std::size_t index) noexcept {
  return header_bytes + index * entry_bytes;
}

}  // namespace sluice::flat_dict

namespace sluice {

/// A value that is one tensor — what Python's put of a tensor stores —
/// is a dict whose only field is a tensor of this name (docs/values.md).
inline constexpr std::string_view single_tensor_field = "__tensor__";

/// Sluice's own use of the reserved field names.
struct dict_reserved {
  /// A builder that also accepts names starting with "__".
  static dict_builder builder();
};

/// DLPack's bool code. The installed dlpack.h (0.6) predates it; DLPack
/// 0.8 and 1.0 define kDLBool = 6, which is the numbering we follow.
inline constexpr std::uint8_t dlpack_bool_code = 6;

DLDataType to_dlpack(dtype type) noexcept;
/// invalid_argument unless `type` is a known dtype (dict.hpp).
result<dtype> dtype_from_dlpack(DLDataType type);

/// A DLTensor over a tensor view, for frameworks that borrow. No copy and
/// no allocation: data points into the region, shape and strides into the
/// dict_view (strides are always given, as DLPack 1.0 asks). The consumer
/// must not write through any of them (the region may be mapped read-only)
/// and must not keep them past the dict_view and the region.
DLTensor as_dltensor(const tensor_view& view) noexcept;

/// Calls a DLManagedTensor's own deleter, as DLPack requires.
struct dlpack_deleter {
  void operator()(DLManagedTensor* tensor) const noexcept;
};
using dlpack_ptr = std::unique_ptr<DLManagedTensor, dlpack_deleter>;

/// A DLManagedTensor for frameworks that take ownership (from_dlpack):
/// it holds its own copy of shape and strides and a reference to `owner`,
/// which must keep the region alive (e.g. the sluice::value's owner).
/// Hand it over with release(); the consumer calls its deleter.
dlpack_ptr to_dlpack(const tensor_view& view, std::shared_ptr<const void> owner);

/// The tensor_info a DLTensor describes. invalid_argument (naming `name`)
/// for a non-CPU device, an unknown dtype, ndim out of [0, tensor_ndim_max],
/// a negative extent, or strides that are not C-contiguous; strides
/// nullptr means compact row-major.
result<tensor_info> tensor_info_from_dlpack(std::string_view name, const DLTensor& tensor);

/// Adds a tensor field that borrows `tensor`'s elements (data + byte_offset)
/// until builder.encode_into returns. Errors as tensor_info_from_dlpack
/// and dict_builder::add_tensor.
result<void> add_dltensor(dict_builder& builder, std::string_view name, const DLTensor& tensor);

}  // namespace sluice
