// Which library GEMMs of a plan are likely to start while a collective's kernels hold some of the
// GPU's SMs, and are cheaper planned for fewer SMs than left waiting for them.
//
// Why: NCCL runs an all_reduce as a kernel of one CTA per channel (24 on two H200s) that keeps its
// SMs until the whole transfer ends (~120 us for a 25 MB DDP bucket). cuBLAS's Hopper GEMMs are
// persistent: one CTA per SM, each looping over tiles, and a GEMM ends only when its last CTA has
// run. Launched while NCCL holds 24 SMs, the GEMM's CTAs for those SMs wait for NCCL's kernel to
// end, so a 40 us GEMM took 75-99 us: on the GPT-2 DDP step the first GEMM after each bucket's
// all_reduce (tests/gpu/profile_ddp.py --timeline, thirty-third and thirty-fifth sessions).
// Planned for the SMs NCCL leaves (cublasSetSmCountTarget), such a GEMM does not wait. Every GEMM
// planned that way costs more, so only those likely to start inside a collective's window are:
// the thirty-second session narrowed every GEMM between a collective and its join (most of the
// backward pass) and was slower overall.
//
// The plan's steps run in order on one stream; collectives run in order on another, each starting
// once the steps before it are done and the previous collective has ended. A rough duration model
// (bytes over memory bandwidth, FLOPs over tensor-core rate, bytes over link bandwidth) places
// every step on that timeline. A GEMM that starts while a collective runs is narrowed when the cost
// of narrowing it (its duration x carved / (SMs - carved)) is below what waiting would cost (the
// collective's remaining time), so a long GEMM (the 0.7 ms LM-head weight gradient) keeps every SM.
// The GEMM issued right after a collective counts as starting with it and is narrowed, so NCCL's
// CTAs start at once: a variant that left it whole (NCCL's kernel then starts as it ends, as the
// timelines show without narrowing) measured no faster than no narrowing at all, this one ~0.25
// ms a step faster on average (bench/README.md, thirty-fifth session).
// Deterministic; reads only the plan, so every rank narrows the same GEMMs.
#pragma once
#include <vector>

namespace lt {

struct Plan;
struct PlanStep;

// The device's rates for the duration model, in bytes or FLOPs per microsecond, and the SMs a
// collective holds. Defaults: what an H200 reaches (elementwise kernels ~3.3 TB/s, bf16 GEMMs ~600
// TFLOP/s, the flash-attention kernels ~200, NCCL's ring all_reduce ~200 GB/s per rank over NVLink:
// a 26 MB bucket in 116-135 us). Only the ratios between them matter much.
struct OverlapRates {
  double memory_bytes_per_us = 3.3e6;
  double gemm16_flops_per_us = 6.0e8;  // float16/bfloat16 (and TF32) tensor-core products
  double gemm32_flops_per_us = 5.0e7;  // float32/float64 without TF32
  double attention_flops_per_us = 2.0e8;
  double link_bytes_per_us = 2.0e5;  // what one rank sends and receives at once
  double step_gap_us = 1.5;          // between two steps of the stream
  double collective_latency_us = 10;
  int sm_count = 132;
  int carved_sms = 24;  // the SMs a running collective holds
};

// Per step of `steps` (a plan's ordered steps): true for a library GEMM to plan for
// sm_count - carved_sms SMs (see above); false for every other step and when carved_sms is 0 or
// leaves no SM.
std::vector<bool> gemms_beside_collectives(const Plan& plan, const std::vector<PlanStep>& steps,
                                           const OverlapRates& rates);

// The model's estimate of one step's duration in microseconds (kernels, GEMMs, convolutions and
// attention on the compute stream; a collective on its own), without the gap between steps.
double estimated_step_us(const Plan& plan, const PlanStep& step, const OverlapRates& rates);

}  // namespace lt
