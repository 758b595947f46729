// The `lazytensor._C` extension module: error translation, the Python-number caster, sync points,
// and the assembly of the per-topic bindings. The user-facing API lives in the pure-Python package
// (bindings/python/lazytensor/), which builds PyTorch's calling conventions on top of this module.
#include <Python.h>

#include <stdexcept>

#include "backends/backend.h"
#include "bindings.h"
#include "runtime/dynamic_shapes.h"
#include "runtime/executor.h"
#include "runtime/index_check.h"
#include "runtime/tensor_impl.h"

namespace pybind11::detail {

bool type_caster<lt::Scalar>::load(handle src, bool convert) {
  PyObject* o = src.ptr();
  if (PyBool_Check(o)) {
    value = lt::Scalar(o == Py_True);
    return true;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    // An int past int64 is an error of PyTorch's type, not a mismatch: declining it would end in
    // pybind's "incompatible function arguments" TypeError. As in PyTorch 2, one in uint64's range
    // is a RuntimeError where it becomes an int64 value; past that, an OverflowError.
    if (overflow > 0) {
      PyLong_AsUnsignedLongLong(o);
      if (!PyErr_Occurred())
        throw std::runtime_error("value cannot be converted to type int64_t without overflow");
      PyErr_Clear();
    }
    if (overflow) {
      PyErr_SetString(PyExc_OverflowError, overflow > 0 ? "int too big to convert"
                                                        : "can't convert negative int to unsigned");
      throw error_already_set();
    }
    if (v == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = lt::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyFloat_Check(o)) {
    value = lt::Scalar(PyFloat_AS_DOUBLE(o));
    return true;
  }
  if (!convert) return false;
  // NumPy scalars (np.float32(2.5), np.int64(3), np.bool_(True)): by their kind, as PyTorch does.
  static PyObject* np_bool = nullptr;
  static PyObject* np_integer = nullptr;
  static PyObject* np_floating = nullptr;
  if (!np_bool) {
    PyObject* np = PyImport_ImportModule("numpy");
    if (!np) {
      PyErr_Clear();
      return false;
    }
    np_bool = PyObject_GetAttrString(np, "bool_");
    np_integer = PyObject_GetAttrString(np, "integer");
    np_floating = PyObject_GetAttrString(np, "floating");
    Py_DECREF(np);
    if (!np_bool || !np_integer || !np_floating) {
      PyErr_Clear();
      return false;
    }
  }
  if (PyObject_IsInstance(o, np_bool) == 1) {
    value = lt::Scalar(PyObject_IsTrue(o) == 1);
    return true;
  }
  if (PyObject_IsInstance(o, np_integer) == 1) {
    PyObject* i = PyNumber_Index(o);
    if (!i) {
      PyErr_Clear();
      return false;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(i, &overflow);
    Py_DECREF(i);
    if (overflow || (v == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return false;
    }
    value = lt::Scalar(static_cast<int64_t>(v));
    return true;
  }
  if (PyObject_IsInstance(o, np_floating) == 1) {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    value = lt::Scalar(d);
    return true;
  }
  PyErr_Clear();
  return false;
}

}  // namespace pybind11::detail

namespace lt::python {

void init_errors(py::module_& m) {
  // lt::Error carries the kind of exception PyTorch raises for the same mistake.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lt::Error& e) {
      PyObject* type = PyExc_RuntimeError;
      switch (e.kind()) {
        case ErrorKind::Runtime:
          type = PyExc_RuntimeError;
          break;
        case ErrorKind::Value:
          type = PyExc_ValueError;
          break;
        case ErrorKind::Type:
          type = PyExc_TypeError;
          break;
        case ErrorKind::Index:
          type = PyExc_IndexError;
          break;
        case ErrorKind::NotImplemented:
          type = PyExc_NotImplementedError;
          break;
      }
      PyErr_SetString(type, e.what());
    }
  });
}

void init_sync(py::module_& m) {
  py::enum_<SyncReason>(m, "SyncReason")
      .value("mark_step", SyncReason::MarkStep)
      .value("item", SyncReason::Item)
      .value("numpy", SyncReason::Numpy)
      .value("print", SyncReason::Print)
      .value("to_cpu", SyncReason::ToCpu)
      .value("tolist", SyncReason::ToList)
      .value("sync", SyncReason::Sync)
      .value("eager", SyncReason::Eager)
      .value("control_flow", SyncReason::ControlFlow);

  // Syncs compile and run graphs: other Python threads may go on meanwhile.
  m.def("mark_step", &lt::mark_step, py::call_guard<PinSource, py::gil_scoped_release>(),
        "Materializes every live pending lazy tensor (the end of a training step).");
  m.def("sync", &lt::sync, py::arg("tensors"), py::arg("reason") = SyncReason::Sync,
        py::call_guard<PinSource, py::gil_scoped_release>(),
        "Materializes these tensors and what they depend on; other pending tensors stay pending.");
  // lt.mark_dynamic: the dim of the tensor's data is symbolic in every graph it enters (issue 30).
  m.def(
      "mark_dynamic",
      [](const Tensor& t, int64_t dim) {
        const int64_t rank = static_cast<int64_t>(t.shape().size());
        if (dim < -rank || dim >= rank)
          throw py::index_error("mark_dynamic: dim " + std::to_string(dim) +
                                " out of range for a tensor of shape " + shape_str(t.shape()));
        if (dim < 0) dim += rank;
        if (!t.device().is_lazy())
          throw py::value_error("mark_dynamic: the tensor is on " + t.device().str() +
                                "; only lazy tensors enter graphs");
        if (t.is_pending()) lt::sync({t}, SyncReason::Sync);
        std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
        const auto& s = t.impl()->storage;
        if (!s) throw py::value_error("mark_dynamic: the tensor has no data");
        lt::mark_dynamic(*s, static_cast<int>(dim));
      },
      py::arg("tensor"), py::arg("dim"), py::call_guard<PinSource>());
  m.def("pending_tensor_count", &lt::pending_tensor_count,
        "Number of live lazy tensors with pending IR.");
  m.def("manual_seed", &lt::manual_seed, py::arg("seed"));
  // lazytensor.backends.cuda.matmul.allow_tf32: read by each CUDA GEMM launch (backends/backend.h).
  m.def("matmul_allow_tf32", &lt::matmul_allow_tf32);
  m.def("set_matmul_allow_tf32", &lt::set_matmul_allow_tf32, py::arg("on"));
  // lazytensor.backends.cudnn: allow_tf32 is read by each cuDNN convolution launch; the version
  // is 0 where cuDNN does not load (or the build has no CUDA backend).
  m.def("conv_allow_tf32", &lt::conv_allow_tf32);
  m.def("set_conv_allow_tf32", &lt::set_conv_allow_tf32, py::arg("on"));
  m.def("cudnn_version", [] {
    std::string why;
    const size_t v = lt::cuda_conv_library_version(&why);
    return py::make_tuple(v, why);
  });
  m.def("set_cpu_share_openmp_threads", &lt::set_cpu_share_openmp_threads, py::arg("on"));
  m.def("cpu_share_openmp_threads", &lt::cpu_share_openmp_threads);
  m.def("set_lazy_backend", &lt::set_lazy_backend, py::arg("name"));
  m.def("default_lazy_backend", &lt::default_lazy_backend);
  m.def("backend_available", &lt::backend_available, py::arg("name"));
  m.def(
      "synchronize_backend",
      [](const std::string& name) {
        lt::get_backend(name).synchronize();
        lt::index_checks::check_unread();  // a bad index of an earlier step raises here
      },
      py::arg("name"), py::call_guard<py::gil_scoped_release>(),
      "Waits for the backend's queued work (CUDA runs are asynchronous).");
  m.def("_clear_graph_cache", &lt::clear_graph_cache, py::call_guard<py::gil_scoped_release>(),
        "Drops every compiled graph of this process (benchmarks: executables read LT_CUDA_GRAPHS "
        "when they are created).");
}

}  // namespace lt::python

PYBIND11_MODULE(_C, m) {
  m.doc() = "lazytensor's C++ runtime (use the `lazytensor` package, not this module)";
  using namespace lt::python;
  init_errors(m);
  init_dtypes(m);
  init_devices(m);
  init_sync(m);
  init_tensor(m);
  init_ops(m);
  init_metrics(m);
  init_autograd(m);
  init_debug(m);
  init_source_locations(m);
  init_capture(m);
  init_serialization(m);
  init_dlpack(m);
  init_distributed(m);
}
