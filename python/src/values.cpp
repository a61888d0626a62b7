#include "python/src/values.hpp"

#include <climits>
#include <cstring>
#include <string>

#include "python/src/view.hpp"
#include "runtime/assert.hpp"
#include "runtime/memory/buffer.hpp"

namespace sluice::python {
namespace {

/// The pending Python error's text, cleared.
std::string take_error_text() {
  py::error_already_set e;
  return e.what();
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>(); }

bool is_dlpack(py::handle obj) { return PyCapsule_CheckExact(obj.ptr()) != 0 || py::hasattr(obj, "__dlpack__"); }

std::string quoted(std::string_view name) { return "'" + std::string{name} + "'"; }

std::span<const std::byte> region_bytes(const region_state& s) { return {s.data, s.size}; }

/// Adds the tensor of a buffer with an element format (a read-only numpy
/// array, which numpy will not export through DLPack; array.array).
void add_buffer_tensor(put_plan& plan, dict_builder& b, std::string_view name, py::handle obj) {
  auto held = std::make_unique<borrowed_buffer>(obj, "tensor " + quoted(name));
  const Py_buffer& v = held->view();
  std::string format = v.format != nullptr ? v.format : "B";
  auto type = dtype_of_format(format, static_cast<std::size_t>(v.itemsize));
  if (!type) {
    raise(errc::invalid_argument, "tensor " + quoted(name) + ": unsupported element format '" + format + "' of " +
                                      std::to_string(v.itemsize) + " bytes");
  }
  tensor_info info{.dtype = *type};
  for (int i = 0; i < v.ndim; ++i) info.shape.push_back(static_cast<std::int64_t>(v.shape[i]));
  unwrap(b.add_tensor(name, info, held->bytes()));
  plan.buffers.push_back(std::move(held));
}

/// Adds a tensor field from anything with __dlpack__, a DLPack capsule,
/// a View, or a buffer with an element format.
void add_tensor(put_plan& plan, dict_builder& b, std::string_view name, py::handle obj) {
  if (py::isinstance<view>(obj)) {
    const auto& s = *obj.cast<view&>().s;
    s.check("a put of a view");
    tensor_info info{.dtype = s.type.value_or(dtype_uint8), .shape = s.shape};
    unwrap(b.add_tensor(name, info, region_bytes(s)));
    return;
  }
  py::object capsule;
  if (PyCapsule_CheckExact(obj.ptr()) != 0) {
    capsule = py::reinterpret_borrow<py::object>(obj);
  } else {
    try {
      capsule = obj.attr("__dlpack__")();
    } catch (py::error_already_set& e) {
      // numpy exports neither read-only arrays nor bools through DLPack;
      // their buffer says as much as DLPack would.
      if (PyObject_CheckBuffer(obj.ptr()) != 0) return add_buffer_tensor(plan, b, name, obj);
      // torch exports no bool through DLPack (before 2.x); its numpy view
      // of the same memory has a buffer. The buffer holds the array.
      if (py::hasattr(obj, "numpy")) {
        py::object array;
        try {
          array = obj.attr("numpy")();
        } catch (py::error_already_set&) {
          array = py::object{};
        }
        if (array && PyObject_CheckBuffer(array.ptr()) != 0) return add_buffer_tensor(plan, b, name, array);
      }
      raise(errc::invalid_argument, "tensor " + quoted(name) + " cannot be exported through DLPack: " + e.what());
    }
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
  if (managed == nullptr) {
    PyErr_Clear();
    raise(errc::invalid_argument, "tensor " + quoted(name) +
                                      ": the DLPack capsule was already consumed (a capsule can be used once; "
                                      "pass the tensor itself)");
  }
  // Ours now: the capsule no longer deletes it, we call its deleter.
  if (PyCapsule_SetName(capsule.ptr(), "used_dltensor") != 0) throw py::error_already_set();
  plan.tensors.emplace_back(managed);
  unwrap(add_dltensor(b, name, managed->dl_tensor));
}

/// The parts of a list or tuple of buffers (header + body).
std::vector<std::span<const std::byte>> gather(put_plan& plan, py::handle list, std::string_view what) {
  std::vector<std::span<const std::byte>> parts;
  auto seq = py::reinterpret_borrow<py::sequence>(list);
  if (seq.size() > dict_gather_parts_max) {
    raise(errc::invalid_argument, std::string{what} + " is gathered from " + std::to_string(seq.size()) +
                                      " buffers; the limit is " + std::to_string(dict_gather_parts_max));
  }
  for (auto item : seq) {
    if (py::isinstance<view>(item)) {
      const auto& s = *item.cast<view&>().s;
      s.check("a put of a view");
      parts.push_back(region_bytes(s));
      continue;
    }
    auto held = std::make_unique<borrowed_buffer>(item, std::string{what} + " part");
    parts.push_back(held->bytes());
    plan.buffers.push_back(std::move(held));
  }
  return parts;
}

void add_field(put_plan& plan, std::string_view name, py::handle v) {
  auto& b = plan.dict;
  if (PyBool_Check(v.ptr()) != 0) return unwrap(b.add_bool(name, v.cast<bool>()));
  if (PyLong_Check(v.ptr()) != 0 || (PyIndex_Check(v.ptr()) != 0 && !is_dlpack(v))) {
    int overflow = 0;
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr()));
    if (!index) throw py::error_already_set();
    long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0) raise(errc::invalid_argument, "field " + quoted(name) + ": the integer does not fit in 64 bits");
    return unwrap(b.add_int64(name, static_cast<std::int64_t>(n)));
  }
  if (PyFloat_Check(v.ptr()) != 0) return unwrap(b.add_float64(name, v.cast<double>()));
  if (py::isinstance<py::str>(v)) return unwrap(b.add_string(name, v.cast<std::string>()));
  if (py::isinstance<view>(v)) {
    const auto& s = *v.cast<view&>().s;
    if (!s.type) {
      s.check("a put of a view");
      return unwrap(b.add_bytes(name, region_bytes(s)));
    }
    return add_tensor(plan, b, name, v);
  }
  if (is_dlpack(v)) return add_tensor(plan, b, name, v);
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    auto parts = gather(plan, v, "field " + quoted(name));
    return unwrap(b.add_bytes(name, std::span<const std::span<const std::byte>>{parts}));
  }
  if (PyObject_CheckBuffer(v.ptr()) != 0) {
    auto held = std::make_unique<borrowed_buffer>(v, "field " + quoted(name));
    unwrap(b.add_bytes(name, held->bytes()));
    plan.buffers.push_back(std::move(held));
    return;
  }
  raise(errc::invalid_argument, "field " + quoted(name) + ": cannot store a " + type_name(v) +
                                    " (a dict holds int, float, bool, str, bytes-like objects, lists of them "
                                    "and tensors)");
}

std::shared_ptr<region_state> region_of(const std::shared_ptr<client_holder>& client,
                                        std::shared_ptr<const void> keep, std::span<const std::byte> bytes,
                                        std::uint64_t version) {
  auto s = std::make_shared<region_state>();
  s->client = client;
  s->keep = std::move(keep);
  s->data = const_cast<std::byte*>(bytes.data());
  s->size = bytes.size();
  s->version = version;
  return s;
}

py::object tensor_view_object(const std::shared_ptr<client_holder>& client, const std::shared_ptr<const void>& keep,
                              const tensor_view& t, std::uint64_t version) {
  auto s = region_of(client, keep, t.data, version);
  set_layout(*s, t.dtype, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()));
  return py::cast(view{std::move(s)});
}

py::object bytes_view_object(const std::shared_ptr<client_holder>& client, const std::shared_ptr<const void>& keep,
                             std::span<const std::byte> bytes, std::uint64_t version) {
  auto s = region_of(client, keep, bytes, version);
  set_layout(*s, std::nullopt, {});
  return py::cast(view{std::move(s)});
}

bool looks_like_dict(std::span<const std::byte> bytes) {
  if (bytes.size() < flat_dict::header_bytes) return false;
  std::uint32_t magic = 0;
  std::memcpy(&magic, bytes.data(), sizeof magic);
  return magic == flat_dict::magic;
}

}  // namespace

borrowed_buffer::borrowed_buffer(py::handle obj, std::string_view what, bool writable) {
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj.ptr(), &view_, flags) != 0) {
    view_ = Py_buffer{};
    auto text = take_error_text();
    raise(errc::invalid_argument, std::string{what} + " (a " + type_name(obj) + "): " +
                                      (writable ? "needs a writable, C-contiguous buffer: " : "needs a C-contiguous buffer: ") +
                                      text);
  }
}

borrowed_buffer::~borrowed_buffer() {
  if (view_.obj != nullptr || view_.buf != nullptr) PyBuffer_Release(&view_);
}

std::uint64_t put_plan::size() const {
  switch (kind) {
    case shape::bytes: return bytes.size();
    case shape::gathered: {
      std::uint64_t n = 0;
      for (auto p : parts) n += p.size();
      return n;
    }
    case shape::dict: return dict.encoded_size();
  }
  return 0;
}

result<void> put_plan::write_into(std::span<std::byte> out) const {
  switch (kind) {
    case shape::bytes:
      if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
      return {};
    case shape::gathered: {
      std::size_t at = 0;
      for (auto part : parts) {
        if (!part.empty()) std::memcpy(out.data() + at, part.data(), part.size());
        at += part.size();
      }
      return {};
    }
    case shape::dict: return dict.encode_into(out);
  }
  return {};
}

std::unique_ptr<put_plan> plan_put(py::handle value) {
  auto plan = std::make_unique<put_plan>();
  if (py::isinstance<reservation>(value)) {
    raise(errc::invalid_argument, "a reservation is not a value: commit() it instead");
  }
  if (py::isinstance<view>(value) && !value.cast<view&>().s->type) {
    const auto& s = *value.cast<view&>().s;
    s.check("a put of a view");
    plan->bytes = region_bytes(s);
    return plan;
  }
  if (py::isinstance<view>(value) || is_dlpack(value)) {
    plan->kind = put_plan::shape::dict;
    plan->dict = dict_reserved::builder();
    add_tensor(*plan, plan->dict, single_tensor_field, value);
    return plan;
  }
  if (py::isinstance<py::dict>(value)) {
    plan->kind = put_plan::shape::dict;
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(value)) {
      if (!py::isinstance<py::str>(k)) {
        raise(errc::invalid_argument, "dict keys name fields and must be str, not " + type_name(k));
      }
      add_field(*plan, k.cast<std::string>(), v);
    }
    return plan;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    plan->kind = put_plan::shape::gathered;
    plan->parts = gather(*plan, value, "the value");
    return plan;
  }
  if (py::isinstance<py::str>(value)) {
    py::object encoded = py::reinterpret_steal<py::object>(PyUnicode_AsUTF8String(value.ptr()));
    if (!encoded) throw py::error_already_set();
    auto held = std::make_unique<borrowed_buffer>(encoded, "the value");
    plan->bytes = held->bytes();
    plan->buffers.push_back(std::move(held));
    return plan;
  }
  if (PyObject_CheckBuffer(value.ptr()) != 0) {
    auto held = std::make_unique<borrowed_buffer>(value, "the value");
    plan->bytes = held->bytes();
    plan->buffers.push_back(std::move(held));
    return plan;
  }
  raise(errc::invalid_argument, "cannot store a " + type_name(value) +
                                    ": a value is a bytes-like object, a str, a list of bytes-like objects, a "
                                    "tensor (anything with __dlpack__) or a dict of fields");
}

std::unique_ptr<put_plan> plan_dict(py::handle value, std::string_view what) {
  if (value.is_none()) {
    auto plan = std::make_unique<put_plan>();
    plan->kind = put_plan::shape::dict;
    return plan;
  }
  if (!py::isinstance<py::dict>(value)) {
    raise(errc::invalid_argument, std::string{what} + " is a dict of fields, not a " + type_name(value));
  }
  return plan_put(value);
}

bool one_buffer(const put_plan& plan) {
  return plan.kind == put_plan::shape::bytes || plan.size() < small_put_bytes_max;
}

result<std::span<const std::byte>> assemble(const put_plan& plan) {
  if (plan.kind == put_plan::shape::bytes) return plan.bytes;
  SLUICE_ASSERT(plan.size() < small_put_bytes_max);
  thread_local byte_buffer scratch;
  if (scratch.size() < small_put_bytes_max) scratch = byte_buffer::allocate(small_put_bytes_max);
  auto out = scratch.span().first(plan.size());
  if (auto written = plan.write_into(out); !written) return std::move(written).error();
  return std::span<const std::byte>{out};
}

result<put_result> run_put(sluice::client& c, std::string_view key, put_plan& plan, const put_options& options) {
  // A small value is assembled here and sent with the put, one round trip
  // (as C++'s put does below 256 KiB); a large one is written straight
  // into a reservation, one copy and two round trips.
  if (one_buffer(plan)) {
    auto bytes = assemble(plan);
    if (!bytes) return std::move(bytes).error();
    return c.put_with_copies(key, *bytes, options);
  }
  auto room = c.reserve(key, plan.size(), options);
  if (!room) return std::move(room).error();
  if (auto written = plan.write_into(room->bytes()); !written) return std::move(written).error();
  return room->commit_with_copies(call_options{options.timeout});
}

py::object dict_to_python(const std::shared_ptr<client_holder>& client, const std::shared_ptr<const void>& keep,
                          const dict_view& dict, std::uint64_t version) {
  py::dict out;
  for (const auto& f : dict) {
    py::str name{std::string{f.name()}};
    switch (f.kind()) {
      case field_kind::int64: out[name] = py::int_(*f.as_int64()); break;
      case field_kind::float64: out[name] = py::float_(*f.as_float64()); break;
      case field_kind::boolean: out[name] = py::bool_(*f.as_bool()); break;
      case field_kind::string: {
        auto text = *f.as_string();
        py::object s = py::reinterpret_steal<py::object>(
            PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape"));
        if (!s) throw py::error_already_set();
        out[name] = s;
        break;
      }
      case field_kind::bytes: out[name] = bytes_view_object(client, keep, *f.as_bytes(), version); break;
      case field_kind::tensor: out[name] = tensor_view_object(client, keep, *f.as_tensor(), version); break;
    }
  }
  return out;
}

py::object to_python(const std::shared_ptr<client_holder>& client, sluice::value v, bool raw) {
  auto version = v.version();
  auto keep = std::make_shared<const sluice::value>(std::move(v));
  auto bytes = keep->bytes();
  if (raw || !looks_like_dict(bytes)) return bytes_view_object(client, keep, bytes, version);
  auto dict = dict_view::parse(bytes);
  if (!dict) return bytes_view_object(client, keep, bytes, version);
  if (dict->size() == 1 && dict->fields()[0].name() == single_tensor_field &&
      dict->fields()[0].kind() == field_kind::tensor) {
    return tensor_view_object(client, keep, *dict->fields()[0].as_tensor(), version);
  }
  return dict_to_python(client, keep, *dict, version);
}

py::object reserve(const std::shared_ptr<client_holder>& client, std::string_view key, py::handle spec,
                   const put_options& options) {
  auto& c = client->use("reserve");
  std::optional<tensor_info> tensor;
  std::uint64_t size = 0;
  dict_builder layout = dict_reserved::builder();
  if (PyIndex_Check(spec.ptr()) != 0) {
    auto n = spec.cast<long long>();
    if (n < 0) raise(errc::invalid_argument, "a reservation's size is 0 or more bytes");
    size = static_cast<std::uint64_t>(n);
  } else if ((py::isinstance<py::tuple>(spec) || py::isinstance<py::list>(spec)) && py::len(spec) == 2) {
    auto pair = py::reinterpret_borrow<py::sequence>(spec);
    tensor_info info{.dtype = dtype_of(pair[1])};
    py::handle dims = pair[0];
    if (PyIndex_Check(dims.ptr()) != 0) {
      info.shape.push_back(dims.cast<std::int64_t>());
    } else {
      for (auto d : py::reinterpret_borrow<py::sequence>(dims)) info.shape.push_back(d.cast<std::int64_t>());
    }
    unwrap(layout.add_tensor_room(single_tensor_field, info));
    size = layout.encoded_size();
    tensor = std::move(info);
  } else {
    raise(errc::invalid_argument, "reserve() takes a size in bytes or a (shape, dtype) pair");
  }
  result<writable_value> room = error{errc::internal, "not reserved"};
  {
    py::gil_scoped_release unlocked;
    room = c.reserve(key, size, options);
  }
  check_signals();
  auto held = std::make_shared<writable_value>(unwrap(std::move(room)));
  auto s = std::make_shared<region_state>();
  s->client = client;
  s->keep = held;
  s->writable = true;
  auto out = held->bytes();
  if (!tensor) {
    s->data = out.data();
    s->size = out.size();
    set_layout(*s, std::nullopt, {});
  } else {
    unwrap(layout.encode_into(out));
    auto dict = unwrap(dict_view::parse(out));
    auto t = *dict.fields()[0].as_tensor();
    s->data = out.data() + (t.data.data() - out.data());
    s->size = t.data.size();
    set_layout(*s, t.dtype, std::vector<std::int64_t>(t.shape.begin(), t.shape.end()));
  }
  return py::cast(reservation{std::move(s), std::move(held)});
}

}  // namespace sluice::python
