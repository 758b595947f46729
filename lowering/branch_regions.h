// Which instructions of a kernel stage a code generator may compute inside one side of a `where`
// instead of before it (loop IR, loop_ir.h). A stage body is SSA and code generators emit it in
// order, so every load of both sides of every select runs for every point. cat is a chain of
// selects over its pieces (runtime/indexing.cc), each piece a load at a wrapped index: a 12-piece
// cat loaded 12 values (and took 12 modulos) per element it wrote. Emitting a side's own
// instructions under `if (cond) { ... } else { ... }` loads one.
#pragma once
#include <vector>

#include "lowering/loop_ir.h"

namespace lt::loop {

// Per instruction of `st`: -1 when it belongs before any branch (the top level), else the region
// 2 * w + side: compute it inside side `side` (0: the `a` operand when true, 1: the `b` operand)
// of the select at instruction w. An instruction is placed in a region when every use of it is
// there (a use by a select as its value operand counts as that select's side; a use as a
// condition, by a store, as the reduced value, or by an index expression (Index::general's Value)
// counts where the user is). A select gets regions only when one of its sides then holds a load
// of a buffer (else a conditional move is cheaper than a branch); its other instructions stay
// where the select is. Regions nest: a select inside a side has its own sides.
struct BranchRegions {
  std::vector<int> region;   // per instruction: -1 or 2 * w + side
  std::vector<char> branch;  // per instruction: a select with regions, emitted as a branch
};
BranchRegions branch_regions(const Kernel& k, const Stage& st);

}  // namespace lt::loop
