#include "lowering/output_views.h"

#include <map>
#include <set>

namespace lt {

namespace {

// Where node `i`'s elements lie in a computed base, when i is a chain of reshapes and contiguous
// slices over it: the base's index (a node that is neither a movement op nor a graph input) and
// the offset of i's first element there, in elements. False when some step of the chain is not
// contiguous.
bool contiguous_in_base(const PrimGraph& g, int i, int& base, int64_t& offset) {
  offset = 0;
  for (;;) {
    const PNode& n = g.nodes[static_cast<size_t>(i)];
    if (n.op == Op::Reshape) {
      i = n.inputs.at(0);
      continue;
    }
    if (n.op != Op::Slice) break;
    const PNode& in = g.nodes[static_cast<size_t>(n.inputs.at(0))];
    const size_t rank = in.shape.size();
    if (n.attrs.ints.size() != 3 * rank) return false;
    // Contiguous when, going outward, the dims are whole up to one dim sliced at step 1 (or of
    // one element), and every dim outside that one keeps one element.
    int64_t stride = 1, start = 0;
    bool partial = false;
    for (size_t d = rank; d-- > 0;) {
      const int64_t s = n.attrs.ints[3 * d], step = n.attrs.ints[3 * d + 1],
                    size = n.attrs.ints[3 * d + 2], extent = in.shape[d];
      if (partial && size != 1) return false;
      if (!(s == 0 && step == 1 && size == extent)) {
        if (size != 1 && step != 1) return false;
        partial = true;
      }
      start += s * stride;
      stride *= extent;
    }
    offset += start;
    i = n.inputs.at(0);
  }
  const PNode& b = g.nodes[static_cast<size_t>(i)];
  if (b.input_index >= 0 || b.op == Op::Param || b.op == Op::Scalar || b.op == Op::Constant ||
      is_movement(op_info(b.op).cls))
    return false;
  base = i;
  return true;
}

}  // namespace

OutputViews take_output_views(PrimGraph& g) {
  OutputViews v;
  const size_t roots = g.outputs.size();
  std::vector<int> base(roots, -1);
  std::vector<int64_t> offset(roots, 0);
  std::map<int, int64_t> covered;  // per base: the elements its candidate views hold
  const std::set<int> roots_named(g.outputs.begin(), g.outputs.end());  // named directly
  for (size_t r = 0; r < roots; ++r) {
    const int o = g.outputs[r];
    const PNode& n = g.nodes[static_cast<size_t>(o)];
    if (n.op != Op::Reshape && n.op != Op::Slice) continue;
    int b = -1;
    int64_t off = 0;
    if (!contiguous_in_base(g, o, b, off)) continue;
    const PNode& bn = g.nodes[static_cast<size_t>(b)];
    if (bn.dtype != n.dtype || numel(n.shape) == 0 || off + numel(n.shape) > numel(bn.shape))
      continue;
    base[r] = b;
    offset[r] = off;
    covered[b] += numel(n.shape);
  }
  bool any = false;
  for (size_t r = 0; r < roots; ++r) {
    const int b = base[r];
    if (b < 0) continue;
    const int64_t whole = numel(g.nodes[static_cast<size_t>(b)].shape);
    if (!roots_named.count(b) && 2 * covered[b] < whole) {
      base[r] = -1;  // too small a part to keep the whole value alive for
      continue;
    }
    any = true;
  }
  if (!any) return v;
  v.offsets.assign(roots, 0);
  for (size_t r = 0; r < roots; ++r) {
    v.shapes.push_back(g.nodes[static_cast<size_t>(g.outputs[r])].shape);
    if (base[r] < 0) continue;
    g.outputs[r] = base[r];
    v.offsets[r] = offset[r];
  }
  return v;
}

}  // namespace lt
