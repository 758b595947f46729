#include "lowering/lower.h"

#include "lowering/channels_last.h"
#include "lowering/collective.h"
#include "lowering/collective_overlap.h"
#include "lowering/collective_placement.h"
#include "lowering/complete_plan.h"
#include "lowering/decompose.h"
#include "lowering/donation.h"
#include "lowering/fuse.h"
#include "lowering/output_views.h"
#include "lowering/simplify.h"
#include "lowering/split_reduce.h"

namespace lt {

Plan lower(const Graph& g, const LowerOptions& opts) {
  PrimGraph prims = simplify(decompose(g, opts));
  OutputViews views = opts.output_views ? take_output_views(prims) : OutputViews{};
  Plan plan = fuse(split_wide_reductions(std::move(prims), opts), opts);
  if (!views.offsets.empty()) {
    plan.output_shapes = std::move(views.shapes);  // fusion gave each view root its base's shape
    plan.output_offsets = std::move(views.offsets);
  }
  if (opts.conv_channels_last) choose_channels_last(plan);
  hoist_collectives(plan);
  order_by_collectives(plan);
  if (opts.collectives_beside_light_work) place_collectives_beside_light_work(plan, OverlapRates{});
  find_donations(plan);
  complete_plan(plan);
  return plan;
}

}  // namespace lt
