// Channels-last convolution data: the layout pass for backends whose convolution library runs NHWC
// natively (LowerOptions::conv_channels_last). cuDNN's tensor-core engines on sm_80 and later are
// NHWC; handed NCHW operands it wraps every call in nchwToNhwc / nhwcToNchw transposes (1.3 of
// ResNet-18's 7.4 ms of GPU time a step on an H200). Inductor avoids them by running conv models
// channels-last; this pass does the same inside one plan:
//
// - each conv step whose data operands (x, y, their gradients) are all temporaries gets them NHWC;
// - a kernel that reads or writes such a buffer and another temporary of the same size at the
//   same index (an elementwise neighbour: batch norm, ReLU, the residual add, their gradients)
//   spreads NHWC to that buffer, to a fixed point, so the chain between convolutions stays in one
//   layout and every kernel reads what it writes in the same order;
// - a buffer stays NCHW when any step other than a kernel or a conv's data operand touches it,
//   when it is not a temporary (graph inputs and outputs are what users see), or when some kernel
//   reads it through an index that is not an affine walk over its N, C, H, W dims (a reshape that
//   merges H and W); a conv whose data operands cannot all be NHWC keeps them all NCHW.
//
// - the weights of those convs are read and written OHWI (cuDNN's NHWC filter format, which it
//   requires beside NHWC data in some shapes): a kernel copies each weight before its first
//   reader, and each weight gradient back to OIHW after its conv.
// Then every kernel access to an NHWC buffer is rewritten (same elements, NHWC offsets), and an
// elementwise kernel that stores an NHWC buffer iterates its outer space in that buffer's memory
// order, so its stores and loads stay coalesced. Reductions need nothing: batch norm's statistics
// over N, H, W of an NHWC buffer are column sums, which the code generators already tile.
// Kernels compute the same values: only addresses and iteration order move (the convolution
// library may pick other algorithms for NHWC operands). Opt-in (LT_CHANNELS_LAST=1): on the
// ResNet-18 row it removed cuDNN's transposes but was not yet faster (README).
#pragma once

#include "lowering/plan.h"

namespace lt {

// Rewrites `plan` (fused, before donation and completion) as above; appends a line per NHWC
// buffer set to plan.grouping. A plan without conv steps is left as it is.
void choose_channels_last(Plan& plan);

}  // namespace lt
