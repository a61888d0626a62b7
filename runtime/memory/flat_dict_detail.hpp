// Private to runtime/memory: what FlatDict's writer (flat_dict.cpp), reader
// (flat_dict_reader.cpp) and DLPack part (flat_dict_dlpack.cpp) share;
// defined in flat_dict_detail.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "runtime/memory/flat_dict.hpp"
#include "sluice/result.hpp"

namespace sluice::flat_dict_detail {

namespace fd = flat_dict;

// ---- small pure helpers ----------------------------------------------------

bool is_aligned(const void* p, std::size_t alignment) noexcept;
bool has_data(field_kind kind) noexcept;
std::uint64_t meta_block_bytes(std::size_t ndim) noexcept;
std::string format_dims(std::span<const std::int64_t> dims);
std::string quoted(std::string_view name);

// ---- tensor shape arithmetic (shared by writer and reader) ----------------

/// Bytes of a C-contiguous tensor, or nullopt when an extent is negative or
/// the product of the non-zero extents times the itemsize passes
/// dict_encoded_bytes_max (which also bounds every canonical stride).
std::optional<std::uint64_t> tensor_bytes(dtype type, std::span<const std::int64_t> shape);
/// The compact row-major strides of `shape`. REQUIRES: tensor_bytes(shape)
/// succeeded, so no product overflows.
void canonical_strides(std::span<const std::int64_t> shape, std::span<std::int64_t> out);
/// C-contiguous as frameworks mean it: an empty tensor has any strides;
/// otherwise extent-1 dimensions may carry any stride and the others must
/// be the canonical ones.
bool is_c_contiguous(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides);
/// Checks a writer's tensor metadata; returns its byte count.
result<std::uint64_t> validate_tensor(std::string_view name, const tensor_info& info);

/// Where the next name, metadata block and data area go.
struct cursors {
  std::uint64_t meta = 0;
  std::uint64_t names = 0;
  std::uint64_t data = 0;
};

}  // namespace sluice::flat_dict_detail
