// The trace file format (CONTRACT.md "Trace file"): a graph as versioned JSON. The loader validates
// everything (unknown op, arity, attrs, ids, dtypes, shapes that do not infer, future versions) by
// rebuilding each node through make_node, and throws lt::Error with one clear line.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace lt {

constexpr int kTraceVersion = 1;

struct TraceInput {
  int id;
  bool scalar;  // a runtime Scalar leaf (value stored inline) or a Param (data stored apart)
  DType dtype;
  Shape shape;
  double value = 0;  // scalar inputs
  int64_t value_i = 0;
  std::string data;  // param inputs: "<file>#<index>" reference, may be empty
};

// Serializes graph `g` (its order, inputs and roots) to trace JSON text.
// `data_ref(i)` names where input i's data is stored ("" when not dumped); `output_ref(i)`
// likewise. `node_ref(n)` optionally names where node n's recorded value is stored ("" = not
// recorded).
std::string trace_to_json(const Graph& g, const std::string& hash, const std::string& backend,
                          const std::function<std::string(int)>& data_ref,
                          const std::function<std::string(int)>& output_ref,
                          const std::function<std::string(const Node*)>& node_ref = nullptr);

struct LoadedTrace {
  std::string hash, backend;
  std::vector<TraceInput> inputs;
  NodeList roots;  // rebuilt nodes, leaves made with `leaf_data`
  std::vector<std::string> output_refs;
  NodeList nodes;                      // every rebuilt node by trace order (for bisect)
  std::vector<int> node_ids;           // trace id of nodes[i]
  std::vector<std::string> node_refs;  // recorded value of nodes[i] ("" when not recorded)
};

// Parses and validates trace JSON. `leaf_data(input)` supplies the data handle of each Param input.
LoadedTrace trace_from_json(
    const std::string& text,
    const std::function<std::shared_ptr<LeafData>(const TraceInput&)>& leaf_data);

}  // namespace lt
