// Readable forms of a graph: text (one line per node) and Graphviz DOT.
#pragma once
#include <string>

#include "ir/graph.h"

namespace lt {

// %3 = mul(%0, %1) : float32[4, 3]            # train.py:12
std::string graph_text(const Graph& g);
std::string graph_dot(const Graph& g);

}  // namespace lt
