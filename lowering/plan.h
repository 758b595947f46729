// The lowered form of a graph: buffers, kernels over them, and the prim graph they came from.
// A Plan is device-neutral; a backend compiles it into an Executable.
#pragma once
#include <string>
#include <vector>

#include "lowering/loop_ir.h"
#include "lowering/prim_graph.h"

namespace lt {

struct BufferSpec {
  enum class Kind : uint8_t { Input, Scalar, Temp, Output } kind;
  DType dtype;
  int64_t numel;
  int input = -1;   // Input/Scalar: graph input index
};

struct Plan {
  PrimGraph prims;                   // after decomposition and simplification
  std::vector<BufferSpec> buffers;
  std::vector<loop::Kernel> kernels; // run in order
  std::vector<int> output_buffers;   // per graph root: the buffer holding its value
  std::vector<Shape> output_shapes;  // per graph root
  std::string grouping;              // human-readable kernel grouping (LT_DEBUG=2)
};

}  // namespace lt
