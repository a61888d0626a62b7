// sluice.Client and sluice.LocalCluster: the KV verbs over sluice::client,
// with the GIL released while each call waits.

#include <string>
#include <vector>

#include <sluice/node.hpp>


#include "runtime/memory/buffer.hpp"

#include "python/src/common.hpp"
#include "python/src/values.hpp"
#include "python/src/view.hpp"

namespace sluice::python {
namespace {

struct py_cluster {
  std::unique_ptr<local_cluster> cluster;

  local_cluster& use() {
    if (!cluster) raise(errc::unavailable, "the local cluster is stopped");
    return *cluster;
  }
};

/// Runs `f` without the GIL, then raises what a signal handler raised
/// meanwhile (Ctrl-C: KeyboardInterrupt).
template <class F>
auto unlocked(F&& f) {
  auto out = without_gil(std::forward<F>(f));
  check_signals();
  return out;
}

put_options put_options_of(std::optional<double> ttl, unsigned replicas, bool if_absent,
                           std::optional<std::uint64_t> if_version, std::optional<std::string> owner,
                           std::optional<double> timeout, std::optional<unsigned> min_replicas = std::nullopt) {
  put_options o;
  o.timeout = to_timeout(timeout);
  if (ttl) {
    if (*ttl <= 0) raise(errc::invalid_argument, "a ttl is a number of seconds above 0");
    o.ttl = to_timeout(ttl);
  }
  if (replicas < 1 || replicas > 255) raise(errc::invalid_argument, "replicas is 1 to 255");
  o.replicas = replicas;
  if (min_replicas) {
    if (*min_replicas < 1 || *min_replicas > replicas) raise(errc::invalid_argument, "min_replicas is 1 to replicas");
    o.min_replicas = *min_replicas;
  }
  o.if_absent = if_absent;
  if (if_version) {
    if (*if_version == 0) raise(errc::invalid_argument, "if_version names a committed version, which is never 0");
    o.if_version = *if_version;
  }
  if (owner) o.owner = *owner;
  return o;
}


client_transport transport_of(const std::string& name) {
  if (name == "auto") return client_transport::automatic;
  if (name == "tcp") return client_transport::tcp;
  if (name == "shm") return client_transport::shared_memory;
  raise(errc::invalid_argument, "transport is 'auto', 'tcp' or 'shm', not '" + name + "'");
}

py_client connect(const std::string& address, double timeout, double connect_timeout, const std::string& name,
                  const std::string& transport, double keepalive) {
  client_options o;
  o.timeout = to_timeout(timeout);
  o.connect_timeout = to_timeout(connect_timeout);
  o.keepalive = to_timeout(keepalive);
  o.name = name;
  o.transport = transport_of(transport);
  auto c = unlocked([&] { return sluice::client::connect(address, o); });
  auto h = std::make_shared<client_holder>();
  h->client = unwrap(std::move(c));
  h->timeout = o.timeout;
  return py_client{std::move(h)};
}

/// put and put_with_copies: stores `value`, the GIL released meanwhile.
put_result put_value(py_client& c, const char* verb, std::string_view key, py::handle value, std::optional<double> ttl,
                     unsigned replicas, std::optional<unsigned> min_replicas, bool if_absent,
                     std::optional<std::uint64_t> if_version, std::optional<std::string> owner,
                     std::optional<double> timeout) {
  auto& cl = c.h->use(verb);
  auto options = put_options_of(ttl, replicas, if_absent, if_version, std::move(owner), timeout, min_replicas);
  auto plan = plan_put(value);
  return unwrap(unlocked([&] { return run_put(cl, key, *plan, options); }));
}

}  // namespace

void bind_client_rpc(py::class_<py_client>& cls);
void bind_mq(py::module_& m, py::class_<py_client>& cls);

void bind_client(py::module_& m) {
  m.def("_connect", &connect, py::arg("address"), py::arg("timeout"), py::arg("connect_timeout"), py::arg("name"),
        py::arg("transport"), py::arg("keepalive"));

  py::class_<py_client> client_class(m, "Client", py::dynamic_attr(), R"doc(
A connection to the owner of this host (or any owner, over TCP). Make one
with sluice.connect(). Safe to use from many threads; every call releases
the GIL while it waits. Usable as a context manager, which closes it.
)doc");
  client_class.def_property_readonly("address", [](py_client& c) { return c.h->use("address").address(); },
                             "The owner's address (host:port).")
      .def_property_readonly("closed", [](py_client& c) { return c.h->closed.load(); })
      .def(
          "close",
          [](py_client& c) {
            // New calls and views refuse at once; the link itself closes
            // once the last view or array made through it is gone.
            c.h->closed.store(true, std::memory_order_release);
          },
          "Closes the client: further calls, and views it returned, raise ClientClosed.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](py_client& c, py::object, py::object, py::object) {
             c.h->closed.store(true, std::memory_order_release);
             return false;
           })
      .def(
          "put",
          [](py_client& c, std::string_view key, py::handle value, std::optional<double> ttl, unsigned replicas,
             std::optional<unsigned> min_replicas, bool if_absent, std::optional<std::uint64_t> if_version,
             std::optional<std::string> owner, std::optional<double> timeout) {
            return put_value(c, "put", key, value, ttl, replicas, min_replicas, if_absent, if_version,
                             std::move(owner), timeout)
                .version;
          },
          py::arg("key"), py::arg("value"), py::kw_only(), py::arg("ttl") = py::none(), py::arg("replicas") = 1,
          py::arg("min_replicas") = py::none(), py::arg("if_absent") = false, py::arg("if_version") = py::none(),
          py::arg("owner") = py::none(), py::arg("timeout") = py::none(),
          "Stores value under key; returns the new version. With replicas > 1 the put succeeds once every "
          "copy is committed, or once min_replicas of them are (put_with_copies says how many).")
      .def(
          "put_with_copies",
          [](py_client& c, std::string_view key, py::handle value, std::optional<double> ttl, unsigned replicas,
             std::optional<unsigned> min_replicas, bool if_absent, std::optional<std::uint64_t> if_version,
             std::optional<std::string> owner, std::optional<double> timeout) {
            auto r = put_value(c, "put_with_copies", key, value, ttl, replicas, min_replicas, if_absent,
                               if_version, std::move(owner), timeout);
            return py::make_tuple(r.version, r.copies);
          },
          py::arg("key"), py::arg("value"), py::kw_only(), py::arg("ttl") = py::none(), py::arg("replicas") = 1,
          py::arg("min_replicas") = py::none(), py::arg("if_absent") = false, py::arg("if_version") = py::none(),
          py::arg("owner") = py::none(), py::arg("timeout") = py::none(),
          "As put, returning (version, copies): the copies committed on distinct owners, fewer than replicas "
          "only under min_replicas (the rest are made by repair).")
      .def(
          "get",
          [](py_client& c, std::string_view key, bool raw, std::optional<double> timeout) -> py::object {
            auto& cl = c.h->use("get");
            call_options o{to_timeout(timeout)};
            auto v = unlocked([&] { return cl.get(key, o); });
            if (!v && v.code() == errc::not_found) return py::none();
            return to_python(c.h, unwrap(std::move(v)), raw);
          },
          py::arg("key"), py::kw_only(), py::arg("raw") = false, py::arg("timeout") = py::none(),
          "The latest committed version of key (a View, or a dict for a dict value), or None.")
      .def(
          "get_into",
          [](py_client& c, std::string_view key, py::handle buffer, std::optional<double> timeout) {
            auto& cl = c.h->use("get_into");
            borrowed_buffer out{buffer, "get_into's buffer", true};
            call_options o{to_timeout(timeout)};
            return unwrap(unlocked([&] { return cl.get_into(key, out.bytes(), o); }));
          },
          py::arg("key"), py::arg("buffer"), py::kw_only(), py::arg("timeout") = py::none(),
          "Copies the value's bytes into buffer (writable, C-contiguous); returns how many.")
      .def(
          "exists",
          [](py_client& c, std::string_view key, std::optional<double> timeout) {
            auto& cl = c.h->use("exists");
            call_options o{to_timeout(timeout)};
            return unwrap(unlocked([&] { return cl.exists(key, o); }));
          },
          py::arg("key"), py::kw_only(), py::arg("timeout") = py::none())
      .def(
          "remove",
          [](py_client& c, std::string_view key, std::optional<std::uint64_t> if_version,
             std::optional<double> timeout) {
            auto& cl = c.h->use("remove");
            remove_options o{.timeout = to_timeout(timeout), .if_version = if_version.value_or(0)};
            return unwrap(unlocked([&] { return cl.remove(key, o); }));
          },
          py::arg("key"), py::kw_only(), py::arg("if_version") = py::none(), py::arg("timeout") = py::none(),
          "Removes key; returns whether it had a committed version.")
      .def(
          "list",
          [](py_client& c, std::string_view prefix, std::string start_after, std::optional<std::size_t> limit,
             std::optional<double> timeout) {
            auto& cl = c.h->use("list");
            std::vector<std::string> keys;
            list_options o{.timeout = to_timeout(timeout), .start_after = std::move(start_after)};
            while (!limit || keys.size() < *limit) {
              if (limit) o.limit = static_cast<std::uint32_t>(std::min<std::size_t>(*limit - keys.size(), 10000));
              auto page = unwrap(unlocked([&] { return cl.list(prefix, o); }));
              for (auto& k : page.keys) keys.push_back(std::move(k.key));
              if (!page.more || page.keys.empty()) break;
              o.start_after = keys.back();
            }
            return keys;
          },
          py::arg("prefix") = "", py::kw_only(), py::arg("start_after") = "", py::arg("limit") = py::none(),
          py::arg("timeout") = py::none(), "Committed keys starting with prefix, in bytewise order.")
      .def(
          "count",
          [](py_client& c, std::string_view prefix, std::optional<double> timeout) {
            auto& cl = c.h->use("count");
            call_options o{to_timeout(timeout)};
            return unwrap(unlocked([&] { return cl.count(prefix, o); }));
          },
          py::arg("prefix") = "", py::kw_only(), py::arg("timeout") = py::none())
      .def(
          "put_many",
          [](py_client& c, py::handle items, std::optional<double> ttl, unsigned replicas, bool if_absent,
             std::optional<double> timeout, bool return_exceptions) {
            auto& cl = c.h->use("put_many");
            auto options = put_options_of(ttl, replicas, if_absent, std::nullopt, std::nullopt, timeout);
            py::object pairs = py::isinstance<py::dict>(items) ? items.attr("items")() : py::reinterpret_borrow<py::object>(items);
            std::vector<std::string> keys;
            std::vector<std::unique_ptr<put_plan>> plans;
            for (auto item : pairs) {
              auto pair = py::reinterpret_borrow<py::sequence>(item);
              if (py::len(pair) != 2) raise(errc::invalid_argument, "put_many takes (key, value) pairs");
              keys.push_back(pair[0].cast<std::string>());
              plans.push_back(plan_put(pair[1]));
            }
            std::vector<result<std::uint64_t>> done;
            bool plain = options.ttl.count() == 0 && options.replicas == 1 && !options.if_absent;
            for (auto& p : plans) plain = plain && p->kind == put_plan::shape::bytes;
            {
              py::gil_scoped_release released;
              if (plain) {
                std::vector<std::pair<std::string_view, std::span<const std::byte>>> batch;
                for (std::size_t i = 0; i < keys.size(); ++i) batch.emplace_back(keys[i], plans[i]->bytes);
                done = cl.put_batch(batch, call_options{options.timeout});
              } else {
                for (std::size_t i = 0; i < keys.size(); ++i) {
                  auto r = run_put(cl, keys[i], *plans[i], options);
                  done.push_back(r ? result<std::uint64_t>{r->version} : result<std::uint64_t>{std::move(r).error()});
                }
              }
            }
            check_signals();
            py::list out;
            for (auto& r : done) {
              if (r) {
                out.append(py::int_(*r));
              } else if (return_exceptions) {
                out.append(exception_of(r.error()));
              } else {
                raise(r.error());
              }
            }
            return out;
          },
          py::arg("items"), py::kw_only(), py::arg("ttl") = py::none(), py::arg("replicas") = 1,
          py::arg("if_absent") = false, py::arg("timeout") = py::none(), py::arg("return_exceptions") = false,
          "Several puts (a dict, or (key, value) pairs); one version per item, in order.")
      .def(
          "get_many",
          [](py_client& c, std::vector<std::string> keys, bool raw, std::optional<double> timeout,
             bool return_exceptions) {
            auto& cl = c.h->use("get_many");
            std::vector<std::string_view> views(keys.begin(), keys.end());
            call_options o{to_timeout(timeout)};
            auto done = unlocked([&] { return cl.get_batch(views, o); });
            py::list out;
            for (auto& r : done) {
              if (r) {
                out.append(to_python(c.h, std::move(*r), raw));
              } else if (r.code() == errc::not_found) {
                out.append(py::none());
              } else if (return_exceptions) {
                out.append(exception_of(r.error()));
              } else {
                raise(r.error());
              }
            }
            return out;
          },
          py::arg("keys"), py::kw_only(), py::arg("raw") = false, py::arg("timeout") = py::none(),
          py::arg("return_exceptions") = false, "Several gets; one value (or None) per key, in order.")
      .def(
          "reserve",
          [](py_client& c, std::string_view key, py::handle spec, std::optional<double> ttl, unsigned replicas,
             bool if_absent, std::optional<std::uint64_t> if_version, std::optional<double> timeout) {
            auto options = put_options_of(ttl, replicas, if_absent, if_version, std::nullopt, timeout);
            return reserve(c.h, key, spec, options);
          },
          py::arg("key"), py::arg("size_or_shape_dtype"), py::kw_only(), py::arg("ttl") = py::none(),
          py::arg("replicas") = 1, py::arg("if_absent") = false, py::arg("if_version") = py::none(),
          py::arg("timeout") = py::none(),
          "Room for a new value of N bytes, or of a (shape, dtype) tensor, written in place; commit() it.")
      .def(
          "pin",
          [](py_client& c, std::string_view key, std::optional<double> ttl, std::optional<double> timeout) {
            auto& cl = c.h->use("pin");
            pin_options o{.timeout = to_timeout(timeout), .ttl = ttl ? to_timeout(ttl) : std::chrono::milliseconds{0}};
            return unwrap(unlocked([&] { return cl.pin(key, o); }));
          },
          py::arg("key"), py::kw_only(), py::arg("ttl") = py::none(), py::arg("timeout") = py::none(),
          "Keeps key from eviction while this client lives (or for ttl seconds); returns its version.")
      .def(
          "unpin",
          [](py_client& c, std::string_view key, std::optional<double> timeout) {
            auto& cl = c.h->use("unpin");
            pin_options o{.timeout = to_timeout(timeout)};
            return unwrap(unlocked([&] { return cl.unpin(key, o); }));
          },
          py::arg("key"), py::kw_only(), py::arg("timeout") = py::none());

  client_class.def(
      "status",
      [](py_client& c, std::optional<double> timeout) {
        auto& cl = c.h->use("status");
        call_options o{to_timeout(timeout)};
        auto st = unwrap(unlocked([&] { return cl.status(o); }));
        py::list members;
        for (const auto& mi : st.members) {
          py::dict d;
          d["id"] = mi.id;
          d["role"] = mi.role;
          d["name"] = mi.name;
          d["address"] = mi.address;
          d["up"] = mi.up;
          d["capacity_bytes"] = mi.capacity_bytes;
          d["used_bytes"] = mi.used_bytes;
          d["object_count"] = mi.object_count;
          d["evictions"] = mi.evictions;
          d["under_replicated_puts"] = mi.under_replicated_puts;
          d["stored_bytes"] = mi.stored_bytes;
          d["stored_objects"] = mi.stored_objects;
          d["master_via"] = mi.master_via_id;
          members.append(d);
        }
        py::dict out;
        out["master_id"] = st.master_id;
        out["object_count"] = st.object_count;
        out["members"] = members;
        py::dict repair;
        repair["under_replicated"] = st.repair.under_replicated;
        repair["without_live_copy"] = st.repair.without_live_copy;
        repair["copies_in_flight"] = st.repair.copies_in_flight;
        repair["copies_made"] = st.repair.copies_made;
        repair["bytes_copied"] = st.repair.bytes_copied;
        repair["copies_failed"] = st.repair.copies_failed;
        out["repair"] = repair;
        return out;
      },
      py::kw_only(), py::arg("timeout") = py::none(),
      "The cluster as the master knows it: master_id, object_count, members (dicts) and repair (a dict: "
      "under_replicated, without_live_copy, copies_in_flight, copies_made, bytes_copied, copies_failed).");

  client_class.def(
      "_get_async",
      [](py_client& c, std::string_view key, bool raw, std::optional<double> timeout, py::object done) {
        auto& cl = c.h->use("aget");
        auto client = c.h;
        auto callback = std::make_shared<held_object>(std::move(done));
        call_options o{to_timeout(timeout)};
        py::gil_scoped_release released;
        cl.get_async(
            key,
            [client, callback, raw](result<value> r) {
              if (!python_alive()) return;
              py::gil_scoped_acquire gil;
              try {
                if (r) {
                  callback->get()(to_python(client, std::move(*r), raw), py::none());
                } else if (r.code() == errc::not_found) {
                  callback->get()(py::none(), py::none());
                } else {
                  callback->get()(py::none(), exception_of(r.error()));
                }
              } catch (py::error_already_set& e) {
                e.discard_as_unraisable("sluice: completing aget");
              }
              callback->get() = py::object{};
            },
            o);
      },
      py::arg("key"), py::arg("raw"), py::arg("timeout"), py::arg("done"));
  client_class.def(
      "_put_async",
      [](py_client& c, std::string_view key, py::handle value, std::optional<double> timeout, py::object done) {
        auto& cl = c.h->use("aput");
        auto plan = plan_put(value);
        auto callback = std::make_shared<held_object>(std::move(done));
        call_options o{to_timeout(timeout)};
        auto finish = [callback](result<std::uint64_t> r) {
          if (!python_alive()) return;
          py::gil_scoped_acquire gil;
          try {
            if (r) {
              callback->get()(py::int_(*r), py::none());
            } else {
              callback->get()(py::none(), exception_of(r.error()));
            }
          } catch (py::error_already_set& e) {
            e.discard_as_unraisable("sluice: completing aput");
          }
          callback->get() = py::object{};
        };
        // put_async copies the bytes at once: what the plan borrows may go
        // when it returns.
        if (plan->kind == put_plan::shape::bytes) {
          py::gil_scoped_release released;
          cl.put_async(key, plan->bytes, finish, o);
          return;
        }
        auto encoded = byte_buffer::allocate(plan->size());
        unwrap(plan->write_into(encoded.span()));
        py::gil_scoped_release released;
        cl.put_async(key, std::span<const std::byte>{encoded.data(), encoded.size()}, finish, o);
      },
      py::arg("key"), py::arg("value"), py::arg("timeout"), py::arg("done"));

  bind_client_rpc(client_class);
  bind_mq(m, client_class);

  py::class_<py_cluster>(m, "LocalCluster", R"doc(
A master and an owner in this process, as `sluice up` runs them: for
tests, notebooks and single-host jobs. Connect to it with
sluice.connect(cluster.address). Stopped by stop(), or at the end of a
with block.
)doc")
      .def(py::init([](std::optional<std::string> config, std::optional<std::string> config_text,
                       std::optional<std::string> listen) {
             local_cluster_options o;
             if (config) o.config_file = *config;
             if (config_text) o.config_text = *config_text;
             if (listen) o.listen = *listen;
             auto started = unlocked([&] { return local_cluster::start(o); });
             return py_cluster{unwrap(std::move(started))};
           }),
           py::kw_only(), py::arg("config") = py::none(), py::arg("config_text") = py::none(),
           py::arg("listen") = py::none())
      .def_property_readonly("address", [](py_cluster& c) { return c.use().client_address(); })
      .def_property_readonly("master_address", [](py_cluster& c) { return c.use().master_address(); })
      .def("stop",
           [](py_cluster& c) {
             auto gone = std::move(c.cluster);
             py::gil_scoped_release released;
             gone.reset();
           })
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](py_cluster& c, py::object, py::object, py::object) {
        auto gone = std::move(c.cluster);
        py::gil_scoped_release released;
        gone.reset();
        return false;
      });
}

}  // namespace sluice::python
