// FlatDict's DLPack interop: dtypes to and from DLPack's, a DLTensor over a
// tensor field (borrowed or managed), and tensor fields from DLTensors.
#include "runtime/memory/flat_dict.hpp"

#include <memory>
#include <string>
#include <vector>

#include "runtime/memory/flat_dict_detail.hpp"

namespace sluice {

using namespace flat_dict_detail;

// ---- DLPack ----------------------------------------------------------------

static_assert(kDLInt == static_cast<int>(dtype_code::signed_int));
static_assert(kDLUInt == static_cast<int>(dtype_code::unsigned_int));
static_assert(kDLFloat == static_cast<int>(dtype_code::ieee_float));
static_assert(kDLBfloat == static_cast<int>(dtype_code::bfloat));
static_assert(kDLComplex == static_cast<int>(dtype_code::complex));
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
