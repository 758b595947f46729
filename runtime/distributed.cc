#include "runtime/distributed.h"

#include <cstdlib>
#include <mutex>

#include "distributed/process_group.h"
#include "ir/error.h"
#include "runtime/indexing.h"
#ifdef LT_HAVE_CUDA
#include "backends/cuda/driver_api.h"
#include "backends/cuda/nccl_communicator.h"
#endif

namespace lt::distributed {

void init_process_group(const std::string& backend) {
  std::string b = backend;
#ifdef LT_HAVE_CUDA
  static std::once_flag registered;
  std::call_once(registered, register_nccl_engine);
  // As torch.distributed: NCCL where this rank sees a GPU, Gloo otherwise. NCCL's group also runs
  // the collectives of host tensors (staged through the GPU).
  if (b.empty()) b = cuda_device_available() ? "nccl" : "gloo";
#endif
  dist::init_process_group(b);
}
void destroy_process_group() { dist::destroy_process_group(); }
bool is_initialized() { return dist::is_initialized(); }
int get_rank() { return dist::get_rank(); }
int get_world_size() { return dist::get_world_size(); }
std::string get_backend() { return std::string(dist::default_communicator()->engine()); }
void barrier() { dist::default_communicator()->barrier(); }

DdpReduce ddp_reduce_mode() {
  const char* e = std::getenv("LT_DDP_REDUCE");
  const std::string mode = e ? e : "";
  if (mode == "flat") return DdpReduce::Flat;
  if (mode == "per_tensor") return DdpReduce::PerTensor;
  if (mode == "mixed") return DdpReduce::Mixed;
  if (mode == "bucket") return DdpReduce::Bucket;
  if (!mode.empty())
    fail(ErrorKind::Value, "LT_DDP_REDUCE=", mode,
         ": expected flat, per_tensor, mixed or bucket (or unset: flat on nccl, else bucket)");
  return get_backend() == "nccl" ? DdpReduce::Flat : DdpReduce::Bucket;
}

void all_reduce(Tensor& t, ReduceOp op) { t.assign(lt::all_reduce(t, op, get_world_size())); }

void broadcast(Tensor& t, int src) { t.assign(lt::broadcast(t, src, get_world_size())); }

void all_gather(std::vector<Tensor>& out, const Tensor& t) {
  const int world = get_world_size();
  if (static_cast<int>(out.size()) != world)
    fail(ErrorKind::Value, "all_gather: ", out.size(), " output tensors for a group of ", world,
         " ranks");
  for (size_t r = 0; r < out.size(); ++r)
    if (out[r].shape() != t.shape() || out[r].dtype() != t.dtype())
      fail(ErrorKind::Value, "all_gather: output ", r, " is ", dtype_name(out[r].dtype()), " ",
           shape_str(out[r].shape()), ", the tensor ", dtype_name(t.dtype()), " ",
           shape_str(t.shape()));
  Tensor stacked = lt::all_gather(t, world);
  for (int r = 0; r < world; ++r) out[static_cast<size_t>(r)].assign(select(stacked, 0, r));
}

}  // namespace lt::distributed
