#include "lowering/plan.h"

namespace lt {

void step_buffers(const Plan& plan, const PlanStep& st, std::vector<int>& reads,
                  std::vector<int>& writes) {
  reads.clear(), writes.clear();
  if (st.kind == PlanStep::Kind::Gemm) {
    const Gemm& g = plan.gemms.at(st.index);
    reads = {g.a, g.b}, writes = {g.out};
  } else if (st.kind == PlanStep::Kind::Conv) {
    const ConvStep& c = plan.convs.at(st.index);
    reads = {c.a, c.b, c.bias}, writes = {c.out};
  } else if (st.kind == PlanStep::Kind::Attention) {
    const AttentionStep& a = plan.attentions.at(st.index);
    reads = a.reads(), writes = a.writes();
  } else if (st.kind == PlanStep::Kind::Collective) {
    const CollectiveStep& c = plan.collectives.at(st.index);
    reads = {c.in}, writes = {c.out};
  } else {
    for (const loop::Arg& a : plan.kernels.at(st.index).args)
      (a.output ? writes : reads).push_back(a.buffer);
  }
  // A buffer inside another (a concat operand) is that buffer's memory: lifetimes, the order of
  // steps and the joins with collectives in flight all follow the memory.
  for (auto* list : {&reads, &writes})
    for (int& b : *list) b = memory_of(plan.buffers, b);
}

std::vector<std::vector<int>> step_touches(const Plan& plan, const std::vector<PlanStep>& steps) {
  std::vector<std::vector<int>> touches(steps.size());
  std::vector<int> reads, writes;
  for (size_t s = 0; s < steps.size(); ++s) {
    step_buffers(plan, steps[s], reads, writes);
    touches[s] = reads;
    touches[s].insert(touches[s].end(), writes.begin(), writes.end());
  }
  return touches;
}

}  // namespace lt
