// The run-time half of buffer donation (lowering/donation.h finds the outputs that may update an
// input in place). A candidate is used only when nothing can see the input's memory after the
// run: its Storage is held by the graph's one leaf alone (no tensor, view, DLPack/NumPy export or
// second leaf holds it), the Buffer by that Storage alone and by the runtime (not a NumPy array's
// memory), and no node that reads the leaf is held outside this sync (a pending tensor left for a
// later sync, an index check, another thread's trace) that could be evaluated again later.
#pragma once
#include <vector>

#include "ir/graph.h"
#include "lowering/plan.h"

namespace lt {

// Which of a cached graph's candidates a run may use, as (output buffer, graph input) pairs.
struct DonationCandidate {
  int output;    // plan buffer (an Output)
  int input;     // graph input index
  size_t bytes;  // the output's size
};
std::vector<DonationCandidate> donation_candidates(const Plan& plan);

// What a sync knows of its roots: per root, its node's shared_ptr use count and how many of those
// references the caller drops once results are assigned (the tensors it re-points). Without this
// (empty vectors) nothing is donated.
struct RootRefs {
  std::vector<long> use_count;
  std::vector<int> released;
};

// Per graph input: the plan buffer written into its memory this run, or -1.
std::vector<int> choose_donations(const Graph& g, const std::vector<DonationCandidate>& candidates,
                                  const RootRefs& roots);

}  // namespace lt
