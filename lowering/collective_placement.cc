#include "lowering/collective_placement.h"

#include <algorithm>
#include <vector>

#include "ir/env_switch.h"
#include "lowering/collective_overlap.h"
#include "lowering/plan.h"

namespace lt {

namespace {

// Adjacent collective steps (a call group, or buckets ready at once): placed together, before
// the compute step `ready` (an index into the plan's other steps) at the earliest.
struct Unit {
  std::vector<PlanStep> members;
  size_t ready = 0;
  size_t limit = 0;  // the first compute step that must follow them
  double us = 0;     // the model's duration of all of them, one after another
};

}  // namespace

void place_collectives_beside_light_work(Plan& plan, const OverlapRates& rates) {
  if (plan.collectives.empty() || plan.steps.empty()) return;
  std::vector<PlanStep> compute;
  std::vector<Unit> units;
  bool prev_collective = false;
  for (const PlanStep& s : plan.steps) {
    if (s.kind != PlanStep::Kind::Collective) {
      compute.push_back(s);
      prev_collective = false;
      continue;
    }
    if (!prev_collective) units.push_back({{}, compute.size(), 0, 0});
    units.back().members.push_back(s);
    units.back().us += estimated_step_us(plan, s, rates);
    prev_collective = true;
  }
  const size_t n = compute.size();
  // Each unit's limit: the first compute step at or after it that reads what a member writes, or
  // writes what a member reads or writes.
  std::vector<int> reads, writes, c_reads, c_writes;
  for (Unit& u : units) {
    std::vector<int> in, out;
    for (const PlanStep& m : u.members) {
      step_buffers(plan, m, c_reads, c_writes);
      in.insert(in.end(), c_reads.begin(), c_reads.end());
      out.insert(out.end(), c_writes.begin(), c_writes.end());
    }
    auto has = [](const std::vector<int>& v, int b) {
      return b >= 0 && std::find(v.begin(), v.end(), b) != v.end();
    };
    u.limit = n;
    for (size_t i = u.ready; i < n && u.limit == n; ++i) {
      step_buffers(plan, compute[i], reads, writes);
      for (int b : reads)
        if (has(out, b)) u.limit = i;
      for (int b : writes)
        if (has(in, b) || has(out, b)) u.limit = i;
    }
  }
  // A later unit's limit bounds an earlier one too: collectives keep their order.
  for (size_t k = units.size(); k-- > 1;)
    units[k - 1].limit = std::min(units[k - 1].limit, units[k].limit);
  // The compute stream's timeline: start[i] of compute step i, and the GEMMs' intervals.
  std::vector<double> start(n + 1, 0);
  std::vector<std::pair<double, double>> gemms;
  for (size_t i = 0; i < n; ++i) {
    const double us = estimated_step_us(plan, compute[i], rates);
    if (compute[i].kind == PlanStep::Kind::Gemm) gemms.emplace_back(start[i], start[i] + us);
    start[i + 1] = start[i] + us + rates.step_gap_us;
  }
  auto gemm_us_within = [&](double from, double to) {
    double sum = 0;
    for (const auto& [s, e] : gemms) sum += std::max(0.0, std::min(e, to) - std::max(s, from));
    return sum;
  };
  std::vector<size_t> at(units.size());
  double link_free = 0;
  size_t lower = 0;
  for (size_t k = 0; k < units.size(); ++k) {
    Unit& u = units[k];
    const size_t lo = std::max(u.ready, lower);
    std::vector<double> cost;  // per candidate lo, lo + 1, ...: GEMM microseconds in its window
    for (size_t q = lo; q <= u.limit && q <= n && start[q] <= start[lo] + kMaxDelayUs; ++q) {
      const double from = std::max(start[q], link_free);
      cost.push_back(gemm_us_within(from, from + u.us));
    }
    // The earliest candidate within kCostSlackUs of the least: the model is rough, and moving for
    // less would only delay the collective.
    const double least = *std::min_element(cost.begin(), cost.end());
    size_t best = lo;
    while (cost[best - lo] > least + kCostSlackUs) ++best;
    at[k] = best;
    lower = best;
    link_free = std::max(start[best], link_free) + u.us;
  }
  std::vector<PlanStep> order;
  order.reserve(plan.steps.size());
  size_t k = 0;
  for (size_t i = 0; i <= n; ++i) {
    for (; k < units.size() && at[k] == i; ++k)
      order.insert(order.end(), units[k].members.begin(), units[k].members.end());
    if (i < n) order.push_back(compute[i]);
  }
  plan.steps = std::move(order);
}

bool collectives_beside_light_work_from_env() {
  static const bool on = env_switch("LT_COLLECTIVE_PLACEMENT", "ready", "light");
  return on;
}

}  // namespace lt
