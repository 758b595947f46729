#include "runtime/collectives.h"

#include "ir/error.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

Tensor collective(Op op, const Tensor& x, int64_t first, int world) {
  if (!x.defined()) fail(ErrorKind::Runtime, op_name(op), ": an undefined tensor");
  Attrs at;
  at.ints = {first, world};
  NodeList ins{x.node()};
  Tensor out(make_tensor(make_node(op, ins, at), x.device()));
  record_op(op, at, out, ins, {x});
  return out;
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op, int world) {
  return collective(Op::AllReduce, x, static_cast<int64_t>(op), world);
}

Tensor broadcast(const Tensor& x, int root, int world) {
  return collective(Op::Broadcast, x, root, world);
}

Tensor all_gather(const Tensor& x, int world) { return collective(Op::AllGather, x, 0, world); }

}  // namespace lt
