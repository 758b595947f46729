// lt::dist (the default process group) and the traced collectives as `lazytensor._C.distributed`
// (wrapped by lazytensor/distributed.py). Joining, leaving and barriers wait on other processes:
// they release the GIL.
#include "bindings.h"
#include "distributed/process_group.h"
#include "nn/data_parallel.h"
#include "runtime/collectives.h"
#include "runtime/distributed.h"

namespace lt::python {

void init_distributed(py::module_& m) {
  py::module_ d = m.def_submodule("distributed", "The default process group and collectives");
  d.def("init_process_group", &distributed::init_process_group, py::arg("backend") = "",
        py::call_guard<py::gil_scoped_release>());
  d.def("destroy_process_group", &dist::destroy_process_group,
        py::call_guard<py::gil_scoped_release>());
  d.def("is_initialized", &dist::is_initialized);
  d.def("get_rank", &dist::get_rank);
  d.def("get_world_size", &dist::get_world_size);
  d.def("get_local_rank", &dist::get_local_rank);
  d.def("get_backend", &distributed::get_backend);
  // "flat", "per_tensor", "mixed" or "bucket", and the size from which "mixed" reduces a
  // gradient alone.
  d.def("ddp_reduce_mode", [] {
    switch (distributed::ddp_reduce_mode()) {
      case distributed::DdpReduce::PerTensor:
        return "per_tensor";
      case distributed::DdpReduce::Mixed:
        return "mixed";
      case distributed::DdpReduce::Bucket:
        return "bucket";
      default:
        return "flat";
    }
  });
  d.attr("DDP_ALONE_ELEMENTS") = distributed::kDdpAloneElements;
  // DDP's averaging after a backward pass (nn/data_parallel.h): buckets of parameters. On an eager
  // device the collectives run now, waiting on the other ranks.
  d.def("average_gradients", &nn::average_gradients, py::arg("buckets"),
        py::call_guard<py::gil_scoped_release>());
  d.def(
      "barrier", [] { dist::default_communicator()->barrier(); },
      py::call_guard<py::gil_scoped_release>());
  // Traced: on a lazy device a node of the graph (run at the next sync), else run now.
  d.def(
      "all_reduce",
      [](const Tensor& t, int op, int64_t group) {
        return all_reduce(t, static_cast<ReduceOp>(op), dist::get_world_size(), group);
      },
      py::arg("tensor"), py::arg("op"), py::arg("group") = 0);
  d.def(
      "broadcast",
      [](const Tensor& t, int root) { return broadcast(t, root, dist::get_world_size()); },
      py::arg("tensor"), py::arg("src"));
  d.def(
      "all_gather", [](const Tensor& t) { return all_gather(t, dist::get_world_size()); },
      py::arg("tensor"));
}

}  // namespace lt::python
