#include "backends/host_collective.h"

#include <cstring>

#include "distributed/process_group.h"
#include "ir/error.h"

namespace lt {

std::shared_ptr<dist::Communicator> communicator_for(Op op, int world) {
  if (!dist::is_initialized())
    fail(ErrorKind::Runtime, op_name(op),
         ": no process group (call lt.distributed.init_process_group() first, in every rank)");
  auto comm = dist::default_communicator();
  if (comm->size() != world)
    fail(ErrorKind::Runtime, op_name(op), ": traced for a group of ", world,
         " ranks, run in a group of ", comm->size());
  return comm;
}

void prepare_host_collective(const CollectiveStep& s, const void* in, void* out) {
  auto comm = communicator_for(s.op, s.world);
  const size_t bytes = static_cast<size_t>(s.count) * dtype_size(s.dtype);
  if (!bytes) return;
  char* dst = static_cast<char*>(out);
  if (s.op == Op::AllGather) dst += static_cast<size_t>(comm->rank()) * bytes;
  std::memcpy(dst, in, bytes);
}

void finish_host_collective(const CollectiveStep& s, void* out) {
  auto comm = communicator_for(s.op, s.world);
  if (s.count == 0) return;  // every rank has the same graph: all skip it
  const size_t bytes = static_cast<size_t>(s.count) * dtype_size(s.dtype);
  switch (s.op) {
    case Op::AllReduce:
      comm->all_reduce(out, s.count, s.dtype, static_cast<dist::ReduceOp>(s.reduce));
      return;
    case Op::Broadcast:
      comm->broadcast(out, bytes, s.root);
      return;
    case Op::AllGather: {
      char* base = static_cast<char*>(out);
      comm->all_gather(base + static_cast<size_t>(comm->rank()) * bytes, base, bytes);
      return;
    }
    default:
      fail(ErrorKind::Runtime, "internal: collective step ", s.name, " has op ", op_name(s.op));
  }
}

void run_host_collective(const CollectiveStep& s, const void* in, void* out) {
  prepare_host_collective(s, in, out);
  finish_host_collective(s, out);
}

}  // namespace lt
