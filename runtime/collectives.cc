#include "runtime/collectives.h"

#include "ir/error.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

Tensor collective(Op op, const Tensor& x, int64_t first, int world, int64_t group = 0) {
  if (!x.defined()) fail(ErrorKind::Runtime, op_name(op), ": an undefined tensor");
  Attrs at;
  at.ints = {first, world};
  if (group) at.ints.push_back(group);
  NodeList ins{x.node()};
  Tensor out(make_tensor(make_node(op, ins, at), x.device()));
  record_op(op, at, out, ins, {x});
  return out;
}

}  // namespace

Tensor all_reduce(const Tensor& x, ReduceOp op, int world, int64_t group) {
  if (group < 0) fail(ErrorKind::Value, "all_reduce: group ", group, " is negative");
  return collective(Op::AllReduce, x, static_cast<int64_t>(op), world, group);
}

Tensor broadcast(const Tensor& x, int root, int world) {
  return collective(Op::Broadcast, x, root, world);
}

Tensor all_gather(const Tensor& x, int world) { return collective(Op::AllGather, x, 0, world); }

}  // namespace lt
