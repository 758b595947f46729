// Two-stage reductions. A reduction with few outputs and a long reduced space (a loss summed over
// every element; a bias gradient summed down 4096 rows into 768 columns) gives a backend too few
// independent rows to spread over its threads: one CUDA block or one CPU thread walks millions of
// elements. Splitting the outermost run of reduced axes into [chunks, rest] makes it a reduction
// over `rest` with chunks x more outputs (the prologue fuses there), then a small reduction over
// the chunks (the epilogue fuses there). Runs between simplify and fuse; layouts are kept (a
// reshape only), so a column reduction stays a coalesced column reduction, now with more columns.
#pragma once
#include "lowering/plan.h"
#include "lowering/prim_graph.h"

namespace lt {

PrimGraph split_wide_reductions(const PrimGraph& g, const LowerOptions& opts = {});

}  // namespace lt
