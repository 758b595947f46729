// lt::distributed: the C++ face of lt.distributed (torch.distributed's names). The default
// process group (distributed/process_group.h) from torchrun's environment, and the collectives on
// tensors, in place: on a lazy device a node of the graph, run at the next sync in graph order
// (every rank must sync the same graphs in the same order), else at once.
#pragma once
#include <string>
#include <vector>

#include "runtime/collectives.h"
#include "runtime/tensor.h"

namespace lt::distributed {

// backend "nccl" (GPUs: each rank on cuda:LOCAL_RANK), "gloo" (CPUs), or "": NCCL when this
// process sees a GPU and lazytensor was built with CUDA, else Gloo.
void init_process_group(const std::string& backend = "");
void destroy_process_group();
bool is_initialized();
int get_rank();
int get_world_size();
// The group's engine: "nccl" or "gloo" (torch.distributed.get_backend()).
std::string get_backend();
void barrier();

// How DistributedDataParallel averages a bucket of gradients. Per tensor: one all_reduce per
// gradient, in place of that gradient's buffer, no copies (on NCCL each runs on the device as
// soon as its gradient is ready, overlapping the rest of backward). Flat: the bucket's gradients
// concatenated into one all_reduce and sliced back (engines that pay a host round trip per call:
// Gloo). By the group's engine (per tensor on "nccl"); LT_DDP_REDUCE=per_tensor|flat overrides it.
bool ddp_reduce_per_tensor();

// Every rank's t combined elementwise (Sum, Avg, Max); every rank's t gets the result.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
// Rank src's t into every rank's t.
void broadcast(Tensor& t, int src);
// out[r] gets rank r's t (out: one tensor per rank, each of t's shape and dtype).
void all_gather(std::vector<Tensor>& out, const Tensor& t);

}  // namespace lt::distributed
