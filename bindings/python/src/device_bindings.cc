// dtypes (`lazytensor.float32`, ...) and devices (`lazytensor.device("lazy:cpu")`).
#include <functional>

#include "bindings.h"

namespace lt::python {
namespace {

// One object per dtype, created at import and never freed (the module keeps them referenced too).
std::array<PyObject*, kNumDTypes> g_dtype_objects{};

std::string device_repr(const Device& d) {
  switch (d.type) {
    case Device::Type::CPU:
      return "device(type='cpu')";
    case Device::Type::CUDA:
      return "device(type='cuda', index=" + std::to_string(d.index) + ")";
    case Device::Type::Lazy:
      if (!d.backend.empty() && d.index > 0)
        return "device(type='lazy', backend='" + d.backend + "', index=" + std::to_string(d.index) +
               ")";
      if (!d.backend.empty()) return "device(type='lazy', backend='" + d.backend + "')";
      return "device(type='lazy', index=" + std::to_string(d.index) + ")";
  }
  return "device(?)";
}

const char* device_type_name(const Device& d) {
  switch (d.type) {
    case Device::Type::CPU:
      return "cpu";
    case Device::Type::CUDA:
      return "cuda";
    case Device::Type::Lazy:
      return "lazy";
  }
  return "?";
}

}  // namespace

py::handle dtype_object(DType t) {
  PyObject* o = g_dtype_objects[static_cast<size_t>(t)];
  if (!o) throw std::runtime_error("lazytensor._C: dtype objects used before module init");
  return o;
}

void init_dtypes(py::module_& m) {
  py::class_<PyDType>(m, "dtype", "The element type of a tensor (lazytensor.float32, ...).")
      .def("__repr__",
           [](const PyDType& d) { return "lazytensor." + std::string(dtype_name(d.type)); })
      .def("__str__",
           [](const PyDType& d) { return "lazytensor." + std::string(dtype_name(d.type)); })
      .def("__reduce__",
           [](const PyDType& d) {  // pickles by name: unpickles to the same object
             return py::make_tuple(py::module_::import("lazytensor._utils").attr("dtype_by_name"),
                                   py::make_tuple(std::string(dtype_name(d.type))));
           })
      .def_property_readonly("name",
                             [](const PyDType& d) { return std::string(dtype_name(d.type)); })
      .def_property_readonly("is_floating_point",
                             [](const PyDType& d) { return is_floating(d.type); })
      .def_property_readonly("is_complex", [](const PyDType&) { return false; })
      .def_property_readonly(
          "is_signed",
          [](const PyDType& d) { return d.type != DType::Bool && d.type != DType::UInt8; })
      .def_property_readonly("itemsize", [](const PyDType& d) { return dtype_size(d.type); });
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = static_cast<DType>(i);
    py::object o = py::cast(PyDType{t});
    g_dtype_objects[static_cast<size_t>(i)] = o.inc_ref().ptr();
    m.attr(std::string(dtype_name(t)).c_str()) = o;
  }
  m.def("promote_types", &promote, py::arg("type1"), py::arg("type2"));
}

void init_devices(py::module_& m) {
  py::class_<Device>(m, "device", "Where a tensor lives: cpu, cuda[:N], lazy[:N], lazy:cpu, ...")
      .def(py::init(&Device::parse), py::arg("device"))
      .def(py::init([](const std::string& type, int index) {
             return Device::parse(type + ":" + std::to_string(index));
           }),
           py::arg("type"), py::arg("index"))
      .def_property_readonly("type", [](const Device& d) { return device_type_name(d); })
      .def_property_readonly("index",
                             [](const Device& d) -> py::object {
                               // lazy:cuda:N names its GPU; lazy:cpu and lazy:cuda name none.
                               if (d.type == Device::Type::CPU || (!d.backend.empty() && !d.index))
                                 return py::none();
                               return py::int_(d.index);
                             })
      // The backend that runs this device's graphs ("cpu", "reference", "cuda", "cuda:N").
      .def_property_readonly("backend", &Device::backend_name)
      .def_property_readonly("is_lazy", &Device::is_lazy)
      .def("__str__", &Device::str)
      .def("__repr__", &device_repr)
      .def(
          "__eq__", [](const Device& a, const Device& b) { return a == b; }, py::is_operator())
      .def("__hash__",
           [](const Device& d) {
             return std::hash<int>()(static_cast<int>(d.type) * 1000003 + d.index);
           })
      .def("__reduce__", [](const Device& d) {
        return py::make_tuple(py::module_::import("lazytensor").attr("device"),
                              py::make_tuple(d.str()));
      });
}

}  // namespace lt::python
