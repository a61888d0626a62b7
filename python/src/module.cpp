// The _sluice extension module: the classes and functions the `sluice`
// package (python/sluice/__init__.py) exposes.
#include "python/src/common.hpp"
#include "python/src/view.hpp"

namespace sluice::python {
void bind_client(py::module_& m);
void bind_rpc(py::module_& m);
}  // namespace sluice::python

PYBIND11_MODULE(_sluice, m) {
  m.doc() = "Sluice's C++ client, for the sluice package.";
  sluice::python::bind_views(m);
  sluice::python::bind_rpc(m);
  sluice::python::bind_client(m);
}
