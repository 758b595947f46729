// Which ops the reference interpreter has a rule for (its rule table is keyed by Op, in
// reference_ops.cc). The registry test asks this for every primitive.
#pragma once
#include "ir/ops.h"

namespace lt {

bool reference_supports(Op op);

}  // namespace lt
