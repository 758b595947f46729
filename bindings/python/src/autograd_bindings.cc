// Autograd and debugging for Python: Tensor.requires_grad / grad / backward / detach / is_leaf,
// the grad mode switch behind lt.no_grad(), lt.autograd.grad, and lt.debug (runtime/debug.h).
// The PyTorch-style wrappers (context managers, decorators, grad_fn objects) live in the
// pure-Python package (lazytensor/autograd.py, lazytensor/debug.py).
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "runtime/debug.h"
#include "runtime/tensor_impl.h"

namespace lt::python {
namespace {

py::object tensor_or_none(const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); }

std::vector<Tensor> defined_or_empty(const std::vector<std::optional<Tensor>>& ts) {
  std::vector<Tensor> r;
  for (auto& t : ts) r.push_back(t ? *t : Tensor());
  return r;
}

// PyTorch's `param.data = value`: this tensor now is `value`'s data (device, dtype and shape may
// change), keeping its identity and requires_grad flag. Used by Module.to() and load_state_dict.
void set_data(Tensor& self, const Tensor& value) {
  if (!self.defined() || !value.defined()) fail(ErrorKind::Runtime, "set_data: undefined tensor");
  if (!self.is_leaf())
    fail(ErrorKind::Runtime, "set_data: only leaf tensors can have their data replaced");
  Tensor v = value.detach();
  TensorImpl& t = *self.impl();
  TensorImpl& s = *v.impl();
  bool moved = t.device != s.device || t.dtype != s.dtype || t.shape != s.shape;
  t.device = s.device;
  t.dtype = s.dtype;
  t.shape = s.shape;
  t.storage = s.storage;
  t.pending = s.pending;
  t.leaf.reset();
  if (t.pending)
    registry_add(&t);
  else
    registry_remove(&t);
  // A gradient of another device, dtype or shape no longer fits.
  if (moved && t.autograd) t.autograd->grad = Tensor();
}

// A Python callable queued with lt::queue_callback. The queue is thread-local, so the main
// thread's is destroyed at exit, after the interpreter is finalized: a callable still queued then
// (a forward with no backward after it) is let go without touching Python.
struct QueuedPython {
  py::object fn;
  explicit QueuedPython(py::object f) : fn(std::move(f)) {}
  QueuedPython(const QueuedPython&) = delete;
  QueuedPython& operator=(const QueuedPython&) = delete;
  ~QueuedPython() {
    if (!Py_IsInitialized()) {
      fn.release();
      return;
    }
    py::gil_scoped_acquire gil;
    fn = py::object();
  }
};

}  // namespace

void init_autograd_methods(py::class_<Tensor>& cls) {
  cls.def_property("requires_grad", &Tensor::requires_grad,
                   [](Tensor& t, bool on) { t.requires_grad_(on); })
      .def(
          "requires_grad_",
          [](py::object self, bool on) {
            self.cast<Tensor&>().requires_grad_(on);
            return self;
          },
          py::arg("requires_grad") = true)
      .def_property(
          "grad", [](const Tensor& t) { return tensor_or_none(t.grad()); },
          [](Tensor& t, const std::optional<Tensor>& g) {
            if (g && g->defined() && (g->device() != t.device() || g->dtype() != t.dtype()))
              fail(ErrorKind::Runtime, "assigned grad has data type ", dtype_name(g->dtype()),
                   " on ", g->device().str(), " but the tensor is ", dtype_name(t.dtype()), " on ",
                   t.device().str());
            t.set_grad(g ? *g : Tensor());
          })
      .def_property_readonly("is_leaf", &Tensor::is_leaf)
      .def_property_readonly("_grad_fn_name", &Tensor::grad_fn_name)
      .def("detach", &Tensor::detach)
      .def("_set_data", &set_data, py::arg("value"))
      .def(
          "_backward",
          [](const Tensor& t, const std::optional<Tensor>& g, bool retain_graph) {
            t.backward(g ? *g : Tensor(), retain_graph);
          },
          py::arg("gradient"), py::arg("retain_graph"),
          py::call_guard<PinSource, py::gil_scoped_release>());
}

void init_autograd(py::module_& m) {
  m.def("is_grad_enabled", &grad_enabled);
  m.def("set_grad_enabled", &set_grad_enabled, py::arg("mode"));
  m.def(
      "autograd_grad",
      [](const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
         const std::vector<std::optional<Tensor>>& grad_outputs, bool retain_graph,
         bool allow_unused) {
        std::vector<Tensor> gs;
        {
          PinSource pin;
          py::gil_scoped_release release;
          gs =
              lt::grad(outputs, inputs, defined_or_empty(grad_outputs), retain_graph, allow_unused);
        }
        py::tuple r(gs.size());
        for (size_t i = 0; i < gs.size(); ++i) r[i] = tensor_or_none(gs[i]);
        return r;
      },
      py::arg("outputs"), py::arg("inputs"), py::arg("grad_outputs"), py::arg("retain_graph"),
      py::arg("allow_unused"));
  // Run by the C++ backward (which releases the GIL) after every gradient is accumulated; a
  // Python exception in the callable reaches backward's caller as itself.
  m.def(
      "autograd_queue_callback",
      [](py::object fn) {
        auto held = std::make_shared<QueuedPython>(std::move(fn));
        lt::queue_callback([held] {
          py::gil_scoped_acquire gil;
          held->fn();
        });
      },
      py::arg("fn"));
  m.def(
      "autograd_backward",
      [](const std::vector<Tensor>& roots, const std::vector<std::optional<Tensor>>& grads,
         bool retain_graph) { lt::backward(roots, defined_or_empty(grads), retain_graph); },
      py::arg("tensors"), py::arg("grad_tensors"), py::arg("retain_graph"),
      py::call_guard<PinSource, py::gil_scoped_release>());
}

void init_debug(py::module_& m) {
  auto d = m.def_submodule("debug", "runtime/debug.h");
  d.def("ir_text", &debug::ir_text, py::arg("tensors"));
  d.def("ir_dot", &debug::ir_dot, py::arg("tensors"));
  d.def("kernel_sources", &debug::kernel_sources);
  d.def("dump", &debug::dump, py::arg("path"), py::arg("tensors"), py::arg("data") = true,
        py::call_guard<PinSource, py::gil_scoped_release>());
  d.def(
      "replay",
      [](const std::string& path, const std::string& backend, bool check, double tol) {
        debug::ReplayReport r;
        {
          PinSource pin;
          py::gil_scoped_release release;
          r = debug::replay(path, backend, check, tol);
        }
        py::dict out;
        out["ok"] = r.ok;
        out["checked"] = r.checked;
        out["backend"] = r.backend;
        out["outputs"] = r.outputs;
        out["max_abs_error"] = r.max_abs_error;
        out["max_rel_error"] = r.max_rel_error;
        out["message"] = r.message;
        out["results"] = py::cast(r.results);
        return out;
      },
      py::arg("path"), py::arg("backend"), py::arg("check"), py::arg("tol"));
}

}  // namespace lt::python
