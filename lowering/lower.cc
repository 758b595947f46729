#include "lowering/lower.h"

#include "lowering/decompose.h"
#include "lowering/fuse.h"

namespace lt {

Plan lower(const Graph& g) { return fuse(decompose(g)); }

}  // namespace lt
