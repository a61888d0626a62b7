#include "python/src/view.hpp"

#include <cstring>
#include <string>

#include "runtime/memory/flat_dict.hpp"

namespace sluice::python {
namespace {

constexpr const char* capsule_name = "dltensor";
constexpr const char* used_capsule_name = "used_dltensor";

/// Runs when a capsule is collected: a capsule nobody consumed still owns
/// its tensor, a consumed one ("used_dltensor") does not.
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, used_capsule_name)) return;
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, capsule_name));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
    return;
  }
  if (managed->deleter != nullptr) managed->deleter(managed);
}

std::string dtype_name(const region_state& s) { return s.type ? to_string(*s.type) : std::string{"uint8"}; }

py::tuple shape_tuple(const region_state& s) {
  py::tuple out(s.shape.size());
  for (std::size_t i = 0; i < s.shape.size(); ++i) out[i] = py::int_(s.shape[i]);
  return out;
}

std::string describe(const region_state& s, std::string_view kind) {
  std::string out{kind};
  out += "(" + dtype_name(s) + ", shape=(";
  for (std::size_t i = 0; i < s.shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(s.shape[i]);
  }
  if (s.shape.size() == 1) out += ",";
  out += "), nbytes=" + std::to_string(s.size) + ")";
  return out;
}

py::tuple dlpack_device(const region_state& s) {
  s.check("__dlpack_device__");
  return py::make_tuple(static_cast<int>(kDLCPU), 0);
}

/// One byte to point at for an empty region: the buffer protocol and
/// DLPack consumers want a pointer even for no bytes.
alignas(64) std::byte empty_region[64];

}  // namespace

void region_state::check(std::string_view what) const {
  if (client && client->closed.load(std::memory_order_acquire)) raise_closed(what);
}

void set_layout(region_state& s, std::optional<dtype> type, std::vector<std::int64_t> shape) {
  s.type = type;
  s.shape = type ? std::move(shape) : std::vector<std::int64_t>{static_cast<std::int64_t>(s.size)};
  s.strides.assign(s.shape.size(), 1);
  for (std::size_t i = s.shape.size(); i > 1; --i) s.strides[i - 2] = s.strides[i - 1] * std::max<std::int64_t>(s.shape[i - 1], 1);
  if (s.data == nullptr) s.data = empty_region;
}

py::capsule dlpack_capsule(const std::shared_ptr<region_state>& s) {
  s->check("__dlpack__");
  tensor_view tv{.dtype = s->type.value_or(dtype_uint8),
                 .shape = s->shape,
                 .strides = s->strides,
                 .device = {},
                 .data = std::span<const std::byte>{s->data, s->size}};
  // The managed tensor holds the region (and through it the value and its
  // lease) until the consumer lets it go.
  auto managed = to_dlpack(tv, std::shared_ptr<const void>{s, s.get()});
  PyObject* capsule = PyCapsule_New(managed.get(), capsule_name, capsule_destructor);
  if (capsule == nullptr) throw py::error_already_set();
  managed.release();
  return py::reinterpret_steal<py::capsule>(capsule);
}

namespace {

/// What a Py_buffer of a region points into, freed by region_releasebuffer.
struct buffer_layout {
  std::string format;
  std::vector<Py_ssize_t> shape;
  std::vector<Py_ssize_t> strides;
};

/// The region behind a View or a Reservation; raises when there is none
/// to show (a committed reservation, a closed client).
const region_state& region_behind(py::handle obj) {
  if (py::isinstance<view>(obj)) return *obj.cast<view&>().s;
  auto& r = obj.cast<reservation&>();
  if (!r.room) raise(errc::invalid_argument, "the reservation was already committed or aborted");
  return *r.s;
}

/// The buffer protocol for a region, by hand rather than pybind11's, whose
/// callback may not fail: a closed client must raise, not abort.
extern "C" int region_getbuffer(PyObject* obj, Py_buffer* out, int flags) {
  out->obj = nullptr;
  try {
    const region_state& s = region_behind(obj);
    s.check("the buffer protocol");
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && !s.writable) {
      PyErr_SetString(PyExc_BufferError, "a view is read-only: the bytes are a committed value");
      return -1;
    }
    auto layout = std::make_unique<buffer_layout>();
    auto format = s.type ? format_of(*s.type) : std::optional<std::string>{"B"};
    // bfloat16 has no buffer format: its elements are shown as uint16, to
    // be viewed as bfloat16 by whoever knows (torch, through DLPack).
    layout->format = format.value_or("H");
    const auto itemsize = static_cast<Py_ssize_t>(s.type ? itemsize_bytes(*s.type) : 1);
    for (auto d : s.shape) layout->shape.push_back(static_cast<Py_ssize_t>(d));
    for (auto st : s.strides) layout->strides.push_back(static_cast<Py_ssize_t>(st) * itemsize);
    if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && (flags & PyBUF_C_CONTIGUOUS) != PyBUF_C_CONTIGUOUS) {
      std::size_t wide = 0;
      for (auto d : s.shape) wide += d > 1 ? 1 : 0;
      if (wide > 1) {
        PyErr_SetString(PyExc_BufferError, "the bytes are C-contiguous (row-major), not Fortran-contiguous");
        return -1;
      }
    }
    out->buf = s.data;
    out->len = static_cast<Py_ssize_t>(s.size);
    out->itemsize = itemsize;
    out->readonly = s.writable ? 0 : 1;
    out->ndim = static_cast<int>(layout->shape.size());
    out->format = (flags & PyBUF_FORMAT) == PyBUF_FORMAT ? layout->format.data() : nullptr;
    out->shape = (flags & PyBUF_ND) == PyBUF_ND ? layout->shape.data() : nullptr;
    out->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? layout->strides.data() : nullptr;
    if (out->shape == nullptr) {
      // Without shapes a consumer sees bytes: one dimension of len.
      out->ndim = 1;
      out->itemsize = 1;
    }
    out->suboffsets = nullptr;
    out->internal = layout.release();
    out->obj = obj;
    Py_INCREF(obj);
    return 0;
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
  }
  return -1;
}

extern "C" void region_releasebuffer(PyObject*, Py_buffer* view) {
  delete static_cast<buffer_layout*>(view->internal);
}

void use_region_buffer(py::handle cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  type->tp_as_buffer->bf_getbuffer = region_getbuffer;
  type->tp_as_buffer->bf_releasebuffer = region_releasebuffer;
}

}  // namespace

void bind_views(py::module_& m) {
  py::class_<view>(m, "View", py::buffer_protocol(), R"doc(
A read-only view of a value's bytes, or of one bytes or tensor field of a
dict value: no copy. On the owner's host it aliases the owner's pool.

It exposes the buffer protocol (``memoryview(v)``, ``numpy.asarray(v)``)
and DLPack (``numpy.from_dlpack(v)``, ``torch.from_dlpack(v)``). The value
and its read lease live while the view or any array made from it lives;
they go when the last of them does. Do not write through an array made
from a view: the bytes are the committed value every reader sees.
)doc")
      .def(
          "__dlpack__", [](view& v, py::object /*stream*/) { return dlpack_capsule(v.s); },
          py::arg("stream") = py::none(), "A DLPack capsule over the bytes (CPU, read-only by contract).")
      .def("__dlpack_device__", [](view& v) { return dlpack_device(*v.s); }, "(kDLCPU, 0).")
      .def("__len__", [](view& v) { return v.s->size; })
      .def(
          "__bytes__",
          [](view& v) {
            v.s->check("bytes()");
            return py::bytes(reinterpret_cast<const char*>(v.s->data), v.s->size);
          },
          "A copy of the bytes.")
      .def(
          "tobytes",
          [](view& v) {
            v.s->check("tobytes()");
            return py::bytes(reinterpret_cast<const char*>(v.s->data), v.s->size);
          },
          "A copy of the bytes.")
      .def("__repr__", [](view& v) { return describe(*v.s, "View"); })
      .def_property_readonly("nbytes", [](view& v) { return v.s->size; }, "Bytes in the view.")
      .def_property_readonly("shape", [](view& v) { return shape_tuple(*v.s); },
                             "The tensor's shape; (nbytes,) for bytes.")
      .def_property_readonly("dtype", [](view& v) { return dtype_name(*v.s); },
                             "The element type's name ('float32', ...); 'uint8' for bytes.")
      .def_property_readonly("is_tensor", [](view& v) { return v.s->type.has_value(); },
                             "True for a tensor, False for plain bytes.")
      .def_property_readonly("version", [](view& v) { return v.s->version; }, "The version of the key read.")
      .def_property_readonly(
          "data_ptr",
          [](view& v) {
            v.s->check("data_ptr");
            return reinterpret_cast<std::uintptr_t>(v.s->data);
          },
          "The address of the first byte, as an int.");

  py::class_<reservation>(m, "Reservation", py::buffer_protocol(), R"doc(
Room for a new value, written in place before commit(): on the owner's
host it is the pool memory the value will live in, so what is written
here is the value, with no further copy.

Write through the buffer protocol (``memoryview(r)``, ``numpy.asarray(r)``,
writable) or DLPack (``torch.from_dlpack(r)``; numpy's from_dlpack gives a
read-only array). commit() makes it the key's new version; abort(), or
dropping it uncommitted, gives the room back. As a context manager it
commits when the block ends normally and aborts when it raises.
)doc")
      .def(
          "__dlpack__",
          [](reservation& r, py::object /*stream*/) {
            if (!r.room) raise(errc::invalid_argument, "the reservation was already committed or aborted");
            return dlpack_capsule(r.s);
          },
          py::arg("stream") = py::none(), "A writable DLPack capsule over the room (CPU).")
      .def("__dlpack_device__", [](reservation& r) { return dlpack_device(*r.s); })
      .def("__len__", [](reservation& r) { return r.s->size; })
      .def("__repr__", [](reservation& r) { return describe(*r.s, "Reservation"); })
      .def_property_readonly("nbytes", [](reservation& r) { return r.s->size; })
      .def_property_readonly("shape", [](reservation& r) { return shape_tuple(*r.s); })
      .def_property_readonly("dtype", [](reservation& r) { return dtype_name(*r.s); })
      .def_property_readonly("data_ptr",
                             [](reservation& r) {
                               r.s->check("data_ptr");
                               return reinterpret_cast<std::uintptr_t>(r.s->data);
                             })
      .def(
          "commit",
          [](reservation& r, std::optional<double> timeout) {
            r.s->check("commit()");
            if (!r.room) raise(errc::invalid_argument, "the reservation was already committed or aborted");
            auto room = std::move(r.room);
            result<std::uint64_t> version = std::uint64_t{0};
            {
              py::gil_scoped_release unlocked;
              version = room->commit(call_options{to_timeout(timeout)});
            }
            check_signals();
            r.s->version = version.ok() ? *version : 0;
            return unwrap(std::move(version));
          },
          py::arg("timeout") = py::none(), "Makes what was written the key's new version; returns the version.")
      .def(
          "abort",
          [](reservation& r) {
            if (auto room = std::move(r.room)) room->abort();
          },
          "Gives the room back without storing anything.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](reservation& r, py::object type, py::object, py::object) {
        if (!r.room) return false;
        auto room = std::move(r.room);
        if (!type.is_none()) {
          room->abort();
          return false;
        }
        result<std::uint64_t> version = std::uint64_t{0};
        {
          py::gil_scoped_release unlocked;
          version = room->commit();
        }
        unwrap(std::move(version));
        return false;
      });
  use_region_buffer(m.attr("View"));
  use_region_buffer(m.attr("Reservation"));
}

}  // namespace sluice::python
