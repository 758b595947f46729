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

std::shared_ptr<std::vector<char>> prepare_host_call(
    const std::vector<const CollectiveStep*>& steps, const std::vector<const void*>& ins) {
  communicator_for(steps.front()->op, steps.front()->world);
  const size_t es = dtype_size(steps.front()->dtype);
  size_t total = 0;
  for (const CollectiveStep* s : steps) total += static_cast<size_t>(s->count) * es;
  auto packed = std::make_shared<std::vector<char>>(total);
  size_t off = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t bytes = static_cast<size_t>(steps[i]->count) * es;
    if (bytes) std::memcpy(packed->data() + off, ins[i], bytes);
    off += bytes;
  }
  return packed;
}

void finish_host_call(const std::vector<const CollectiveStep*>& steps, std::vector<char>& packed,
                      const std::vector<void*>& outs) {
  const CollectiveStep& first = *steps.front();
  auto comm = communicator_for(first.op, first.world);
  const size_t es = dtype_size(first.dtype);
  if (packed.empty()) return;  // every rank has the same graph: all skip it
  comm->all_reduce(packed.data(), static_cast<int64_t>(packed.size() / es), first.dtype,
                   static_cast<dist::ReduceOp>(first.reduce));
  size_t off = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    const size_t bytes = static_cast<size_t>(steps[i]->count) * es;
    if (bytes) std::memcpy(outs[i], packed.data() + off, bytes);
    off += bytes;
  }
}

uint64_t collectives_signature(const std::vector<CollectiveStep>& steps) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the fields every rank must agree on
  auto mix = [&](int64_t v) {
    for (int i = 0; i < 8; ++i)
      h = (h ^ ((static_cast<uint64_t>(v) >> (8 * i)) & 0xff)) * 1099511628211ull;
  };
  mix(static_cast<int64_t>(steps.size()));
  for (const CollectiveStep& c : steps) {
    mix(static_cast<int64_t>(c.op)), mix(static_cast<int64_t>(c.dtype)), mix(c.count);
    mix(c.world), mix(c.reduce), mix(c.root), mix(c.group);
  }
  return h;
}

std::string describe_collectives(const std::vector<CollectiveStep>& steps) {
  std::string s;
  for (size_t i = 0; i < steps.size() && i < 4; ++i)
    s += (i ? ", " : "") + std::string(op_name(steps[i].op)) + " of " +
         std::to_string(steps[i].count) + " " + std::string(dtype_name(steps[i].dtype));
  if (steps.size() > 4) s += ", ... (" + std::to_string(steps.size()) + " in all)";
  return s;
}

void check_same_collectives(const std::vector<CollectiveStep>& steps) {
  if (steps.empty()) return;
  auto comm = communicator_for(steps[0].op, steps[0].world);
  const uint64_t mine = collectives_signature(steps);
  std::vector<uint64_t> all(static_cast<size_t>(comm->size()));
  comm->all_gather(&mine, all.data(), sizeof mine);
  for (size_t r = 0; r < all.size(); ++r)
    if (all[r] != mine)
      fail(ErrorKind::Runtime, "collectives differ between ranks: rank ", comm->rank(),
           " syncs a graph whose collectives are ", describe_collectives(steps), "; rank ", r,
           " syncs a graph with other collectives. Every rank must sync the same graphs in the "
           "same order");
}

}  // namespace lt
