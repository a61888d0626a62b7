#include "python/src/common.hpp"

#include <cmath>
#include <string_view>

namespace sluice::python {
namespace {

/// sluice._errors.by_code[code], looked up once and kept for the life of
/// the interpreter (a leaked reference: classes outlive every call).
py::handle exception_class(errc code) {
  static py::handle by_code = py::object{py::module_::import("sluice._errors").attr("by_code")}.release();
  py::object cls = by_code.attr("get")(static_cast<int>(code));
  // The dict keeps the class alive: a borrowed handle is enough.
  return cls.is_none() ? py::handle{PyExc_RuntimeError} : py::handle{cls};
}

}  // namespace

void raise(const error& e) { raise(e.code(), e.message()); }

void raise(errc code, std::string message) {
  py::handle cls = exception_class(code);
  std::string text{to_string(code)};
  if (!message.empty()) text += ": " + message;
  PyErr_SetString(cls.ptr(), text.c_str());
  throw py::error_already_set();
}

void raise_closed(std::string_view what) {
  static py::handle cls = py::object{py::module_::import("sluice._errors").attr("ClientClosed")}.release();
  std::string text = std::string{what} + ": the client is closed";
  PyErr_SetString(cls.ptr(), text.c_str());
  throw py::error_already_set();
}

py::object exception_of(const error& e) {
  try {
    raise(e);
  } catch (py::error_already_set& raised) {
    return raised.value();
  }
}

void check_signals() {
  if (PyErr_CheckSignals() != 0) throw py::error_already_set();
}

std::chrono::milliseconds to_timeout(const std::optional<double>& seconds) {
  if (!seconds) return std::chrono::milliseconds{0};
  if (!std::isfinite(*seconds) || *seconds < 0) {
    raise(errc::invalid_argument, "a timeout is a number of seconds, 0 or more");
  }
  // At least a millisecond: 0 would mean the client's default.
  auto ms = static_cast<std::int64_t>(std::ceil(*seconds * 1000.0));
  return std::chrono::milliseconds{std::max<std::int64_t>(ms, 1)};
}

namespace {

struct named_dtype {
  std::string_view name;
  dtype type;
};

constexpr named_dtype dtype_names[] = {
    {"bool", dtype_bool},           {"int8", dtype_int8},         {"int16", dtype_int16},
    {"int32", dtype_int32},         {"int64", dtype_int64},       {"uint8", dtype_uint8},
    {"uint16", dtype_uint16},       {"uint32", dtype_uint32},     {"uint64", dtype_uint64},
    {"float16", dtype_float16},     {"float32", dtype_float32},   {"float64", dtype_float64},
    {"bfloat16", dtype_bfloat16},   {"complex64", dtype_complex64}, {"complex128", dtype_complex128},
    // torch's other names
    {"half", dtype_float16},        {"float", dtype_float32},     {"double", dtype_float64},
    {"short", dtype_int16},         {"int", dtype_int32},         {"long", dtype_int64},
    {"cfloat", dtype_complex64},    {"cdouble", dtype_complex128}, {"bool_", dtype_bool},
};

}  // namespace

dtype dtype_of(const py::handle& spec) {
  std::string name;
  if (py::isinstance<py::str>(spec)) {
    name = spec.cast<std::string>();
  } else if (py::hasattr(spec, "kind") && py::hasattr(spec, "itemsize") && py::hasattr(spec, "name")) {
    name = spec.attr("name").cast<std::string>();  // numpy.dtype
  } else if (py::isinstance<py::type>(spec) && py::hasattr(spec, "__name__")) {
    name = spec.attr("__name__").cast<std::string>();  // numpy.float32
  } else {
    name = py::str(spec).cast<std::string>();  // torch.float32
  }
  if (name.starts_with("torch.")) name = name.substr(6);
  for (const auto& n : dtype_names) {
    if (n.name == name) return n.type;
  }
  raise(errc::invalid_argument, "unsupported dtype '" + name +
                                    "': use bool, int8..int64, uint8..uint64, float16, bfloat16, float32, "
                                    "float64, complex64 or complex128");
}

std::optional<dtype> dtype_of_format(std::string_view format, std::size_t itemsize) {
  if (!format.empty() && (format[0] == '<' || format[0] == '=' || format[0] == '@' || format[0] == '!' ||
                          format[0] == '>')) {
    // Big-endian data is not what a reader on this host expects.
    if (format[0] == '>' || format[0] == '!') return std::nullopt;
    format.remove_prefix(1);
  }
  std::optional<dtype> type;
  if (format == "?") type = dtype_bool;
  if (format == "b") type = dtype_int8;
  if (format == "B") type = dtype_uint8;
  if (format == "h") type = dtype_int16;
  if (format == "H") type = dtype_uint16;
  if (format == "i") type = dtype_int32;
  if (format == "I") type = dtype_uint32;
  if (format == "l" || format == "q") type = itemsize == 8 ? dtype_int64 : dtype_int32;
  if (format == "L" || format == "Q") type = itemsize == 8 ? dtype_uint64 : dtype_uint32;
  if (format == "e") type = dtype_float16;
  if (format == "f") type = dtype_float32;
  if (format == "d") type = dtype_float64;
  if (format == "Zf") type = dtype_complex64;
  if (format == "Zd") type = dtype_complex128;
  if (type && itemsize_bytes(*type) != itemsize) return std::nullopt;
  return type;
}

std::optional<std::string> format_of(dtype type) {
  if (type == dtype_bool) return "?";
  if (type == dtype_int8) return "b";
  if (type == dtype_uint8) return "B";
  if (type == dtype_int16) return "h";
  if (type == dtype_uint16) return "H";
  if (type == dtype_int32) return "i";
  if (type == dtype_uint32) return "I";
  if (type == dtype_int64) return "q";
  if (type == dtype_uint64) return "Q";
  if (type == dtype_float16) return "e";
  if (type == dtype_float32) return "f";
  if (type == dtype_float64) return "d";
  if (type == dtype_complex64) return "Zf";
  if (type == dtype_complex128) return "Zd";
  return std::nullopt;
}

}  // namespace sluice::python
