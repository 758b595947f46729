// What fusion (lowering/fuse.cc) knows and decides about one prim node: the state its phases share
// with the library matchers (lowering/library_match.h) and the kernel builder. Internal to
// lowering.
#pragma once
#include <vector>

namespace lt::fusion {

struct FusionNode {
  int users = 0;          // how many prims read it
  bool realized = false;  // has a buffer of its own; else every reader computes it inline
  int library = -1;       // the library step (index of its LibraryMatch) writing it, or -1
  // Multi-output kernels (absorb_targets in fuse.cc): a realized reduction, or a realized
  // elementwise value, computed by the kernel rooted at absorbed_into instead of one of its own,
  // which also stores it when store_absorbed (always for an elementwise value: its point is one
  // of the host's). blocks_others: an earlier reduction was not absorbed into this one's kernel
  // because this one is absorbed.
  int absorbed_into = -1;
  bool store_absorbed = false;
  bool blocks_others = false;
  bool deep = false;  // realized to bound the inline depth: never computed inline again
  int buffer = -1;    // its plan buffer in the current pass (realized nodes), else -1
};

using FusionNodes = std::vector<FusionNode>;

}  // namespace lt::fusion
