// lt::metrics as `lazytensor._C.metrics` (wrapped by lazytensor/metrics.py).
#include "bindings.h"
#include "runtime/metrics_state.h"
#include "runtime/profile.h"

namespace lt::python {

void init_metrics(py::module_& m) {
  py::module_ mm = m.def_submodule("metrics", "Process-wide counters and the last executed graph");
  mm.def("counters", &metrics::counters);
  mm.def("syncs_by_reason", &metrics::syncs_by_reason);
  mm.def("last_graph", [] {
    metrics::GraphInfo g = metrics::last_graph();
    py::dict d;
    d["hash"] = g.hash;
    d["nodes"] = g.nodes;
    d["kernels"] = g.kernels;
    d["cache"] = g.cache;
    d["compile_ms"] = g.compile_ms;
    d["run_ms"] = g.run_ms;
    d["inputs"] = g.inputs;
    d["outputs"] = g.outputs;
    d["backend"] = g.backend;
    d["grouping"] = g.grouping;
    py::list dims;
    for (const auto& sd : g.symbolic_dims) {
      py::dict e;
      e["input"] = sd.input;
      e["dim"] = sd.dim;
      e["size"] = sd.size;
      dims.append(e);
    }
    d["symbolic_dims"] = dims;
    return d;
  });
  mm.def("timings", [] {
    py::dict d;
    for (auto& [name, p] : profile::timings()) {
      py::dict e;
      e["count"] = p.count;
      e["total_ms"] = p.total_ms;
      e["p50_ms"] = p.p50_ms;
      e["p90_ms"] = p.p90_ms;
      e["p99_ms"] = p.p99_ms;
      e["max_ms"] = p.max_ms;
      d[py::str(name)] = e;
    }
    return d;
  });
  mm.def("report", &metrics::report);
  // The torch bridge counts the aten ops it leaves to PyTorch (lazytensor/torch/partition.py).
  mm.def(
      "_count_fallbacks", [](int64_t n) { metrics::bump(metrics::Counter::Fallbacks, n); },
      py::arg("n"));
  mm.def("reset", &metrics::reset);
}

}  // namespace lt::python
