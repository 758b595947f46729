// lt::Tensor as `lazytensor._C.Tensor`. Operators and fixed-signature methods are bound here; the
// methods with PyTorch's flexible argument conventions (reshape(*shape), sum(dim=None, ...),
// to(...),
// __repr__, ...) are added by the pure-Python layer (lazytensor/_tensor.py) under their public
// names, calling the underscore-prefixed primitives below.
#include <algorithm>
#include <optional>
#include <vector>

#include "bindings.h"
#include "runtime/indexing.h"
#include "runtime/tensor_impl.h"

namespace lt::python {
namespace {

py::tuple shape_tuple(const Shape& s) {
  py::tuple t(s.size());
  for (size_t i = 0; i < s.size(); ++i) t[i] = py::int_(s[i]);
  return t;
}

// Binds `name` as a binary operator taking a tensor or a Python number on the right. Overloads
// that do not match return NotImplemented (py::is_operator), so Python tries the reflected form.
// The number overload comes first: pybind11's failed Tensor conversion of a number probes the
// number's type for a foreign-module attribute, raising and clearing an AttributeError (about
// half a microsecond per `y + 1.0`), while the number caster rejects a tensor at once.
template <typename FT, typename FS>
void bind_binary(py::class_<Tensor>& cls, const char* name, FT tensor_fn, FS scalar_fn) {
  cls.def(name, scalar_fn, py::is_operator());
  cls.def(name, tensor_fn, py::is_operator());
}

// In-place operators rebind the tensor's value (Tensor::assign): every Python reference to this
// tensor sees the new value, as with PyTorch's in-place ops.
template <typename F>
void bind_inplace(py::class_<Tensor>& cls, const char* name, F apply) {
  cls.def(  // the number overload first, as in bind_binary
      name,
      [apply](py::object self, Scalar o) {
        apply(self.cast<Tensor&>(), o);
        return self;
      },
      py::is_operator());
  cls.def(
      name,
      [apply](py::object self, const Tensor& o) {
        apply(self.cast<Tensor&>(), o);
        return self;
      },
      py::is_operator());
}

}  // namespace

void init_tensor(py::module_& m) {
  py::class_<Tensor> cls(m, "Tensor",
                         "A tensor on the cpu, cuda or lazy device (see lazytensor.Tensor).");
  init_numpy(m, cls);

  // Shares `other`'s value, like a second Python name for it (used by subclasses such as
  // Parameter).
  cls.def(py::init<const Tensor&>(), py::arg("other"));

  cls.def_property_readonly("shape", [](const Tensor& t) { return shape_tuple(t.shape()); })
      .def_property_readonly("dtype", &Tensor::dtype)
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("ndim", &Tensor::dim)
      .def_property_readonly("_is_pending", &Tensor::is_pending)
      .def("dim", &Tensor::dim)
      .def("numel", &Tensor::numel)
      .def("_size", &Tensor::size, py::arg("dim"))
      .def("_str", &Tensor::str)
      // The torch bridge's zero-copy inputs (lazytensor/torch/interop.py): a tensor on `device`
      // over this tensor's data, where that device's backend keeps its data in the same memory
      // (a cpu tensor on lazy:cpu, a cuda tensor on lazy:cuda). Writes through either are seen by
      // both, as with DLPack.
      .def(
          "_shared_on",
          [](const Tensor& t, const Device& device) {
            const auto& s = t.impl()->storage;
            if (t.is_pending() || !s)
              throw py::value_error("_shared_on: the tensor is pending; materialize it first");
            if (s->backend != device.backend_name())
              throw py::value_error("_shared_on: a " + t.device().str() +
                                    " tensor's data is not in " + device.str() +
                                    "'s memory (backend " + device.backend_name() + ")");
            return Tensor(make_data_tensor(s, t.dtype(), t.shape(), device));
          },
          py::arg("device"))
      // The bridge again: a tensor over this tensor's data with another shape of as many
      // elements (a torch reshape of a graph's output coming back as an input). A graph input of
      // its own, not a reshape node: the next graph traces as the first one did.
      .def(
          "_alias_as",
          [](const Tensor& t, const std::vector<int64_t>& dims) {
            const Shape shape(dims.begin(), dims.end());
            const auto& s = t.impl()->storage;
            if (t.is_pending() || !s)
              throw py::value_error("_alias_as: the tensor is pending; materialize it first");
            if (lt::numel(shape) != t.numel())
              throw py::value_error("_alias_as: shape " + shape_str(shape) + " does not have the " +
                                    std::to_string(t.numel()) + " elements of " +
                                    shape_str(t.shape()));
            return Tensor(make_data_tensor(s, t.dtype(), shape, t.device()));
          },
          py::arg("shape"));

  // Elementwise math. Integer inputs of float-valued functions compute in float32, as in PyTorch.
  cls.def("exp", &Tensor::exp)
      .def("log", &Tensor::log)
      .def("sqrt", &Tensor::sqrt)
      .def("rsqrt", &Tensor::rsqrt)
      .def("sin", &Tensor::sin)
      .def("cos", &Tensor::cos)
      .def("tanh", &Tensor::tanh)
      .def("sigmoid", &Tensor::sigmoid)
      .def("relu", &Tensor::relu)
      .def("abs", &Tensor::abs)
      .def("erf", &Tensor::erf)
      .def("log1p", &Tensor::log1p)
      .def("expm1", &Tensor::expm1)
      .def("floor", &Tensor::floor)
      .def("neg", &Tensor::neg)
      .def("reciprocal", &Tensor::reciprocal)
      .def("_clamp", &Tensor::clamp, py::arg("min"), py::arg("max"))
      .def(
          "_cast", [](const Tensor& t, DType d) { return cast(t, d); }, py::arg("dtype"))
      .def(
          "_to_device", [](const Tensor& t, const Device& d) { return t.to(d); }, py::arg("device"),
          py::call_guard<PinSource, py::gil_scoped_release>())  // may sync
      .def("_assign", &Tensor::assign, py::arg("value"))
      .def(
          "_assign_result", [](Tensor& t, const Tensor& v) { t.assign_result(v); },
          py::arg("value"))
      // The values as int64 when they already are on the host (a cpu tensor, or materialized lazy
      // data in host memory): no sync, no transfer. None otherwise. Used to range-check indices.
      // x[i] with a plain int (lazytensor/_indexing.py's fast path): the bounds check with
      // PyTorch's getitem messages, then select, in one call.
      .def(
          "_getitem_int",
          [](const Tensor& t, int64_t i) {
            if (t.dim() == 0)
              throw py::index_error(
                  "invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                  "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number");
            const int64_t n = t.shape()[0];
            if (i < -n || i >= n)
              throw py::index_error("index " + std::to_string(i) +
                                    " is out of bounds for dimension 0 with size " +
                                    std::to_string(n));
            return select(t, 0, i);
          },
          py::arg("index"))
      .def("_host_int_values", [](const Tensor& t) -> py::object {
        const auto& impl = t.impl();
        if (t.is_pending() || !impl->storage || !impl->storage->buffer ||
            !impl->storage->buffer->on_host())
          return py::none();
        std::vector<int64_t> v = t.to_vector<int64_t>();
        py::array_t<int64_t> out(std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()));
        std::copy(v.begin(), v.end(), out.mutable_data());
        return py::object(std::move(out));
      });

  // Reductions: `dims` empty = all dims.
  cls.def("_sum", &Tensor::sum, py::arg("dims"), py::arg("keepdim"))
      .def("_mean", &Tensor::mean, py::arg("dims"), py::arg("keepdim"))
      .def("_amax", &Tensor::amax, py::arg("dims"), py::arg("keepdim"))
      .def("_amin", &Tensor::amin, py::arg("dims"), py::arg("keepdim"))
      .def("_prod", &Tensor::prod, py::arg("dims"), py::arg("keepdim"))
      .def("_logsumexp", [](const Tensor& t, std::vector<int64_t> dims,
                            bool keepdim) { return logsumexp(t, std::move(dims), keepdim); })
      .def("_var", [](const Tensor& t, std::vector<int64_t> dims, double correction,
                      bool keepdim) { return var(t, std::move(dims), correction, keepdim); })
      .def("_std", [](const Tensor& t, std::vector<int64_t> dims, double correction,
                      bool keepdim) { return lt::std(t, std::move(dims), correction, keepdim); })
      .def(
          "_softmax", [](const Tensor& t, int64_t dim) { return softmax(t, dim); }, py::arg("dim"))
      .def(
          "_log_softmax", [](const Tensor& t, int64_t dim) { return log_softmax(t, dim); },
          py::arg("dim"));

  // Movement.
  cls.def("_reshape", &Tensor::reshape, py::arg("shape"))
      .def("_view", &Tensor::view, py::arg("shape"))
      // PyTorch's layout facts of a view over its base (runtime/views.h); values stay dense.
      .def("_strides",
           [](const Tensor& t) {
             IntList s = view_strides(*t.impl());
             return std::vector<int64_t>(s.begin(), s.end());
           })
      .def(
          "is_contiguous",
          [](const Tensor& t, const py::object&) { return is_contiguous(*t.impl()); },
          py::arg("memory_format") = py::none())
      .def("storage_offset",
           [](const Tensor& t) { return t.impl()->view ? t.impl()->view->offset : 0; })
      .def("_permute", &Tensor::permute, py::arg("dims"))
      .def("_expand", &Tensor::expand, py::arg("shape"))
      .def("transpose", &Tensor::transpose, py::arg("dim0"), py::arg("dim1"))
      .def("unsqueeze", &Tensor::unsqueeze, py::arg("dim"))
      .def("_squeeze", &Tensor::squeeze, py::arg("dim"))
      .def("flatten", &Tensor::flatten, py::arg("start_dim") = 0, py::arg("end_dim") = -1)
      .def("matmul", &Tensor::matmul, py::arg("other"));

  // Arithmetic and comparison operators (PyTorch's broadcasting and promotion, in the runtime).
  bind_binary(
      cls, "__add__", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      [](const Tensor& a, Scalar b) { return add(a, b); });
  bind_binary(
      cls, "__sub__", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      [](const Tensor& a, Scalar b) { return sub(a, b); });
  bind_binary(
      cls, "__mul__", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      [](const Tensor& a, Scalar b) { return mul(a, b); });
  bind_binary(
      cls, "__truediv__", [](const Tensor& a, const Tensor& b) { return div(a, b); },
      [](const Tensor& a, Scalar b) { return div(a, b); });
  bind_binary(
      cls, "__pow__", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
      [](const Tensor& a, Scalar b) { return pow(a, b); });
  bind_binary(
      cls, "__eq__", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
      [](const Tensor& a, Scalar b) { return eq(a, b); });
  bind_binary(
      cls, "__ne__", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
      [](const Tensor& a, Scalar b) { return ne(a, b); });
  bind_binary(
      cls, "__lt__", [](const Tensor& a, const Tensor& b) { return lt::lt(a, b); },
      [](const Tensor& a, Scalar b) { return lt::lt(a, b); });
  bind_binary(
      cls, "__le__", [](const Tensor& a, const Tensor& b) { return le(a, b); },
      [](const Tensor& a, Scalar b) { return le(a, b); });
  bind_binary(
      cls, "__gt__", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
      [](const Tensor& a, Scalar b) { return gt(a, b); });
  bind_binary(
      cls, "__ge__", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
      [](const Tensor& a, Scalar b) { return ge(a, b); });
  // Python's // and % (floor_divide, remainder) and the bitwise operators; on bool tensors &, |, ^
  // and ~ are logical, as in PyTorch.
  bind_binary(
      cls, "__floordiv__", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
      [](const Tensor& a, Scalar b) { return floor_divide(a, b); });
  bind_binary(
      cls, "__mod__", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
      [](const Tensor& a, Scalar b) { return remainder(a, b); });
  bind_binary(
      cls, "__and__", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_and(a, b); });
  bind_binary(
      cls, "__or__", [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_or(a, b); });
  bind_binary(
      cls, "__xor__", [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_xor(a, b); });
  bind_binary(
      cls, "__lshift__", [](const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_left_shift(a, b); });
  bind_binary(
      cls, "__rshift__", [](const Tensor& a, const Tensor& b) { return bitwise_right_shift(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_right_shift(a, b); });
  // __eq__ makes pybind11 clear __hash__; tensors hash by identity, as in PyTorch.
  cls.def("__hash__",
          [](const py::object& self) { return reinterpret_cast<intptr_t>(self.ptr()); });

  cls.def(
         "__radd__", [](const Tensor& a, Scalar b) { return add(a, b); }, py::is_operator())
      .def(
          "__rsub__", [](const Tensor& a, Scalar b) { return rsub(a, b); }, py::is_operator())
      .def(
          "__rmul__", [](const Tensor& a, Scalar b) { return mul(a, b); }, py::is_operator())
      .def(
          "__rtruediv__", [](const Tensor& a, Scalar b) { return rdiv(a, b); }, py::is_operator())
      .def(
          "__rpow__", [](const Tensor& a, Scalar b) { return rpow(a, b); }, py::is_operator())
      .def(
          "__rfloordiv__", [](const Tensor& a, Scalar b) { return rfloor_divide(a, b); },
          py::is_operator())
      .def(
          "__rmod__", [](const Tensor& a, Scalar b) { return rremainder(a, b); }, py::is_operator())
      .def(
          "__rand__", [](const Tensor& a, Scalar b) { return bitwise_and(a, b); },
          py::is_operator())
      .def(
          "__ror__", [](const Tensor& a, Scalar b) { return bitwise_or(a, b); }, py::is_operator())
      .def(
          "__rxor__", [](const Tensor& a, Scalar b) { return bitwise_xor(a, b); },
          py::is_operator())
      .def(
          "__rlshift__", [](const Tensor& a, Scalar b) { return rbitwise_left_shift(a, b); },
          py::is_operator())
      .def(
          "__rrshift__", [](const Tensor& a, Scalar b) { return rbitwise_right_shift(a, b); },
          py::is_operator())
      .def("__invert__",
           [](const Tensor& a) {
             if (is_floating(a.dtype()))  // PyTorch's operator check, before bitwise_not's
               throw py::type_error(
                   std::string("~ (operator.invert) is only implemented on integer and "
                               "Boolean-type tensors (got ") +
                   std::string(dtype_name(a.dtype())) + ")");
             return bitwise_not(a);
           })
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
          py::is_operator())
      .def("__neg__", &Tensor::neg)
      .def("__abs__", &Tensor::abs)
      .def("__pos__", [](const py::object& self) { return self; });

  bind_inplace(cls, "__iadd__", [](Tensor& a, const auto& b) { a += b; });
  bind_inplace(cls, "__isub__", [](Tensor& a, const auto& b) { a -= b; });
  bind_inplace(cls, "__imul__", [](Tensor& a, const auto& b) { a *= b; });
  bind_inplace(cls, "__itruediv__", [](Tensor& a, const auto& b) { a /= b; });

  init_autograd_methods(cls);

  // lazytensor.nn's recurrent layers: on an eager device a layer's ops run as one graph
  // (runtime/tensor_impl.h EagerComposite), as PyTorch runs an LSTM as one native call.
  m.def("_composite_enter", &eager_composite_enter);
  m.def("_composite_exit", &eager_composite_exit, py::arg("results"),
        py::call_guard<py::gil_scoped_release>());
}

}  // namespace lt::python
