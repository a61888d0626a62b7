// What every part of the Python module shares: Sluice errors raised as the
// module's exception classes, timeouts in seconds, dtype names, and the
// client a Python Client, its views and its reservations hold.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>

#include <sluice/client.hpp>
#include <sluice/dict.hpp>
#include <sluice/error.hpp>
#include <sluice/interrupt.hpp>
#include <sluice/result.hpp>

namespace sluice::python {

namespace py = pybind11;

/// Raises the exception class of `e.code()` (sluice.NotFound, ...) with
/// e's message. Requires the GIL.
[[noreturn]] void raise(const error& e);
[[noreturn]] void raise(errc code, std::string message);
/// Raises sluice.ClientClosed.
[[noreturn]] void raise_closed(std::string_view what);

template <class T>
T unwrap(result<T> r) {
  if (!r) raise(r.error());
  return std::move(*r);
}
inline void unwrap(result<void> r) {
  if (!r) raise(r.error());
}

/// Raises KeyboardInterrupt (or whatever a signal handler raised) when a
/// signal came while the GIL was released. Requires the GIL.
void check_signals();

/// The exception object of `e` (an instance of its sluice.Error class),
/// not raised: for results that carry errors. Requires the GIL.
py::object exception_of(const error& e);

/// While a call waits without the GIL: every interrupt_scope::every of
/// waiting, takes the GIL back to run the signal handlers; once one of
/// them raised (Ctrl-C: KeyboardInterrupt), the call gives up and every
/// later wait of it gives up at once.
class signal_watch {
 public:
  signal_watch()
      : scope_{[this] {
          if (raised_) return true;
          py::gil_scoped_acquire gil;
          raised_ = PyErr_CheckSignals() != 0;
          return raised_;
        }} {}
  /// Raises what the handler raised. Requires the GIL.
  void rethrow() const {
    if (raised_) throw py::error_already_set();
  }

 private:
  bool raised_ = false;
  interrupt_scope scope_;
};

/// Runs `f` with the GIL released, interruptible by signals (see
/// signal_watch): what a handler raised is raised once `f` returns.
template <class F>
auto without_gil(F&& f) {
  signal_watch watch;
  if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
    {
      py::gil_scoped_release released;
      f();
    }
    watch.rethrow();
  } else {
    auto out = [&] {
      py::gil_scoped_release released;
      return f();
    }();
    watch.rethrow();
    return out;
  }
}

/// Seconds (None: the client's default, which the C++ API spells 0) as
/// the milliseconds a call takes; invalid_argument when negative.
std::chrono::milliseconds to_timeout(const std::optional<double>& seconds);

/// "float32", numpy.float32, numpy.dtype('float32'), torch.float32 → the
/// dtype; invalid_argument for anything else.
dtype dtype_of(const py::handle& spec);
/// A buffer-protocol format ("<f", "Zd", "?") with its item size → dtype.
std::optional<dtype> dtype_of_format(std::string_view format, std::size_t itemsize);
/// The buffer-protocol format of `type`; bfloat16 has none (nullopt).
std::optional<std::string> format_of(dtype type);

/// True while Python may be entered from a Sluice thread.
inline bool python_alive() { return Py_IsInitialized() != 0 && _Py_IsFinalizing() == 0; }

/// A Python object kept by C++ code that may let go of it on one of
/// Sluice's threads: it is dropped with the GIL taken (or leaked once the
/// interpreter is going away).
class held_object {
 public:
  explicit held_object(py::object o) : obj_(std::move(o)) {}
  ~held_object() { reset(); }
  held_object(const held_object&) = delete;
  held_object& operator=(const held_object&) = delete;
  /// REQUIRES: the GIL.
  py::object& get() noexcept { return obj_; }
  void reset() {
    if (!obj_) return;
    if (!python_alive()) {
      obj_.release();
      return;
    }
    py::gil_scoped_acquire gil;
    obj_ = py::object{};
  }

 private:
  py::object obj_;
};

/// The C++ client behind a Python Client. Views and reservations hold it
/// too, so the client's link — and the read leases it holds for them —
/// lasts until the last of them is gone, even after close().
struct client_holder {
  std::unique_ptr<sluice::client> client;
  /// The client's default deadline (client_options::timeout).
  std::chrono::milliseconds timeout{5000};
  /// Set by close(): no new call is made through it, and views made
  /// from it raise ClientClosed.
  std::atomic<bool> closed{false};

  /// Stops the client's threads with the GIL released: they may be
  /// waiting for it to finish a callback.
  ~client_holder() {
    if (!client) return;
    if (python_alive() && PyGILState_Check() != 0) {
      py::gil_scoped_release released;
      client.reset();
    } else {
      client.reset();
    }
  }

  /// REQUIRES: the GIL (raises ClientClosed once closed).
  sluice::client& use(std::string_view what) {
    if (closed.load(std::memory_order_acquire)) raise_closed(what);
    return *client;
  }
};

/// A Python Client: its C++ client, shared with what it made.
struct py_client {
  std::shared_ptr<client_holder> h;
};

}  // namespace sluice::python
