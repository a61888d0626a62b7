// Python values to Sluice values and back.
//
// A put takes: anything with the buffer protocol (bytes, bytearray,
// memoryview, array.array, ...) as plain bytes; a str as its UTF-8 bytes;
// a list or tuple of buffers as one value, their concatenation, written
// without concatenating them first; anything with __dlpack__ (numpy,
// torch), or a DLPack capsule, as a tensor (a dict with one field,
// flat_dict's single_tensor_field); and a dict of int, float, bool, str,
// buffers, lists of buffers and tensors as a dict value. The buffers are
// borrowed, not copied, until the put completes.
//
// A get gives back: a View of the bytes; a View of the tensor for a value
// that is one tensor; a dict of ints, floats, bools, strs and Views for a
// dict value.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "python/src/common.hpp"
#include "runtime/memory/flat_dict.hpp"

namespace sluice::python {

/// A Python object's buffer, held (and the object kept from resizing)
/// until this is destroyed. Destroy it with the GIL held.
class borrowed_buffer {
 public:
  /// Raises InvalidArgument naming `what` when `obj` has no C-contiguous
  /// buffer. `writable`: a buffer the caller may write.
  borrowed_buffer(py::handle obj, std::string_view what, bool writable = false);
  ~borrowed_buffer();
  borrowed_buffer(const borrowed_buffer&) = delete;
  borrowed_buffer& operator=(const borrowed_buffer&) = delete;

  std::span<std::byte> bytes() const noexcept {
    return {static_cast<std::byte*>(view_.buf), static_cast<std::size_t>(view_.len)};
  }
  const Py_buffer& view() const noexcept { return view_; }

 private:
  Py_buffer view_{};
};

/// What a put of one Python value writes, with the buffers it borrows.
/// Built with the GIL held; used without it; destroyed with it.
struct put_plan {
  enum class shape { bytes, gathered, dict };
  shape kind = shape::bytes;
  std::vector<std::unique_ptr<borrowed_buffer>> buffers;
  std::vector<dlpack_ptr> tensors;
  std::span<const std::byte> bytes;               // shape::bytes
  std::vector<std::span<const std::byte>> parts;  // shape::gathered
  dict_builder dict;                              // shape::dict

  std::uint64_t size() const;
  /// Writes the value into `out` (exactly size() bytes; 64-byte aligned
  /// for a dict): the one copy of each borrowed buffer.
  result<void> write_into(std::span<std::byte> out) const;
};

/// REQUIRES: the GIL. Raises InvalidArgument for what cannot be stored.
std::unique_ptr<put_plan> plan_put(py::handle value);

/// The plan of a dict (None: an empty one): RPC arguments, results and
/// stream items. Raises InvalidArgument, naming `what`, for anything else.
std::unique_ptr<put_plan> plan_dict(py::handle value, std::string_view what);

/// Below this a dict, a tensor or a gathered value is assembled in the
/// caller's thread and sent with the put; at and above, written into a
/// reservation in the pool.
inline constexpr std::size_t small_put_bytes_max = 256 * 1024;

/// Whether `plan` goes as one buffer: plain bytes, or small enough to assemble.
bool one_buffer(const put_plan& plan);
/// REQUIRES: one_buffer(plan). Its bytes: plan.bytes, or the value
/// assembled in this thread's scratch (valid until the thread's next
/// assemble). Called without the GIL.
result<std::span<const std::byte>> assemble(const put_plan& plan);

/// Stores `plan` under `key`: the version and the copies committed.
/// Called without the GIL.
result<put_result> run_put(sluice::client& c, std::string_view key, put_plan& plan, const put_options& options);

/// A get's value as Python sees it (View, or dict of scalars and Views).
/// `raw`: always a View of the value's bytes. REQUIRES: the GIL.
py::object to_python(const std::shared_ptr<client_holder>& client, sluice::value v, bool raw);

/// A dict's fields as a Python dict; bytes and tensors become Views kept
/// valid by `keep`. REQUIRES: the GIL.
py::object dict_to_python(const std::shared_ptr<client_holder>& client, const std::shared_ptr<const void>& keep,
                          const dict_view& dict, std::uint64_t version = 0);

/// Room for a value of `spec` bytes, or of a tensor when `spec` is
/// (shape, dtype). Called with the GIL; releases it while it waits.
py::object reserve(const std::shared_ptr<client_holder>& client, std::string_view key, py::handle spec,
                   const put_options& options);

}  // namespace sluice::python
