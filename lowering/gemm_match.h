// Recognizes the decomposed matmul (lowering/decompose.cc: a [.., M, N, K] product summed over K)
// whose operands a library GEMM can read from buffers with plain strides, through any reshape,
// permute, expand or slice on top of them. Fusion's GEMM matcher (match_gemm_step,
// lowering/library_match.h) is built on it.
#pragma once
#include <optional>
#include <vector>

#include "lowering/fusion_node.h"
#include "lowering/plan.h"

namespace lt {

struct GemmMatch {
  int reduce = -1;               // the ReduceSum node the GEMM computes
  int a_node = -1, b_node = -1;  // nodes whose (realized, contiguous) buffers hold A and B
  Gemm gemm;                     // everything but the buffers and the name
};

// `nodes[i].realized`: node i has its own contiguous buffer (views are not looked through past
// it). Nodes the match picks as operands may be unrealized: the caller realizes them.
std::optional<GemmMatch> match_gemm(const PrimGraph& g, int reduce,
                                    const fusion::FusionNodes& nodes);

}  // namespace lt
