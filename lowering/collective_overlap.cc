#include "lowering/collective_overlap.h"

#include <algorithm>
#include <utility>

#include "lowering/plan.h"

namespace lt {

namespace {

double bytes_of(const Plan& plan, int b) {
  if (b < 0 || b >= static_cast<int>(plan.buffers.size())) return 0;
  const BufferSpec& s = plan.buffers[static_cast<size_t>(b)];
  return static_cast<double>(s.numel) * static_cast<double>(dtype_size(s.dtype));
}

bool sixteen_bit(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

// A collective's bytes through one rank's link: a ring all_reduce sends (and receives) 2(n-1)/n of
// the value, an all_gather the n-1 other ranks' parts, a broadcast the value once; on one rank it
// is a copy in memory.
double collective_us(const CollectiveStep& c, const OverlapRates& r) {
  const double bytes = static_cast<double>(c.count) * static_cast<double>(dtype_size(c.dtype));
  const double n = std::max(1, c.world);
  if (n == 1) return r.collective_latency_us + 2 * bytes / r.memory_bytes_per_us;
  double sent = bytes;
  if (c.op == Op::AllReduce) sent = 2 * (n - 1) / n * bytes;
  if (c.op == Op::AllGather) sent = (n - 1) * bytes;
  return r.collective_latency_us + sent / r.link_bytes_per_us;
}

}  // namespace

double estimated_step_us(const Plan& plan, const PlanStep& step, const OverlapRates& r) {
  const size_t i = static_cast<size_t>(step.index);
  switch (step.kind) {
    case PlanStep::Kind::Gemm: {
      const Gemm& g = plan.gemms.at(i);
      const double batch = static_cast<double>(g.batch_count());
      const double m = static_cast<double>(g.M), n = static_cast<double>(g.N),
                   k = static_cast<double>(g.K);
      const double flops = 2 * m * n * k * batch;
      const double bytes =
          (m * k + k * n + m * n) * batch * static_cast<double>(dtype_size(g.dtype));
      const double rate = sixteen_bit(g.dtype) ? r.gemm16_flops_per_us : r.gemm32_flops_per_us;
      return std::max(flops / rate, bytes / r.memory_bytes_per_us);
    }
    case PlanStep::Kind::Attention: {
      const AttentionStep& a = plan.attentions.at(i);
      const double ls = static_cast<double>(a.L) * static_cast<double>(a.S);
      double flops = 2 * static_cast<double>(a.batch) * ls * static_cast<double>(a.E + a.Ev);
      if (a.causal) flops /= 2;
      if (a.kind == AttentionStep::Kind::Backward)
        flops *= 2.5;  // recomputes scores, three products
      double bytes = 0;
      for (int b : a.reads()) bytes += bytes_of(plan, b);
      for (int b : a.writes()) bytes += bytes_of(plan, b);
      return std::max(flops / r.attention_flops_per_us, bytes / r.memory_bytes_per_us);
    }
    case PlanStep::Kind::Conv: {
      const ConvStep& c = plan.convs.at(i);
      return (bytes_of(plan, c.a) + bytes_of(plan, c.b) + bytes_of(plan, c.out)) /
             r.memory_bytes_per_us;
    }
    case PlanStep::Kind::Collective:
      return collective_us(plan.collectives.at(i), r);
    case PlanStep::Kind::Kernel:
      break;
  }
  // A fused kernel is memory-bound: the bytes of every buffer it reads and writes (a concat
  // operand's own size, not its bucket's).
  double bytes = 0;
  for (const loop::Arg& a : plan.kernels.at(i).args) bytes += bytes_of(plan, a.buffer);
  return bytes / r.memory_bytes_per_us;
}

std::vector<bool> gemms_beside_collectives(const Plan& plan, const std::vector<PlanStep>& steps,
                                           const OverlapRates& r) {
  std::vector<bool> narrow(steps.size(), false);
  if (r.carved_sms <= 0 || r.carved_sms >= r.sm_count) return narrow;
  const double carved = static_cast<double>(r.carved_sms) / r.sm_count;  // of the GPU's SMs
  double t = 0;          // when the compute stream reaches the step
  double link_free = 0;  // when the collective stream has finished what it was given
  std::vector<std::pair<double, double>> windows;  // each collective's start and end
  for (size_t s = 0; s < steps.size(); ++s) {
    const PlanStep& st = steps[s];
    if (st.kind == PlanStep::Kind::Collective) {
      const CollectiveStep& c = plan.collectives.at(static_cast<size_t>(st.index));
      if (c.count == 0) continue;  // skipped
      // Over one rank NCCL copies in memory with a kernel of its own (no channels holding SMs
      // while waiting on a link), a few microseconds a bucket: a GEMM loses more on fewer SMs
      // (DDP over one H200: +0.17 ms of GEMM time a step, thirty-sixth session).
      if (c.world <= 1) continue;
      const double start = std::max(t, link_free);
      link_free = start + estimated_step_us(plan, st, r);
      windows.emplace_back(start, link_free);
      continue;
    }
    double us = estimated_step_us(plan, st, r);
    double left = 0;  // how long the collective running at t still holds its SMs
    for (auto w = windows.rbegin(); w != windows.rend() && left == 0; ++w)
      if (t >= w->first && t < w->second) left = w->second - t;
    if (left > 0) {
      if (st.kind == PlanStep::Kind::Gemm && us * carved / (1 - carved) < left) {
        narrow[s] = true;
        us /= 1 - carved;  // all of it on the SMs the collective leaves
      } else if (st.kind == PlanStep::Kind::Gemm) {
        us = std::max(us, left);  // its CTAs on the collective's SMs start when it ends
      } else {
        us /= 1 - carved;  // blocks spread over the SMs left, as they free up
      }
    }
    t += us + r.step_gap_us;
  }
  return narrow;
}

}  // namespace lt
