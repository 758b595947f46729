// Collectives as traced ops (ir/ops.def's all_reduce, broadcast, all_gather): on a lazy device a
// node of the graph, run by the backend in graph order through the default process group's
// communicator (distributed/); recorded for autograd. `world` is the group's size when traced (the
// callers, lt::distributed and its Python module, pass get_world_size()).
#pragma once
#include "distributed/communicator.h"
#include "runtime/tensor.h"

namespace lt {

using dist::ReduceOp;  // Sum, Avg, Max: attrs.ints[0] of all_reduce is its value

// Every rank's x combined elementwise; every rank gets the result. A group > 0 tags all_reduces
// to run as one call where the engine has one (NCCL's group call; ir/ops.def): a bucket of
// gradients without a flat copy. Values never depend on it.
Tensor all_reduce(const Tensor& x, ReduceOp op, int world, int64_t group = 0);
// Rank `root`'s x on every rank.
Tensor broadcast(const Tensor& x, int root, int world);
// The ranks' x stacked along a new dim 0: [world, *x.shape], rank r's value at [r].
Tensor all_gather(const Tensor& x, int world);

}  // namespace lt
