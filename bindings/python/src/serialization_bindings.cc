// lt.save / lt.load's C++ side (nn/safetensors.h): the ordered file API, so a Python dict's
// order is the file's order and the file's order is the returned dict's.
#include "bindings.h"
#include "nn/safetensors.h"

namespace lt::python {

void init_serialization(py::module_& m) {
  m.def("_save_safetensors", &safetensors::write_file, py::arg("tensors"), py::arg("path"),
        py::arg("metadata"), py::call_guard<PinSource, py::gil_scoped_release>(),
        "Writes [(name, Tensor)] and string metadata to `path` as safetensors (syncs pending "
        "tensors).");
  m.def(
      "_load_safetensors",
      [](const std::string& path, const Device& device) {
        std::map<std::string, std::string> metadata;
        safetensors::NamedTensors tensors;
        {
          py::gil_scoped_release nogil;
          tensors = safetensors::read_file(path, device, &metadata);
        }
        return py::make_tuple(tensors, metadata);
      },
      py::arg("path"), py::arg("device"),
      "([(name, Tensor)] in file order, metadata) of a validated safetensors file.");
}

}  // namespace lt::python
