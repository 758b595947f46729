// The device-neutral kernel ("loop") IR that fusion produces and every compiling backend consumes.
//
// A kernel iterates an outer space (parallel; flattened it is the unit split across threads or
// CUDA blocks) and, per outer point, runs its stages in order:
//   Reduce   - loops over the inner space, combining one value per inner point into an accumulator;
//              the result is a scalar per outer point that later stages read with ReduceResult.
//   MapInner - loops over the inner space and stores values (softmax's final normalize).
//   MapOuter - runs once per outer point and stores values (elementwise kernels, reduce epilogues).
// Loop variables are numbered 0..outer.size()-1 for the outer dims, then the inner dims.
// Example: y = (x*2).sum(1) for x[N,M]: outer=[N], inner=[M], stages = [Reduce(sum, load x*2),
// MapOuter(store y[o0] = ReduceResult 0)]. A pure elementwise kernel: outer = its shape, inner =
// [], one MapOuter stage. Softmax: [Reduce max, Reduce sum(exp(x-max)), MapInner store].
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ir/dtype.h"
#include "ir/ops.h"
#include "ir/shape.h"

namespace lt::loop {

// Integer index expressions. All values they produce are non-negative, so FloorDiv/Mod may be
// emitted as unsigned division. Value is a data-dependent index (gather/scatter_add): the int64
// result of an instruction of the stage body that evaluates the index, which lowering has already
// clamped to [0, hi], so every address it forms is in bounds; it must precede the instruction
// (or be in the body of the store) using the index.
//
// Symbolic sizes (issue 30, lowering/generalize.h): a `*param` field >= 0 names a size parameter
// (Plan::sym.params) whose run-time value replaces the int64 beside it, which holds the value at
// the binding the plan was instantiated for. Code generators that compile symbolic kernels
// (Backend::symbolic_sizes) read the parameter at run time; -1 (and empty vectors) mean static.
struct IExpr {
  enum class Kind : uint8_t { Const, Var, Add, Mul, FloorDiv, Mod, Value } kind;
  int64_t value = 0;   // Const: the constant; Var: loop variable number; Value: instruction id
  int a = -1, b = -1;  // operands (indices into Kernel::iexprs)
  int64_t hi = 0;      // Value: the largest value the instruction can hold
  int param = -1;      // Const: a size parameter giving `value`; Value: one giving `hi`
};

// A flat element offset into a buffer: offset + sum(strides[v] * var[v]) when affine (general < 0),
// else the IExpr tree rooted at Kernel::iexprs[general].
struct Index {
  int64_t offset = 0;
  std::vector<int64_t> strides;  // one per loop variable (outer then inner); 0 where unused
  int general = -1;
  int offset_param = -1;           // symbolic: the size parameter giving `offset`
  std::vector<int> stride_params;  // symbolic: empty, or per stride its size parameter or -1
  bool affine() const { return general < 0; }
  bool symbolic() const {
    if (offset_param >= 0) return true;
    for (int p : stride_params)
      if (p >= 0) return true;
    return false;
  }
};

enum class IKind : uint8_t {
  Load,          // dtype <- args[arg] at index
  LoadScalar,    // dtype <- the 0-d scalar argument args[arg] (host value; by-value on CUDA)
  Const,         // dtype <- value
  Op,            // dtype <- op(a[, b[, c]]) for unary/binary/compare/logical/where/cast prims
  RandUniform,   // dtype <- uniform [0,1) from seed=a, offset=b (int64 instrs), counter = index
  ReduceResult,  // acc dtype <- result of stage `arg` for the current outer point
  Position,      // dtype <- the value of `index` (an iota: each element's own position)
};

struct Instr {
  IKind kind;
  Op op = Op::Add;             // IKind::Op: which primitive
  DType dtype;                 // result dtype (Compare/Logical/Not: Bool; Cast: the target)
  int a = -1, b = -1, c = -1;  // operand instruction ids in the same stage body
  int arg = -1;                // Load/LoadScalar: kernel arg; ReduceResult: stage number
  Index index;                 // Load: element offset; RandUniform: the element's counter;
                               // Position: the value
  double value = 0;            // Const
  int64_t stream = 0;          // RandUniform: stream id (see rand_uniform below)
  // Const only, symbolic: `value` is size parameter `param` (converted to dtype), or its
  // reciprocal 1/param (a mean's divisor) when param_reciprocal; computed in double, then cast,
  // as lowering computes the static constant.
  int param = -1;
  bool param_reciprocal = false;
};

struct Store {
  int arg;  // kernel arg to write
  Index index;
  int value;  // instruction id in the stage body; converted to the arg's dtype by a Cast instr
  // scatter_add: add the value to the element instead of overwriting it. Several points of the
  // outer space may hit one element, so backends make the add atomic or run the kernel serially.
  bool accumulate = false;
};

enum class StageKind : uint8_t { Reduce, MapInner, MapOuter };

struct Stage {
  StageKind kind;
  std::vector<Instr> body;  // SSA: an instruction uses only earlier ones of the same body
  // Reduce only:
  Op reduce_op = Op::ReduceSum;  // ReduceSum, ReduceMax, ReduceMin, ReduceProd
  int reduce_value = -1;         // instruction combined into the accumulator, of dtype acc_dtype
  DType acc_dtype = DType::Float32;
  // Map stages only:
  std::vector<Store> stores;
};

struct Arg {
  int buffer;  // Plan buffer id
  DType dtype;
  int64_t numel;
  bool scalar = false;   // a runtime 0-d scalar (read with LoadScalar)
  bool output = false;   // written by this kernel
  int numel_param = -1;  // symbolic: the size parameter giving numel
};

struct Kernel {
  std::string name;
  Shape outer, inner;
  std::vector<Arg> args;
  std::vector<Stage> stages;
  std::vector<IExpr> iexprs;
  // (input arg, output arg) pairs that the runtime may bind to one buffer (a donated input updated
  // in place, lowering/donation.h). Each such input is read only where its output is written, at
  // the same index; code generators must still not assume the two pointers are distinct.
  std::vector<std::pair<int, int>> inplace;
  // Symbolic: empty, or per dim of outer / inner its size parameter or -1.
  std::vector<int> outer_params, inner_params;
  int64_t outer_numel() const { return numel(outer); }
  // Whether any field names a size parameter (the kernel must be compiled for run-time sizes).
  bool symbolic() const {
    auto any = [](const std::vector<int>& v) {
      for (int p : v)
        if (p >= 0) return true;
      return false;
    };
    if (any(outer_params) || any(inner_params)) return true;
    for (const auto& a : args)
      if (a.numel_param >= 0) return true;
    for (const auto& e : iexprs)
      if (e.param >= 0) return true;
    for (const auto& st : stages) {
      for (const auto& in : st.body)
        if (in.param >= 0 || in.index.symbolic()) return true;
      for (const auto& s : st.stores)
        if (s.index.symbolic()) return true;
    }
    return false;
  }

  bool accumulates() const {
    for (const auto& st : stages)
      for (const auto& s : st.stores)
        if (s.accumulate) return true;
    return false;
  }
};

// Whether the instruction's `index` means anything (is read by code generators).
inline bool has_index(const Instr& in) {
  return in.kind == IKind::Load || in.kind == IKind::RandUniform || in.kind == IKind::Position;
}

// Whether an index reads a data-dependent value (IExpr::Value) anywhere in its tree.
inline bool uses_value(const Kernel& k, const Index& ix) {
  if (ix.affine()) return false;
  std::vector<int> todo{ix.general};
  while (!todo.empty()) {
    const IExpr& e = k.iexprs.at(static_cast<size_t>(todo.back()));
    todo.pop_back();
    if (e.kind == IExpr::Kind::Value) return true;
    if (e.kind != IExpr::Kind::Const && e.kind != IExpr::Kind::Var)
      todo.insert(todo.end(), {e.a, e.b});
  }
  return false;
}

// The counter-based generator shared by every backend, so one seed gives the same numbers on
// every device: SplitMix64's finalizer over (seed, offset + 2*counter + stream), top 24 bits
// (float32) or 53 bits (float64) scaled to [0, 1).
inline uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline double rand_uniform(int64_t seed, int64_t offset, int64_t counter, int64_t stream, DType t) {
  uint64_t bits = splitmix64(static_cast<uint64_t>(seed) * 0xd1342543de82ef95ull +
                             static_cast<uint64_t>(offset + 2 * counter + stream));
  return t == DType::Float64 ? static_cast<double>(bits >> 11) * 0x1.0p-53
                             : static_cast<double>(bits >> 40) * 0x1.0p-24;
}

}  // namespace lt::loop
