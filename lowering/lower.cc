#include "lowering/lower.h"

#include "lowering/decompose.h"
#include "lowering/fuse.h"
#include "lowering/simplify.h"

namespace lt {

Plan lower(const Graph& g, const LowerOptions& opts) { return fuse(simplify(decompose(g)), opts); }

}  // namespace lt
