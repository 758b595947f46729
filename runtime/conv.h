// Convolution in the runtime: where the tensor's backend runs convolution as a library step
// (Backend::lower_options().conv, oneDNN on the CPU; the reference interpreter directly), conv2d
// and its two gradients are single prims (ir/conv.h) with a dedicated VJP; elsewhere (CUDA, a CPU
// built without oneDNN, LT_GEMM=0) they expand here, at trace time, into today's sliding-window +
// im2col GEMM decomposition (runtime/windows.h), whose gradient is the movement ops' VJPs.
#pragma once
#include <string>
#include <vector>

#include "ir/conv.h"
#include "lowering/plan.h"
#include "runtime/tensor.h"

namespace lt {

// Whether convolutions of dtype `t` on `d` are library prims (false: the decomposition).
bool conv_library(const Device& d, DType t);

// conv2d of a checked 4-D input [N, C, H, W] and weight [O, C/groups, kH, kW], bias [O] or none.
Tensor conv2d_nchw(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p);
// The gradients of conv2d_nchw w.r.t. x (whose spatial size is {H, W}) and w (kernel {kH, kW}).
Tensor conv2d_grad_input(const Tensor& dy, const Tensor& w, const ConvParams& p, int64_t H,
                         int64_t W);
Tensor conv2d_grad_weight(const Tensor& x, const Tensor& dy, const ConvParams& p, int64_t kh,
                          int64_t kw);

// The graph under `roots` with every conv prim that `backend` has no library for replaced by its
// sliding-window expansion (other nodes are rebuilt only above a replaced one). For traces
// recorded where those were library prims and replayed elsewhere (lazytensor replay / bisect).
// Attention prims need none: lowering expands them (lowering/expand_attention.h).
NodeList expand_library_prims_for(const NodeList& roots, const std::string& backend);
// The same for the library prims `opts` lacks, the new nodes traced on `backend`'s lazy device
// (bench_compile_cost: a dump's graph lowered as CUDA would, without a GPU).
NodeList expand_library_prims_for(const NodeList& roots, const LowerOptions& opts,
                                  const std::string& backend);

// VJP rules of the three conv prims (registered in runtime/vjp.cc's table).
struct VjpCtx;
std::vector<Tensor> conv2d_vjp(const VjpCtx& c, const Tensor& g);
std::vector<Tensor> conv2d_grad_input_vjp(const VjpCtx& c, const Tensor& g);
std::vector<Tensor> conv2d_grad_weight_vjp(const VjpCtx& c, const Tensor& g);

}  // namespace lt
