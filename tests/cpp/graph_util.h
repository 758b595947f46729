// Helpers for tests that build graphs by hand (IR, lowering, codegen, plan files). Their plans
// are built, hashed, serialized or compiled, never run on these leaves' data, so FakeData holds
// none.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/node.h"
#include "lowering/lower.h"

namespace lt::testing {

struct FakeData : LeafData {};

inline NodePtr param(Shape s, DType t = DType::Float32) {
  return make_param(t, std::move(s), std::make_shared<FakeData>());
}

// Leaves made in order and remembered, for tests that feed the graph's inputs by position.
struct ParamList {
  NodeList params;
  NodePtr p(Shape s, DType t = DType::Float32) {
    params.push_back(param(std::move(s), t));
    return params.back();
  }
};

// The plan of the graph that reaches `roots`.
inline Plan plan_of(const NodeList& roots, const LowerOptions& opts = {}) {
  std::vector<const Node*> r;
  for (auto& n : roots) r.push_back(n.get());
  return lower(collect_graph(r), opts);
}

}  // namespace lt::testing
