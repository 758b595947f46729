#include "lowering/library_match.h"

#include <iterator>

namespace lt::fusion {

std::vector<LibraryMatch> match_library_steps(const PrimGraph& g, const LowerOptions& opts,
                                              FusionNodes& nodes) {
  std::vector<LibraryMatch> found;
  const MatchContext context{g, opts, nodes};
  for (size_t t = 0; t < std::size(kLibraryKinds); ++t) {
    const LibraryKind& kind = kLibraryKinds[t];
    for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
      if (nodes[i].library >= 0) continue;  // written by an earlier match (attention's group)
      std::optional<LibraryMatch> m = kind.match(context, i);
      if (!m) continue;
      m->table = static_cast<int>(t);
      for (int c : m->operands) nodes[c].realized = true;
      for (int o : m->outputs) {
        nodes[o].realized = true;
        nodes[o].library = static_cast<int>(found.size());
      }
      found.push_back(std::move(*m));
    }
  }
  return found;
}

void emit_library_step(const PrimGraph& g, const LibraryMatch& m, const FusionNodes& nodes,
                       Plan& plan, std::ostream& grouping) {
  kLibraryKinds[static_cast<size_t>(m.table)].emit(g, m, nodes, plan, grouping);
}

}  // namespace lt::fusion
