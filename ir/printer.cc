#include "ir/printer.h"

#include <sstream>
#include <unordered_map>

namespace lt {
namespace {

std::string attrs_text(const Node& n) {
  std::ostringstream os;
  const OpInfo& info = op_info(n.op);
  switch (info.cls) {
    case OpClass::Reduce:
      os << "axes=" << shape_str(n.attrs.ints) << (n.attrs.keepdim ? ", keepdim" : "");
      break;
    case OpClass::Reshape:
    case OpClass::Expand:
      os << "shape=" << shape_str(n.attrs.ints);
      break;
    case OpClass::Permute:
      os << "perm=" << shape_str(n.attrs.ints);
      break;
    case OpClass::Slice:
      os << "start,step,size=" << shape_str(n.attrs.ints);
      break;
    case OpClass::AxisUnary:
    case OpClass::Gather:
    case OpClass::ScatterAdd:
      os << "axis=" << n.attrs.ints.at(0);
      break;
    case OpClass::Cast:
      os << "dtype=" << dtype_name(n.attrs.dtype);
      break;
    case OpClass::Rand:
      os << "stream=" << n.attrs.stream;
      break;
    case OpClass::Conv:
      os << "stride,padding,dilation,groups[,sizes]=" << shape_str(n.attrs.ints);
      break;
    case OpClass::Attention:
      os << "causal=" << n.attrs.ints.at(0) << ", scale=" << n.attrs.value;
      break;
    case OpClass::Collective:
      os << (n.op == Op::AllReduce   ? "reduce="
             : n.op == Op::Broadcast ? "root="
                                     : "_=")
         << n.attrs.ints.at(0) << ", world=" << n.attrs.ints.at(1);
      if (n.attrs.ints.size() > 2) os << ", group=" << n.attrs.ints[2];
      break;
    case OpClass::LayerNorm:
      os << "dims=" << n.attrs.ints.at(0) << ", eps=" << n.attrs.value;
      break;
    default:
      break;
  }
  return os.str();
}

// Numbers every node: inputs first (in input order), then the rest in post order.
std::unordered_map<const Node*, int> number(const Graph& g) {
  std::unordered_map<const Node*, int> id;
  int next = static_cast<int>(g.inputs.size());
  for (const Node* n : g.order)
    id[n] = (n->op == Op::Param || n->op == Op::Scalar) ? g.input_of.at(n) : next++;
  return id;
}

std::string type_text(const Node& n) {
  return std::string(dtype_name(n.dtype)) + shape_str(n.shape);
}

}  // namespace

std::string graph_text(const Graph& g) {
  auto id = number(g);
  std::ostringstream os;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    os << "%" << i << " = " << (n->op == Op::Param ? "param" : "scalar") << " : " << type_text(*n)
       << "\n";
  }
  for (const Node* n : g.order) {
    if (n->op == Op::Param || n->op == Op::Scalar) continue;
    os << "%" << id[n] << " = " << op_name(n->op) << "(";
    for (size_t i = 0; i < n->inputs.size(); ++i) os << (i ? ", %" : "%") << id[n->inputs[i].get()];
    std::string a =
        n->op == Op::Constant ? "value=" + std::to_string(n->attrs.value) : attrs_text(*n);
    if (!a.empty()) os << (n->inputs.empty() ? "" : "; ") << a;
    os << ") : " << type_text(*n);
    const std::string& src = source_str(n->source);
    if (!src.empty()) os << "  # " << src;
    os << "\n";
  }
  os << "return";
  for (size_t i = 0; i < g.roots.size(); ++i) os << (i ? ", %" : " %") << id[g.roots[i]];
  os << "\n";
  return os.str();
}

std::string graph_dot(const Graph& g) {
  auto id = number(g);
  std::ostringstream os;
  os << "digraph lazytensor {\n  node [shape=box, fontname=monospace];\n";
  for (const Node* n : g.order) {
    bool leaf = n->op == Op::Param || n->op == Op::Scalar;
    os << "  n" << id[n] << " [label=\"%" << id[n] << " " << op_name(n->op) << "\\n"
       << type_text(*n) << "\"" << (leaf ? ", style=filled, fillcolor=lightgray" : "") << "];\n";
    for (auto& c : n->inputs) os << "  n" << id[c.get()] << " -> n" << id[n] << ";\n";
  }
  for (size_t i = 0; i < g.roots.size(); ++i)
    os << "  out" << i << " [shape=ellipse, label=\"output " << i << "\"];\n  n" << id[g.roots[i]]
       << " -> out" << i << ";\n";
  os << "}\n";
  return os.str();
}

}  // namespace lt
