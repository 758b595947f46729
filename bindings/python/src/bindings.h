// Shared by the sources of the `lazytensor._C` extension: pybind11 includes, the casters for
// lt::Scalar (a Python number keeping its kind) and lt::DType (the singleton `lazytensor.float32`
// objects), and the init functions each source file contributes to the module.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <lazytensor/lazytensor.h>
#include <array>

#include "ir/dtype.h"
#include "ir/error.h"
#include "ir/node.h"

namespace py = pybind11;

namespace lt::python {

// The Python face of an lt::DType: one immutable object per dtype (`lazytensor.float32`), so that
// `t.dtype is lt.float32` holds as it does in PyTorch.
struct PyDType {
  DType type;
};
// The singleton object for `t` (a borrowed reference; the objects live as long as the process).
py::handle dtype_object(DType t);

// NumPy interop (numpy_interop.cc).
DType dtype_from_numpy(const py::dtype& dt);  // TypeError for dtypes lazytensor has no match for
py::dtype numpy_dtype(DType t);               // TypeError for bfloat16, as PyTorch does

// Pins the caller's Python file:line as the source of nodes made while the GIL is released
// (backward, mark_step): construct it before releasing the GIL, e.g.
// py::call_guard<PinSource, py::gil_scoped_release>().
struct PinSource {
  PinSource() { set_current_source(current_source()); }
  ~PinSource() { set_current_source(-1); }
  PinSource(const PinSource&) = delete;
  PinSource& operator=(const PinSource&) = delete;
};

void init_errors(py::module_& m);
void init_dtypes(py::module_& m);
void init_devices(py::module_& m);
void init_tensor(py::module_& m);
void init_numpy(py::module_& m, py::class_<Tensor>& cls);
void init_ops(py::module_& m);
void init_metrics(py::module_& m);
void init_sync(py::module_& m);
void init_autograd_methods(py::class_<Tensor>& cls);
void init_autograd(py::module_& m);
void init_debug(py::module_& m);
void init_source_locations(py::module_& m);
void init_capture(py::module_& m);
void init_serialization(py::module_& m);  // serialization_bindings.cc
void init_dlpack(py::module_& m);         // dlpack.cc (after init_tensor: adds Tensor methods)
void init_distributed(py::module_& m);    // distributed_bindings.cc

}  // namespace lt::python

namespace pybind11::detail {

// Python bool/int/float (and NumPy scalars) -> lt::Scalar, keeping the number's kind so that
// promotion follows PyTorch's rules for wrapped numbers (int64 tensor * 2.5 -> float32, ...).
template <>
struct type_caster<lt::Scalar> {
 public:
  static constexpr auto name = const_name("Number");

  bool load(handle src, bool convert);
  static handle cast(const lt::Scalar& s, return_value_policy, handle) {
    switch (s.kind) {
      case lt::ScalarKind::Bool:
        return pybind11::bool_(s.i != 0).release();
      case lt::ScalarKind::Int:
        return pybind11::int_(s.i).release();
      case lt::ScalarKind::Float:
        return pybind11::float_(s.f).release();
    }
    return pybind11::none().release();
  }

  operator lt::Scalar*() { return &value; }
  operator lt::Scalar&() { return value; }
  operator lt::Scalar&&() && { return std::move(value); }
  template <typename T_>
  using cast_op_type = movable_cast_op_type<T_>;

 protected:
  lt::Scalar value{0.0};
};

// lt::DType <-> the `lazytensor.<name>` singletons.
template <>
struct type_caster<lt::DType> {
  PYBIND11_TYPE_CASTER(lt::DType, const_name("dtype"));

  bool load(handle src, bool) {
    if (!pybind11::isinstance<lt::python::PyDType>(src)) return false;
    value = src.cast<const lt::python::PyDType&>().type;
    return true;
  }
  static handle cast(lt::DType t, return_value_policy, handle) {
    return lt::python::dtype_object(t).inc_ref();
  }
};

// Shapes and attribute lists (lt::IntList, an lt::SmallVec) to and from Python sequences, as
// pybind11/stl.h does for std::vector: a list in, a list out.
template <class T, std::size_t N>
struct type_caster<lt::SmallVec<T, N>> : list_caster<lt::SmallVec<T, N>, T> {};

}  // namespace pybind11::detail
