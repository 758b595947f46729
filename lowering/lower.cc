#include "lowering/lower.h"

#include "lowering/channels_last.h"
#include "lowering/collective.h"
#include "lowering/complete_plan.h"
#include "lowering/decompose.h"
#include "lowering/donation.h"
#include "lowering/fuse.h"
#include "lowering/simplify.h"
#include "lowering/split_reduce.h"

namespace lt {

Plan lower(const Graph& g, const LowerOptions& opts) {
  Plan plan = fuse(split_wide_reductions(simplify(decompose(g, opts)), opts), opts);
  if (opts.conv_channels_last) choose_channels_last(plan);
  hoist_collectives(plan);
  order_by_collectives(plan);
  find_donations(plan);
  complete_plan(plan);
  return plan;
}

}  // namespace lt
