#include "lowering/library_match.h"

namespace lt::fusion {

std::vector<LibraryMatch> match_library_steps(const PrimGraph& g, const LowerOptions& opts,
                                              FusionNodes& nodes) {
  std::vector<LibraryMatch> found;
  const MatchContext context{g, opts, nodes};
  for (const LibraryKind& kind : kLibraryKinds) {
    for (int i = 0; i < static_cast<int>(g.nodes.size()); ++i) {
      if (nodes[i].library >= 0) continue;  // written by an earlier match (attention's group)
      std::optional<LibraryMatch> m = kind.match(context, i);
      if (!m) continue;
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
  for (const LibraryKind& kind : kLibraryKinds)
    if (kind.kind == m.kind) return kind.emit(g, m, nodes, plan, grouping);
}

}  // namespace lt::fusion
