// Collectives in a plan: each all_reduce, broadcast or all_gather prim (ir/ops.def) is a library
// step that the backend runs through the default process group's communicator (distributed/), in
// plan order. Every rank syncs the same graph, so every rank runs the same steps in the same
// order; what differs between ranks is only the data.
#pragma once
#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "ir/node.h"
#include "ir/ops.h"

namespace lt {

struct CollectiveStep {
  std::string name;
  Op op = Op::AllReduce;         // AllReduce, Broadcast or AllGather
  DType dtype = DType::Float32;  // of in and out
  int reduce = 0;                // AllReduce: 0 sum, 1 avg, 2 max (ir/ops.def)
  int root = 0;                  // Broadcast: the rank whose value everyone gets
  int world = 1;                 // the group's size when the graph was traced
  int in = -1, out = -1;         // plan buffers: in holds count elements, out count (x world)
  int64_t count = 0;             // elements of one rank's value
  int group = 0;  // AllReduce: > 0, runs in one engine call with the adjacent steps of its group
};

// The step of a collective prim `op` of dtype t, attributes a (ir/ops.def) over `count` elements a
// rank (buffers and name unset).
CollectiveStep collective_step_of(Op op, DType t, const Attrs& a, int64_t count);

// Whether all_reduce steps a and b belong to one call group (CollectiveStep::group) whose
// members a backend packs into one engine call: the same group, dtype and reduction.
bool same_engine_call(const CollectiveStep& a, const CollectiveStep& b);

struct Plan;

// Moves each collective step (and the kernel that writes its operand, when that kernel reads only
// values ready earlier) to right after the steps its operand needs: a data-parallel step's
// gradient all_reduce, traced after the whole backward pass, then runs as soon as its bucket is
// ready, and a backend that runs collectives on a worker (backends/collective_queue.h) overlaps it
// with the rest of the backward pass. The all_reduces of one call group (CollectiveStep::group)
// move together, adjacent, to right after the latest of their operands. Deterministic: every rank
// gets the same order.
void hoist_collectives(Plan& plan);

// Then reorders the steps (a topological order of their buffer dependencies) so that work waiting
// on no collective goes first, in its order, and the steps that wait on a collective follow by the
// last collective they wait on: a data-parallel step's optimizer updates run as their own
// gradients' all_reduces end, the earliest first, instead of all queuing behind the update that
// waits on the last all_reduce (the embedding's, which backward finishes last). Collectives keep
// their order and are placed as soon as they are ready. Deterministic: every rank gets the same
// order.
void order_by_collectives(Plan& plan);

// Checks the step's invariants (op, reduce or root in range, buffer sizes); throws lt::Error
// naming `where` (a damaged cache entry, a bad plan).
void validate_collective(const CollectiveStep& c, int64_t in_numel, int64_t out_numel,
                         const char* where);

}  // namespace lt
