// lt.compile's C++ half (capture/capture.h): begin/end a capture around one call of the user's
// step, and replay the recorded program with new arguments. The guards, pytrees and the module
// wrapper are Python (lazytensor/compile.py).
#include "bindings.h"
#include "capture/capture.h"

namespace lt::python {
namespace {
// The Python handle of a captured program (the Program itself stays private to the runtime).
struct ProgramHandle {
  std::shared_ptr<capture::Program> program;
};
}  // namespace

void init_capture(py::module_& m) {
  py::class_<ProgramHandle>(m, "_CapturedProgram")
      .def_property_readonly(
          "inputs", [](const ProgramHandle& h) { return capture::program_inputs(*h.program); })
      .def_property_readonly(
          "outputs", [](const ProgramHandle& h) { return capture::program_outputs(*h.program); });
  m.def("_capture_active", &capture::active, "Whether lt.compile is capturing a step.");
  m.def("_capture_begin", &capture::begin, py::arg("args"),
        py::call_guard<PinSource, py::gil_scoped_release>(),
        "Materializes everything pending and starts observing (args: the call's tensors).");
  m.def(
      "_capture_end",
      [](const std::vector<Tensor>& args, const std::vector<Tensor>& rets) {
        auto c = capture::end(args, rets);
        return py::make_tuple(c.program ? py::cast(ProgramHandle{c.program}) : py::none(),
                              c.why_not);
      },
      py::arg("args"), py::arg("rets"),
      "Runs the captured step as one graph; returns (program or None, why it cannot be replayed).");
  m.def("_capture_abort", &capture::abort, "Ends a capture after an exception.");
  m.def(
      "_capture_replay",
      [](const ProgramHandle& h, const std::vector<Tensor>& args) -> py::object {
        std::optional<std::vector<Tensor>> r;
        {
          PinSource pin;
          py::gil_scoped_release release;
          r = capture::replay(*h.program, args);
        }
        if (!r) return py::none();
        return py::cast(std::move(*r));
      },
      py::arg("program"), py::arg("args"),
      "The returned tensors, or None when the program went stale.");
}

}  // namespace lt::python
