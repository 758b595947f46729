// lt::distributed: the C++ face of lt.distributed (torch.distributed's names). The default
// process group (distributed/process_group.h) from torchrun's environment, and the collectives on
// tensors, in place: on a lazy device a node of the graph, run at the next sync in graph order
// (every rank must sync the same graphs in the same order), else at once.
#pragma once
#include <cstdint>
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

// How DistributedDataParallel averages a bucket of gradients (of one dtype):
//  Flat: the bucket's gradients concatenated into one all_reduce and sliced back: one collective
//    a 25 MB bucket. NCCL's default: a few large calls beat many small ones (2 H200s, GPT-2 124M
//    bf16: 24.3-24.8 ms a step against 25.5 for PerTensor, 25.7 for Mixed, thirtieth session;
//    23.55-23.70 since the optimizer's updates run while the last all_reduce does, thirty-second,
//    whose PerTensor run just before that change took 25.40; bench/README.md). The concatenation is
//    one concat node (runtime/indexing.h): each gradient's producer writes its range of the bucket
//    (lowering/concat_match.cc; a graph input or unaligned piece is copied there); the gradients
//    sliced back are views of the reduced buffer (lowering/output_views.h).
//  PerTensor: one all_reduce per gradient, no copies (on NCCL each runs on the device as soon as
//    its gradient is ready, overlapping the rest of backward).
//  Mixed: gradients of at least kDdpAloneElements elements alone, the bucket's smaller ones
//    (biases, norm weights) in one flat all_reduce: fewer NCCL calls, copies of small tensors only.
//  Bucket: one all_reduce per gradient, a bucket's tagged as one call group (ir/ops.def) that the
//    plan keeps adjacent (lowering/collective.h) and the backend runs as one engine call over the
//    operands packed by copies, no concatenating kernel: on NCCL on its stream
//    (nccl_communicator.cc), on Gloo on the collective worker (backends/host_collective.h).
//    Gloo's default (a tiny GPT over two CPU ranks: 11.6 ms a step against 19.3 for Flat). On
//    NCCL no faster than Flat (2 H200s: 24.93 and 25.18 ms against 24.49 and 24.70;
//    bench/README.md, thirty-first session).
// LT_DDP_REDUCE=flat|per_tensor|mixed|bucket overrides the default.
enum class DdpReduce { Flat, PerTensor, Mixed, Bucket };
inline constexpr int64_t kDdpAloneElements = int64_t{1} << 16;
DdpReduce ddp_reduce_mode();

// Every rank's t combined elementwise (Sum, Avg, Max); every rank's t gets the result.
void all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum);
// Rank src's t into every rank's t.
void broadcast(Tensor& t, int src);
// out[r] gets rank r's t (out: one tensor per rank, each of t's shape and dtype).
void all_gather(std::vector<Tensor>& out, const Tensor& t);

}  // namespace lt::distributed
