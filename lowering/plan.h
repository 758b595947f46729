// The lowered form of a graph: buffers, kernels over them, and the prim graph they came from.
// A Plan is device-neutral; a backend compiles it into an Executable.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ir/size_expr.h"
#include "lowering/attention.h"
#include "lowering/collective.h"
#include "lowering/conv.h"
#include "lowering/gemm.h"
#include "lowering/loop_ir.h"
#include "lowering/prim_graph.h"

namespace lt {

struct BufferSpec {
  enum class Kind : uint8_t { Input, Scalar, Temp, Output } kind;
  DType dtype;
  int64_t numel;
  int input = -1;        // Input/Scalar: graph input index
  int numel_param = -1;  // symbolic: the size parameter giving numel (see PlanSymbols)
  // A Temp that lives inside another buffer (`alias`, itself no alias, of the same dtype) from
  // element alias_offset on: a concat operand written straight into its range of the result
  // (lowering/concat_match.cc). It has no memory of its own; step_buffers names `alias` for it.
  int alias = -1;
  int64_t alias_offset = 0;
};

// Where a buffer's memory is: its alias's when it has one (BufferSpec::alias), else its own.
inline int memory_of(const std::vector<BufferSpec>& buffers, int b) {
  return b >= 0 && b < static_cast<int>(buffers.size()) && buffers[b].alias >= 0 ? buffers[b].alias
                                                                                 : b;
}

// A library step's int64 fields that are symbolic: (field ordinal in for_each_size_field's order,
// size parameter), see lowering/generalize.h.
using StepSizeParams = std::vector<std::pair<int, int>>;

// Symbolic sizes (issue 30): a plan lowered for one binding of size symbols s0..s{n-1} (dims of
// the graph's inputs, runtime/dynamic.h) whose sizes are expressions of them, so one compiled plan
// serves every binding its guards admit. params are the distinct expressions that the plan's
// fields name by index (loop IR `*param` fields, BufferSpec::numel_param, the step and output
// tables here); the int64 fields hold their values at the binding the plan was made for. Empty
// (num_symbols 0) for a static plan. Built by generalize_plan (lowering/generalize.h).
struct PlanSymbols {
  int num_symbols = 0;
  std::vector<SizeExpr> params;
  std::vector<StepSizeParams> gemms, convs, attentions;  // per step of that kind
  std::vector<std::vector<int>> output_dims;             // per graph root: per dim a param or -1
  // Per symbol, the values [lo, hi] the plan was checked for (lowering/generalize.h): a binding
  // outside them needs another compile.
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool symbolic() const { return num_symbols > 0; }
  bool in_range(std::span<const int64_t> symbols) const { return in_ranges(ranges, symbols); }
  // Whether there is one value per range, each inside its range.
  static bool in_ranges(const std::vector<std::pair<int64_t, int64_t>>& ranges,
                        std::span<const int64_t> symbols) {
    if (symbols.size() != ranges.size()) return false;
    for (size_t i = 0; i < ranges.size(); ++i)
      if (symbols[i] < ranges[i].first || symbols[i] > ranges[i].second) return false;
    return true;
  }
  // Every parameter's value for symbol values `symbols`.
  std::vector<int64_t> values(std::span<const int64_t> symbols) const {
    std::vector<int64_t> v;
    v.reserve(params.size());
    for (const auto& e : params) v.push_back(e.eval(symbols));
    return v;
  }
};

// A graph output that may be written into the memory of a graph input (both plan buffer ids, an
// Output and an Input of the same dtype and size): see lowering/donation.h.
struct Donation {
  int output;
  int input;
};

// Which library steps lowering may emit (a backend's capabilities); the default emits none, so
// every matmul stays a fused loop kernel.
// conv_dtypes: the dtypes of conv prims the backend runs as library steps; decompose expands the
// others into the sliding-window + im2col GEMM form (lowering/expand_conv.h).
// attention_dtypes / attention_head_dim: the attention prims (ir/attention.h) the backend runs as
// library steps: of these dtypes, and with query/key and value head dims of attention_head_dim
// (0: any); decompose expands the others into matmuls and softmax (lowering/expand_attention.h).
struct LowerOptions {
  std::vector<DType> gemm_dtypes;
  std::vector<DType> conv_dtypes;
  std::vector<DType> attention_dtypes;
  int64_t attention_head_dim = 0;
  // A backend with far more threads than a few hundred long rows keep busy (CUDA; off with
  // LT_CUDA_SPLIT_REDUCTIONS=0): a reduction
  // with few outputs is split in two stages even when its result is read back over its rows
  // (batch norm's statistics over N, H, W: one block per channel left most of a GPU idle), and a
  // first-stage row's length counts every reduced axis, not only the outermost run
  // (lowering/split_reduce.h).
  bool split_for_many_threads = false;
  // A backend whose convolution library runs NHWC natively (cuDNN's tensor-core engines) keeps
  // convolution data in NHWC memory between the kernels around them (lowering/channels_last.h).
  bool conv_channels_last = false;
  // Roots that are contiguous parts of another computed value read its buffer instead of a copy
  // (lowering/output_views.h). Off where a plan must stay comparable across sizes (symbolic plans,
  // lowering/generalize.h).
  bool output_views = true;
  // Collectives start beside light work rather than as soon as their operand is ready
  // (lowering/collective_placement.h). Meant for NCCL, whose collectives hold SMs; the CUDA and
  // CPU backends take it from LT_COLLECTIVE_PLACEMENT (on the CPU only to check the moves).
  bool collectives_beside_light_work = false;
  bool gemm(DType t) const { return has(gemm_dtypes, t); }
  bool conv(DType t) const { return has(conv_dtypes, t); }
  bool attention(DType t, int64_t e, int64_t ev) const {
    return has(attention_dtypes, t) &&
           (attention_head_dim == 0 || (e == attention_head_dim && ev == attention_head_dim));
  }

 private:
  static bool has(const std::vector<DType>& v, DType t) {
    for (DType g : v)
      if (g == t) return true;
    return false;
  }
};

// Derived from a Plan's other fields by complete_plan (lowering/complete_plan.h); carried in the
// Plan so that backends execute lowering's decisions instead of calling back into lowering.

// Memory planning (lowering/memory_plan.h): temporaries with disjoint lifetimes share one "slot".
struct MemoryPlan {
  std::vector<int> slot_of;        // per plan buffer: its slot, or -1 (not a temporary)
  std::vector<size_t> slot_bytes;  // per slot: the largest temporary it holds
  size_t temp_bytes_unshared = 0;  // what the temporaries would take one allocation each
  size_t temp_bytes_planned = 0;   // sum of slot_bytes
};

// Kernels whose loop IR is equal but for name and buffer ids compile to the same code (a stack of
// identical layers repeats its kernels), so backends compile one of each. first[c] is the first
// kernel with code c; code_of[i] is kernel i's code.
struct DistinctKernels {
  std::vector<size_t> first;
  std::vector<size_t> code_of;
};

struct Plan {
  PrimGraph prims;  // after decomposition and simplification
  std::vector<BufferSpec> buffers;
  std::vector<loop::Kernel> kernels;
  std::vector<Gemm> gemms;
  std::vector<ConvStep> convs;
  std::vector<AttentionStep> attentions;
  std::vector<CollectiveStep> collectives;
  std::vector<PlanStep> steps;       // kernels, gemms, convs and attentions, in the order they run
  std::vector<int> output_buffers;   // per graph root: the buffer holding its value
  std::vector<Shape> output_shapes;  // per graph root
  // Per graph root, empty when none is a view: where its value starts in output_buffers[r], in
  // elements. A root that is a contiguous part of another computed value (a reshape or slice of
  // it: DDP's gradients sliced out of a flattened bucket, a split's pieces) is that value's buffer
  // from this offset, output_shapes[r] elements long, not a copy (lowering/output_views.h).
  std::vector<int64_t> output_offsets;
  std::string grouping;             // human-readable kernel grouping (LT_DEBUG=2)
  std::vector<Donation> donations;  // outputs that may update an input in place (find_donations)
  MemoryPlan memory;                // derived: see complete_plan
  DistinctKernels distinct;         // derived, over `kernels`: see complete_plan
  // Symbolic sizes; memory.slot_bytes then holds the instantiated binding's sizes, and an
  // executable recomputes them per binding (slot_bytes_at in lowering/memory_plan.h).
  PlanSymbols sym;

  // Whether the derived fields have the sizes the buffers and kernels call for: a cheap check that
  // backends make, so a plan nobody completed fails with a clear internal error.
  bool is_completed() const {
    return memory.slot_of.size() == buffers.size() && distinct.code_of.size() == kernels.size();
  }

  // Plans built by hand (tests) may leave steps empty: then the kernels run in order.
  std::vector<PlanStep> ordered_steps() const {
    if (!steps.empty()) return steps;
    std::vector<PlanStep> s;
    for (size_t i = 0; i < kernels.size(); ++i)
      s.push_back({PlanStep::Kind::Kernel, static_cast<int>(i)});
    return s;
  }
};

// The plan buffers step `st` reads and writes (a bias of -1 included as a read: callers skip
// negative ids). Memory planning, donation and the step-order passes share it.
void step_buffers(const Plan& plan, const PlanStep& st, std::vector<int>& reads,
                  std::vector<int>& writes);
// Per step of `steps`, every buffer it reads or writes (step_buffers' two lists in one): what the
// executables check against the collectives in flight before running a step.
std::vector<std::vector<int>> step_touches(const Plan& plan, const std::vector<PlanStep>& steps);

}  // namespace lt
