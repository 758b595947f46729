// The reference interpreter: executes a Plan's prim graph node by node on the host, in float64
// for floating types (rounded to the node's dtype after every node). It is the oracle for the
// compiling backends and for `lazytensor bisect`.
#pragma once
#include <memory>
#include <vector>

#include "backends/backend.h"

namespace lt {

std::unique_ptr<Backend> make_reference_backend();

// Evaluates every node of `g`; values[i] is node i's result as a host buffer of its dtype.
// Used by bisect to compare each node against another backend.
std::vector<BufferPtr> interpret_all(const PrimGraph& g, const std::vector<RunInput>& inputs);

}  // namespace lt
