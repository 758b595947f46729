// Where a plan's collectives start: beside light work (memory-bound kernels, attention) instead of
// beside the GEMMs that follow the moment their operand is ready.
//
// Why: hoist_collectives (lowering/collective.h) puts each collective right after the step that
// completes its operand, so on the GPT-2 DDP step every bucket's NCCL kernel starts just before a
// run of GEMMs. NCCL's CTAs slow exactly those: on two H200s (tests/gpu/profile_ddp.py, thirty-
// sixth session, one step aligned kernel by kernel with the bare step's) the 31 GEMMs that ran
// beside an NCCL kernel took 0.60 ms more than alone, while the 118 other kernels that ran beside
// one (layer-norm and bias reductions, casts, the flash-attention backward) took none more, and the
// flash-attention backward (~200 us a layer) is longer than a 25 MB bucket's all_reduce (~140 us).
// Starting each collective a little later, at the step where its estimated window holds the
// fewest GEMM microseconds, keeps NCCL beside the work it does not slow.
//
// The move only delays a collective's launch: it stays before every step that reads its result
// or writes its operand or result, collectives keep their order (every rank the same), adjacent
// collectives (a call group) move together, and no collective moves more than kMaxDelayUs of
// estimated compute past where it was ready. Durations come from lowering/collective_overlap.h's
// model. Deterministic: every rank's plan is the same.
//
// Off by default (LowerOptions::collectives_beside_light_work): LT_COLLECTIVE_PLACEMENT=light turns
// it on for the CUDA and CPU backends, until a GPU benchmark says it is faster. The model's rates
// are a GPU's; on the CPU it is a correctness check of the moves (a collective there runs on the
// collective worker, beside the same kernels wherever it starts).
#pragma once

namespace lt {

struct Plan;
struct OverlapRates;

inline constexpr double kMaxDelayUs = 1500;  // about one GPT-2 124M layer of backward on an H200
inline constexpr double kCostSlackUs = 5;    // GEMM time a later start must save to be chosen

void place_collectives_beside_light_work(Plan& plan, const OverlapRates& rates);

// LT_COLLECTIVE_PLACEMENT: `light` (true) or `ready` (false, also when unset); read once.
bool collectives_beside_light_work_from_env();

}  // namespace lt
