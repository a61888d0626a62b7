// RPC from Python: the primitives the sluice package builds serve(),
// call(), call_async() and streams on (python/sluice/_rpc.py). Arguments,
// results and stream items are dicts, taking the KV path: a large one is
// written once into the owner's pool and read in place by the other side,
// and what reaches Python are Views of it.
//
// Callbacks from Sluice's threads (a served call, an asynchronous call's
// answer) take the GIL only to hand the work to Python — a thread pool or
// an event loop — and never run user code there.
#include <sluice/rpc.hpp>

#include "python/src/common.hpp"
#include "python/src/values.hpp"
#include "python/src/view.hpp"

namespace sluice::python {
namespace {

/// A call whose deadline is longer than this is waited for in slices of
/// signal_slice, looking at signals between them; a shorter one waits on
/// the calling thread's own channel, which is faster and not interrupted.
constexpr std::chrono::milliseconds interruptible_after{1000};
constexpr std::chrono::milliseconds signal_slice{50};

/// One served call as Python sees it.
struct py_request {
  std::shared_ptr<rpc_request> request;
  std::shared_ptr<client_holder> client;
};

struct py_promise {
  std::shared_ptr<rpc_promise> promise;
};

struct py_writer {
  std::shared_ptr<rpc_stream_writer> writer;
};

struct py_stream {
  std::shared_ptr<rpc_stream> stream;
  std::shared_ptr<client_holder> client;
};

rpc_target target_of(const std::optional<std::string>& target) {
  if (!target || target->empty() || *target == "any") return rpc_target::any();
  return rpc_target::of(*target);
}

rpc_routing routing_of(const std::string& name) {
  if (name == "round_robin") return rpc_routing::round_robin;
  if (name == "least_outstanding") return rpc_routing::least_outstanding;
  raise(errc::invalid_argument, "routing is 'round_robin' or 'least_outstanding', not '" + name + "'");
}

/// An rpc_result as a Python dict (its bytes and tensors Views of it).
py::object result_to_python(const std::shared_ptr<client_holder>& client, rpc_result r) {
  auto keep = std::make_shared<rpc_result>(std::move(r));
  return dict_to_python(client, keep, keep->dict());
}



/// An error to answer with, from what a handler raised: a sluice.Error
/// keeps its code; anything else is handler_failed with its text.
error error_of(py::handle exc) {
  std::string text = py::str(exc).cast<std::string>();
  if (py::hasattr(exc, "code")) {
    auto code = py::getattr(exc, "code");
    if (py::isinstance<py::str>(code)) {
      auto name = code.cast<std::string>();
      for (int c = 1; c <= static_cast<int>(errc_last); ++c) {
        auto e = static_cast<errc>(c);
        if (to_string(e) == name) {
          // str(e) starts with the code's name already.
          auto prefix = name + ": ";
          if (text.starts_with(prefix)) text = text.substr(prefix.size());
          return error{e, text};
        }
      }
    }
  }
  auto type = py::str(py::type::handle_of(exc).attr("__name__")).cast<std::string>();
  return error{errc::handler_failed, type + ": " + text};
}

}  // namespace

void bind_rpc(py::module_& m) {
  py::class_<py_request>(m, "Request", "One served call: its method, arguments and caller.")
      .def_property_readonly("method", [](py_request& r) { return r.request->method(); })
      .def_property_readonly("caller", [](py_request& r) { return r.request->caller(); },
                             "The calling client's id.")
      .def_property_readonly(
          "args",
          [](py_request& r) {
            auto keep = std::shared_ptr<const void>{r.request, r.request.get()};
            return dict_to_python(r.client, keep, r.request->args());
          },
          "The arguments: a dict of ints, floats, bools, strs and Views of the caller's bytes.")
      .def_property_readonly("cancelled", [](py_request& r) { return r.request->cancelled(); },
                             "True once the caller cancelled the call or its deadline passed.")
      .def_property_readonly(
          "time_left",
          [](py_request& r) {
            auto left = r.request->deadline() - std::chrono::steady_clock::now();
            return std::max(0.0, std::chrono::duration<double>(left).count());
          },
          "Seconds until the caller stops waiting.")
      .def_property_readonly(
          "args_in_pool",
          [](py_request& r) { return r.request->args_location().has_value(); },
          "True when the arguments are read in place in the owner's pool.");

  py::class_<py_promise>(m, "_Promise")
      .def("reply",
           [](py_promise& p, py::handle result) {
             auto plan = plan_dict(result, "a handler's result");
             without_gil([&] {
               p.promise->reply(plan->dict);
               return 0;
             });
           })
      .def("reply_error",
           [](py_promise& p, py::handle exc) {
             auto e = error_of(exc);
             without_gil([&] {
               p.promise->reply_error(e);
               return 0;
             });
           })
      .def_property_readonly("answered", [](py_promise& p) { return p.promise->answered(); });

  py::class_<py_writer>(m, "StreamWriter", "The serving end of a stream: one write() per item.")
      .def(
          "write",
          [](py_writer& w, py::handle item) {
            auto plan = plan_dict(item, "a stream item");
            auto written = without_gil([&] { return w.writer->write(plan->dict); });
            check_signals();
            unwrap(std::move(written));
          },
          "Sends one item, waiting for the caller's credit (up to the stream's deadline).")
      .def("finish", [](py_writer& w) { without_gil([&] { w.writer->finish(); return 0; }); })
      .def("fail",
           [](py_writer& w, py::handle exc) {
             auto e = error_of(exc);
             without_gil([&] {
               w.writer->fail(e);
               return 0;
             });
           })
      .def_property_readonly("cancelled", [](py_writer& w) { return w.writer->cancelled(); })
      .def_property_readonly("credit", [](py_writer& w) { return w.writer->credit(); });

  py::class_<py_stream>(m, "_Stream")
      .def(
          "next",
          [](py_stream& s, double wait) -> py::object {
            auto slice = std::chrono::milliseconds{std::max<std::int64_t>(1, static_cast<std::int64_t>(wait * 1000))};
            auto item = without_gil([&] { return s.stream->next(slice); });
            if (!item) {
              // The slice ended first: the stream goes on.
              if (item.code() == errc::timeout && item.error().message().ends_with("the stream goes on")) {
                return py::ellipsis();
              }
              raise(item.error());
            }
            if (!*item) return py::none();
            return result_to_python(s.client, std::move(**item));
          },
          py::arg("wait"))
      .def("cancel", [](py_stream& s) { without_gil([&] { s.stream->cancel(); return 0; }); });

}

void bind_client_rpc(py::class_<py_client>& cls) {
  cls.def_property_readonly(
      "rpc_id", [](py_client& c) { return c.h->use("rpc_id").rpc().id(); },
      "This client's id as RPC callers name it (call(target=...)).");
  cls.def(
      "_serve",
      [](py_client& c, std::string name, py::object dispatch, std::uint32_t max_concurrent, bool stream) {
        auto& rpc = c.h->use("serve").rpc();
        serve_options o;
        o.max_concurrent = max_concurrent;
        auto client = c.h;
        // The dispatcher runs on the serving thread with the GIL: it only
        // hands the call to a pool or a loop (sluice/_rpc.py).
        auto shared = std::make_shared<held_object>(std::move(dispatch));
        result<void> served = error{errc::internal, "not served"};
        if (stream) {
          served = rpc.serve_stream(
              name,
              [shared, client](rpc_request req, rpc_stream_writer writer) {
                if (!python_alive()) return writer.fail(error{errc::unavailable, "the Python process is exiting"});
                py::gil_scoped_acquire gil;
                try {
                  shared->get()(py_request{std::make_shared<rpc_request>(std::move(req)), client},
                                py_writer{std::make_shared<rpc_stream_writer>(std::move(writer))});
                } catch (py::error_already_set& e) {
                  e.discard_as_unraisable("sluice: dispatching a served stream");
                }
              },
              o);
        } else {
          served = rpc.serve_async(
              name,
              [shared, client](rpc_request req, rpc_promise promise) {
                if (!python_alive()) return promise.reply_error(error{errc::unavailable, "the Python process is exiting"});
                py::gil_scoped_acquire gil;
                auto p = std::make_shared<rpc_promise>(std::move(promise));
                try {
                  shared->get()(py_request{std::make_shared<rpc_request>(std::move(req)), client}, py_promise{p});
                } catch (py::error_already_set& e) {
                  p->reply_error(error{errc::handler_failed, std::string{"dispatching the call failed: "} + e.what()});
                }
              },
              o);
        }
        unwrap(std::move(served));
      },
      py::arg("name"), py::arg("dispatch"), py::arg("max_concurrent"), py::arg("stream"));
  cls.def(
      "unserve",
      [](py_client& c, std::string_view name) {
        auto& rpc = c.h->use("unserve").rpc();
        unwrap(without_gil([&] { return rpc.unserve(name); }));
      },
      py::arg("name"), "Stops serving name (NotFound when this client does not serve it).");
  cls.def(
      "call",
      [](py_client& c, std::optional<std::string> target, std::string_view method, py::handle args,
         std::optional<double> timeout, const std::string& routing) {
        auto& rpc = c.h->use("call").rpc();
        auto plan = plan_dict(args, "a call's arguments");
        rpc_call_options o{.timeout = to_timeout(timeout), .routing = routing_of(routing)};
        auto t = target_of(target);
        auto deadline = o.timeout.count() > 0 ? o.timeout : c.h->timeout;
        if (deadline <= interruptible_after) {
          // Short: on the calling thread's own channel, the fastest way.
          auto r = without_gil([&] { return rpc.call(t, method, plan->dict, o); });
          check_signals();
          return result_to_python(c.h, unwrap(std::move(r)));
        }
        // Long: waited for in slices, so that Ctrl-C (or any signal whose
        // handler raises) interrupts it, and cancels the call.
        auto future = without_gil([&] { return rpc.call_async(t, method, plan->dict, o); });
        while (!without_gil([&] { return future.wait_for(signal_slice); })) {
          if (PyErr_CheckSignals() != 0) {
            future.cancel();
            throw py::error_already_set();
          }
        }
        auto r = without_gil([&] { return future.get(); });
        return result_to_python(c.h, unwrap(std::move(r)));
      },
      py::arg("target"), py::arg("method"), py::arg("args") = py::none(), py::kw_only(),
      py::arg("timeout") = py::none(), py::arg("routing") = "round_robin",
      "Calls method on target (None: any instance) and waits for its result, a dict.");
  cls.def(
      "_call_async",
      [](py_client& c, std::optional<std::string> target, std::string_view method, py::handle args,
         std::optional<double> timeout, const std::string& routing, py::object done) {
        auto& rpc = c.h->use("call_async").rpc();
        auto plan = plan_dict(args, "a call's arguments");
        rpc_call_options o{.timeout = to_timeout(timeout), .routing = routing_of(routing)};
        auto t = target_of(target);
        auto client = c.h;
        auto callback = std::make_shared<held_object>(std::move(done));
        auto handle = without_gil([&] {
          return rpc.call_async(
              t, method, plan->dict,
              [client, callback](result<rpc_result> r) {
                if (!python_alive()) return;
                py::gil_scoped_acquire gil;
                try {
                  if (r) {
                    callback->get()(result_to_python(client, std::move(*r)), py::none());
                  } else {
                    callback->get()(py::none(), exception_of(r.error()));
                  }
                } catch (py::error_already_set& e) {
                  e.discard_as_unraisable("sluice: completing an asynchronous call");
                }
                callback->get() = py::object{};
              },
              o);
        });
        // The arguments were encoded when the call was sent: their buffers
        // may go now.
        return py::cpp_function([handle] { handle.cancel(); });
      },
      py::arg("target"), py::arg("method"), py::arg("args"), py::arg("timeout"), py::arg("routing"),
      py::arg("done"));
  cls.def(
      "_call_stream",
      [](py_client& c, std::optional<std::string> target, std::string_view method, py::handle args,
         std::optional<double> timeout, const std::string& routing, std::uint32_t window) {
        auto& rpc = c.h->use("call_stream").rpc();
        auto plan = plan_dict(args, "a stream's arguments");
        rpc_stream_options o{.timeout = to_timeout(timeout), .routing = routing_of(routing), .window = window};
        auto t = target_of(target);
        auto s = without_gil([&] { return rpc.call_stream(t, method, plan->dict, o); });
        return py_stream{std::make_shared<rpc_stream>(std::move(s)), c.h};
      },
      py::arg("target"), py::arg("method"), py::arg("args"), py::arg("timeout"), py::arg("routing"),
      py::arg("window"));
}

}  // namespace sluice::python
