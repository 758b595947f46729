// The symbolic view of a traced graph (issue 30, dynamic shapes): given which dimensions of its
// inputs are dynamic, every node's shape and size attributes as size expressions (ir/size_expr.h)
// over symbols for those dimensions, and a graph key in which the symbols stand for their values.
// Two traces of one program at different sizes (a context one token longer, another batch size)
// get the same key, so one compiled graph can serve both, once lowering compiles it symbolically.
//
// The trace itself stays concrete: nodes keep their actual shapes and attributes, so tracing costs
// nothing more, and the symbolic view is computed at a sync, only for graphs with dynamic inputs.
// Input dims come from the caller (marked dynamic, or found to change between two compiles of one
// call site). Every other size is derived by each op's shape rule; the sizes users write into
// attributes (a reshape's target, an expand's sizes, a slice's bounds) are matched against the
// expressions the graph already holds: a reshape target dim of 37 next to a symbol s0 whose value
// is 37 becomes s0. That match is a guess, and it is sound without being right: the key of a later
// trace is computed the same way from that trace's own values, so it equals this key only where
// the later trace's attributes are the same expressions of its own sizes, and the compiled graph,
// evaluating the expressions, reproduces them. A wrong guess costs a compile, never a wrong result.
//
// Like torch, sizes 0 and 1 are never symbolic, and input dims of equal size share one symbol
// ("duck sizing"); a later binding where they differ has another key. Decisions the expressions
// cannot settle are taken on this trace's values and recorded as guards (ShapeEnv), which a later
// binding must satisfy to reuse what was compiled here.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/size_expr.h"

namespace lt {

// Dimension `dim` of graph input `input` (Graph::inputs) may change from call to call.
struct DynamicDim {
  int input;
  int dim;
  auto operator<=>(const DynamicDim&) const = default;
};

using SymShape = std::vector<SizeExpr>;

struct SymbolicGraph {
  ShapeEnv env;                  // the symbols, this trace's values of them, and the guards
  std::vector<SymShape> shapes;  // per node of Graph::order, its shape
  // Per node of Graph::order, the size-carrying entries of attrs.ints as expressions: a reshape's,
  // expand's or rand's target shape; a slice's (start, step, size) per dim; empty for other ops
  // (their attrs.ints are axes, permutations or flags, never sizes).
  std::vector<SymShape> size_attrs;
  std::vector<DynamicDim> symbol_dims;  // per symbol, the first input dim it stands for
  // Ops whose shape rule has no symbolic form yet (conv): their symbols are pinned to this trace's
  // values by guards. Op names, for LT_DEBUG and tests.
  std::vector<std::string> pinned_by;
  Hash128 key;  // Graph::key's counterpart: the same for one program at every binding
  // The program apart from every size: ops, dtypes, attributes that are no sizes, operands,
  // inputs and roots (bind_to compares it).
  Hash128 structure;
  bool symbolic() const { return env.num_symbols() > 0; }
};

// The symbolic view of g with the given input dims dynamic (out-of-range ones are ignored: the
// number of inputs can differ between traces of a call site). A dim of size 0 or 1 stays static.
SymbolicGraph symbolic_graph(const Graph& g, std::span<const DynamicDim> dynamic);

// g's program apart from its sizes (SymbolicGraph::structure computed without a symbolic view:
// the attributes of reshapes, expands, slices and random tensors count as sizes). Cheap (one
// pass): what runtime/dynamic_shapes.h tells programs at one call site apart by.
Hash128 program_structure(const Graph& g);

// The symbol values at which `ref` (the symbolic view of another trace) describes g exactly: g is
// the same program (ref.structure), each symbol's input dim holds one size throughout, and every
// node's shape and size attributes are ref's expressions at those values, with ref's guards
// holding. nullopt otherwise. A trace whose own symbolic view guessed differently (a length that
// equals a model width makes a slice bound look like the length) is still served by what was
// compiled for ref.
std::optional<std::vector<int64_t>> bind_to(const SymbolicGraph& ref, const Graph& g);

// Every symbol's value, solved ones (ShapeEnv::simplify) included, from the free symbols' values
// `free` (indexed by SymId; entries of solved symbols are ignored).
std::vector<int64_t> all_symbol_values(const SymbolicGraph& sg, std::span<const int64_t> free);

// The program of g traced at other sizes: every node rebuilt with its shape and size attributes
// evaluated at symbol values `symbols` (all_symbol_values), through make_node, so each op's shape
// rule checks it. Graph::order corresponds node for node to g's, and Param leaves keep their
// data (inputs deduplicate alike); nothing reads that data. Lowering this graph shows what
// lowering does at those sizes (lowering/generalize.h). Throws lt::Error when an op rejects the
// sizes (the symbolic view then does not describe the program there).
struct InstantiatedGraph {
  std::vector<NodePtr> nodes;  // owns graph's nodes
  Graph graph;
};
InstantiatedGraph instantiate(const Graph& g, const SymbolicGraph& sg,
                              std::span<const int64_t> symbols);

// "s0 = input 0 dim 1 (37)", one line per symbol, then the guards: for LT_DEBUG and errors.
std::string describe(const SymbolicGraph& sg);

}  // namespace lt
