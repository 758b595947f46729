#include "lowering/split_reduce.h"

#include <algorithm>

#include "lowering/size_choices.h"

namespace lt {
namespace {

// Below these a reduction is left whole: enough outputs to fill the machine already, or too
// little work for a second kernel to pay off.
constexpr int64_t kManyOutputs = 4096;
constexpr int64_t kMinReduced = 4096;
constexpr int64_t kTargetRows =
    8192;  // outputs x chunks to aim for in the first stage (a GPU's worth)
constexpr int64_t kMinChunkLen = 256;  // elements each first-stage row still reduces
// LowerOptions::split_for_many_threads: a reduction read back over its rows is split only when
// its rows are this long and this few (batch norm's statistics of a ResNet's first stages).
constexpr int64_t kReadBackMinReduced = 32768;
constexpr int64_t kReadBackMaxOutputs = 1024;

bool is_reduce(Op op) {
  return op == Op::ReduceSum || op == Op::ReduceMax || op == Op::ReduceMin || op == Op::ReduceProd;
}

// A matmul's decomposition (sum over K of expand(a) * expand(b)) is for GEMM matching to take.
// With M = N = 1 (a dot product) simplify has removed both expands, and two stages suit it well.
bool is_matmul_product(const PrimGraph& g, const PNode& r) {
  const PNode& in = g.nodes[static_cast<size_t>(r.inputs[0])];
  if (in.op != Op::Mul) return false;
  return g.nodes[static_cast<size_t>(in.inputs[0])].op == Op::Expand ||
         g.nodes[static_cast<size_t>(in.inputs[1])].op == Op::Expand;
}

// A reduction whose result is read back over its rows (softmax's max and sum, layer norm's
// statistics: broadcast back to the size of the rows it reduced, directly or through same-size
// ops) belongs to a row kernel that computes it and its consumers in one pass; splitting it would
// break that kernel up. A use at another larger size is no read-back: cat places each piece by
// tiling it along the whole length (runtime/indexing.cc), and a bias gradient gathered into
// DistributedDataParallel's bucket lost its split (4x slower on the GPU) to that rule.
bool read_back_over_rows(const PrimGraph& g, const std::vector<std::vector<int>>& users, int r) {
  const int64_t size = numel(g.nodes[static_cast<size_t>(r)].shape);
  const int64_t rows =
      numel(g.nodes[static_cast<size_t>(g.nodes[static_cast<size_t>(r)].inputs[0])].shape);
  std::vector<int> todo{r};
  std::vector<bool> seen(g.nodes.size(), false);
  while (!todo.empty()) {
    int n = todo.back();
    todo.pop_back();
    for (int u : users[static_cast<size_t>(n)]) {
      if (seen[static_cast<size_t>(u)]) continue;
      seen[static_cast<size_t>(u)] = true;
      const int64_t n_u = numel(g.nodes[static_cast<size_t>(u)].shape);
      if (n_u == rows && n_u > size) return true;
      if (n_u > size) continue;
      todo.push_back(u);  // same size (1 / sum, a reshape): what reads that counts too
    }
  }
  return false;
}

// The largest divisor of n not above cap (1 if none).
int64_t largest_divisor_upto(int64_t n, int64_t cap) {
  for (int64_t c = std::min(n, cap); c >= 2; --c)
    if (n % c == 0) return c;
  return 1;
}

}  // namespace

PrimGraph split_wide_reductions(const PrimGraph& g, const LowerOptions& opts) {
  PrimGraph out;
  out.num_inputs = g.num_inputs;
  std::vector<std::vector<int>> users(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int c : g.nodes[i].inputs) users[static_cast<size_t>(c)].push_back(static_cast<int>(i));
  std::vector<int> remap(g.nodes.size());
  auto add = [&](PNode p) {
    out.nodes.push_back(std::move(p));
    return static_cast<int>(out.nodes.size()) - 1;
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    PNode p = g.nodes[i];
    for (int& c : p.inputs) c = remap[static_cast<size_t>(c)];
    remap[i] = -1;
    if (is_reduce(p.op) && !is_matmul_product(g, g.nodes[i])) {
      const Shape& in = g.nodes[static_cast<size_t>(g.nodes[i].inputs[0])].shape;
      const int64_t rank = static_cast<int64_t>(in.size());
      std::vector<bool> red(in.size(), false);
      for (int64_t a : p.attrs.ints) {
        const int64_t axis = a < 0 ? a + rank : a;
        if (axis >= 0 && axis < rank)
          red[static_cast<size_t>(axis)] = true;  // a 0-d input names axis 0
      }
      int64_t outputs = 1, reduced = 1;
      for (size_t d = 0; d < in.size(); ++d) (red[d] ? reduced : outputs) *= in[d];
      // The outermost run of reduced axes [d0, d1) and its size.
      size_t d0 = 0;
      while (d0 < in.size() && !red[d0]) ++d0;
      size_t d1 = d0;
      int64_t run = 1;
      while (d1 < in.size() && red[d1]) run *= in[d1++];
      int64_t chunks = 1;
      // Symbolic lowering keeps reductions whole (lowering/size_choices.h).
      const bool many = opts.split_for_many_threads;
      if (!size_choices_active() && outputs < kManyOutputs && reduced >= kMinReduced &&
          d0 < in.size())
        chunks = largest_divisor_upto(run, std::min(std::max<int64_t>(2, kTargetRows / outputs),
                                                    (many ? reduced : run) / kMinChunkLen));
      // Last, as it walks the graph: only for a reduction that would be split.
      const bool read_back_ok =
          many && outputs <= kReadBackMaxOutputs && reduced >= kReadBackMinReduced;
      if (chunks >= 2 && (read_back_ok || !read_back_over_rows(g, users, static_cast<int>(i)))) {
        const DType acc = (p.dtype == DType::Float16 || p.dtype == DType::BFloat16) &&
                                  p.op != Op::ReduceMax && p.op != Op::ReduceMin
                              ? DType::Float32
                              : p.dtype;
        // [..., run, ...] -> [..., chunks, run / chunks, ...]
        Shape split(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(d0));
        split.push_back(chunks);
        split.push_back(run / chunks);
        split.insert(split.end(), in.begin() + static_cast<std::ptrdiff_t>(d1), in.end());
        PNode reshape{Op::Reshape, p.dtype, split, {}, {p.inputs[0]}, -1, p.source};
        reshape.attrs.ints = split;
        int x = add(reshape);
        if (acc != p.dtype) {
          PNode cast{Op::Cast, acc, split, {}, {x}, -1, p.source};
          cast.attrs.dtype = acc;
          x = add(cast);
        }
        // Stage 1: every reduced axis but the chunk axis (d0), kept as size 1.
        PNode first{p.op, acc, split, {}, {x}, -1, p.source};
        first.attrs.keepdim = true;
        for (size_t d = 0; d < split.size(); ++d) {
          const bool reduced_axis = d == d0 + 1 || (d > d0 + 1 && red[d1 + (d - d0 - 2)]);
          if (reduced_axis) first.attrs.ints.push_back(static_cast<int64_t>(d)), first.shape[d] = 1;
        }
        x = add(first);
        PNode second{p.op, acc, out.nodes[static_cast<size_t>(x)].shape, {}, {x}, -1, p.source};
        second.attrs.keepdim = true;
        second.attrs.ints = {static_cast<int64_t>(d0)};
        second.shape[d0] = 1;
        x = add(second);
        if (acc != p.dtype) {
          PNode cast{Op::Cast, p.dtype, out.nodes[static_cast<size_t>(x)].shape, {}, {x},
                     -1,       p.source};
          cast.attrs.dtype = p.dtype;
          x = add(cast);
        }
        PNode back{Op::Reshape, p.dtype, p.shape, {}, {x}, -1, p.source};
        back.attrs.ints = p.shape;
        remap[i] = add(back);
      }
    }
    if (remap[i] < 0) remap[i] = add(std::move(p));
  }
  for (int o : g.outputs) out.outputs.push_back(remap[static_cast<size_t>(o)]);
  return out;
}

}  // namespace lt
