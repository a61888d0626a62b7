// The helpers FlatDict's writer, reader and DLPack part share: small pure
// ones and the tensor shape arithmetic (declared in flat_dict_detail.hpp).
#include "runtime/memory/flat_dict_detail.hpp"

#include <algorithm>
#include <string>

#include "runtime/assert.hpp"

namespace sluice::flat_dict_detail {

// ---- small pure helpers ----------------------------------------------------

bool is_aligned(const void* p, std::size_t alignment) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) % alignment == 0;
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

void canonical_strides(std::span<const std::int64_t> shape, std::span<std::int64_t> out) {
  SLUICE_ASSERT(out.size() == shape.size());
  std::int64_t stride = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    out[i] = stride;
    stride *= shape[i];
  }
}

bool is_c_contiguous(std::span<const std::int64_t> shape, std::span<const std::int64_t> strides) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  std::int64_t expected = 1;
  for (std::size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

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

}  // namespace sluice::flat_dict_detail
