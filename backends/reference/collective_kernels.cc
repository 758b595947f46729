// The reference interpreter's collectives (ir/ops.def's all_reduce, broadcast, all_gather): the
// values in the interpreter's own form (float64 or int64 elements, rounded to the node's dtype
// afterwards) through the default process group's communicator, so every rank of a group running
// the same graph on lazy:reference gets the same results.
#include <cstring>

#include "backends/host_collective.h"
#include "backends/reference/kernels.h"

namespace lt::ref {

void eval_collective(Ctx& c) {
  const PNode& n = c.node;
  const Value& x = *c.in[0];
  const int world = static_cast<int>(n.attrs.ints.at(1));
  auto comm = communicator_for(n.op, world);
  const bool fl = x.floating();
  const int64_t count = numel(x.shape);
  // Every collective is checked against the other ranks' first (the oracle can afford it): a
  // mismatch is an error here, not a corrupted exchange.
  check_same_collectives({collective_step_of(n.op, n.dtype, n.attrs, count)});
  const DType wide = fl ? DType::Float64 : DType::Int64;  // the interpreter's element types
  const size_t bytes = static_cast<size_t>(count) * 8;
  const size_t total = static_cast<size_t>(numel(c.out.shape));
  if (fl)
    c.out.f = take_doubles(total);
  else
    c.out.i = take_ints(total);
  void* out = fl ? static_cast<void*>(c.out.f.data()) : static_cast<void*>(c.out.i.data());
  const void* in = fl ? static_cast<const void*>(x.f.data()) : static_cast<const void*>(x.i.data());
  if (n.op != Op::AllGather && bytes) std::memcpy(out, in, bytes);
  if (count == 0) return;  // every rank has the same graph: all skip it
  switch (n.op) {
    case Op::AllReduce:
      comm->all_reduce(out, count, wide, static_cast<dist::ReduceOp>(n.attrs.ints.at(0)));
      break;
    case Op::Broadcast:
      comm->broadcast(out, bytes, static_cast<int>(n.attrs.ints.at(0)));
      break;
    default:
      comm->all_gather(in, out, bytes);
  }
}

}  // namespace lt::ref
