// The node-by-node evaluator behind the reference backend and interpret_all.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "backends/reference/interp.h"

namespace lt::ref {

// Checks everything about a prim graph that does not depend on the run's inputs: op codes,
// primitive ops with a rule, arity, operand indices (each smaller than the node's), shapes against
// ir/infer.cc's rules, input indices and outputs. Throws lt::Error naming the node.
void validate_graph(const PrimGraph& g);

// Evaluates a validated graph in order. Values of nodes with keep[i] survive; others are dropped
// after their last use. `sink`, when set, sees each value as soon as it is computed.
std::vector<std::unique_ptr<Value>> evaluate(const PrimGraph& g,
                                             const std::vector<RunInput>& inputs,
                                             const std::vector<bool>& keep,
                                             const std::function<void(int, const Value&)>& sink);

}  // namespace lt::ref
