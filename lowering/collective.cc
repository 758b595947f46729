#include "lowering/collective.h"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

#include "ir/error.h"
#include "lowering/plan.h"

namespace lt {

void validate_collective(const CollectiveStep& c, int64_t in_numel, int64_t out_numel,
                         const char* where) {
  if (c.op != Op::AllReduce && c.op != Op::Broadcast && c.op != Op::AllGather)
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " has op ", op_name(c.op));
  if (c.world < 1 || c.group < 0 || (c.op != Op::AllReduce && c.group != 0) ||
      (c.op == Op::AllReduce && (c.reduce < 0 || c.reduce > 2)) ||
      (c.op == Op::Broadcast && (c.root < 0 || c.root >= c.world)))
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " has reduce ", c.reduce, ", root ",
         c.root, ", call group ", c.group, " in a group of ", c.world);
  const int64_t want_out = c.op == Op::AllGather ? c.count * c.world : c.count;
  if (c.count < 0 || in_numel != c.count || out_numel != want_out)
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " of ", c.count,
         " elements a rank has buffers of ", in_numel, " and ", out_numel, " elements");
}

CollectiveStep collective_step_of(Op op, DType t, const Attrs& a, int64_t count) {
  CollectiveStep c;
  c.op = op;
  c.dtype = t;
  c.world = static_cast<int>(a.ints.at(1));
  if (op == Op::AllReduce) c.reduce = static_cast<int>(a.ints.at(0));
  if (op == Op::AllReduce && a.ints.size() > 2) c.group = static_cast<int>(a.ints[2]);
  if (op == Op::Broadcast) c.root = static_cast<int>(a.ints.at(0));
  c.count = count;
  return c;
}

bool same_engine_call(const CollectiveStep& a, const CollectiveStep& b) {
  return a.op == Op::AllReduce && b.op == Op::AllReduce && a.group > 0 && a.group == b.group &&
         a.dtype == b.dtype && a.reduce == b.reduce;
}

namespace {

// The call group of a collective step (0: none, or not a collective).
int group_of(const Plan& plan, const PlanStep& st) {
  return st.kind == PlanStep::Kind::Collective
             ? plan.collectives[static_cast<size_t>(st.index)].group
             : 0;
}

}  // namespace

void hoist_collectives(Plan& plan) {
  if (plan.collectives.empty() || plan.steps.empty()) return;
  const int ns = static_cast<int>(plan.steps.size());
  const int nb = static_cast<int>(plan.buffers.size());
  std::vector<std::vector<int>> reads(ns), writes(ns);
  std::vector<int> writer(nb, -1), writers(nb, 0);
  for (int s = 0; s < ns; ++s) {
    step_buffers(plan, plan.steps[s], reads[s], writes[s]);
    for (int b : writes[s])
      if (b >= 0 && b < nb) writer[b] = s, ++writers[b];
  }
  // Whether step w is the only one writing what it writes (a concat's result has one writer per
  // operand: moving the last of them alone would leave the others behind the collective).
  auto sole_writer = [&](int w) {
    for (int b : writes[w])
      if (b >= 0 && b < nb && writers[b] > 1) return false;
    return true;
  };
  // The latest writer among the buffers `s` reads (-1: only graph inputs).
  auto ready_after = [&](int s) {
    int after = -1;
    for (int b : reads[s])
      if (b >= 0 && b < nb) after = std::max(after, writer[b]);
    return after;
  };
  // A call group's all_reduces (a DDP bucket) go together, after the latest of their operands.
  std::map<int, int> group_ready;
  for (int s = 0; s < ns; ++s)
    if (int g = group_of(plan, plan.steps[s]); g > 0)
      group_ready[g] = std::max(group_ready.count(g) ? group_ready[g] : -1, ready_after(s));
  std::vector<int> target(ns, -2);  // -2: stays; else the step it now follows (-1: the front)
  for (int s = 0; s < ns; ++s) {
    if (plan.steps[s].kind != PlanStep::Kind::Collective) continue;
    if (int g = group_of(plan, plan.steps[s]); g > 0 && group_ready[g] < s) {
      target[s] = group_ready[g];  // never later than where it was traced
      continue;
    }
    const int w = ready_after(s);
    // The operand's own kernel (a bucket's concatenation) comes along, to right after what it
    // reads (its outputs are new values: nothing earlier reads them).
    if (w >= 0 && plan.steps[w].kind == PlanStep::Kind::Kernel && target[w] == -2 &&
        sole_writer(w)) {
      const int kw = ready_after(w);
      if (kw < w - 1) target[w] = kw;
    }
    if (w < s - 1 || (w >= 0 && target[w] != -2)) target[s] = w;
  }
  std::vector<std::vector<int>> due(ns + 1);  // due[t + 1]: the steps that now follow step t
  for (int s = 0; s < ns; ++s)
    if (target[s] != -2) due[target[s] + 1].push_back(s);
  std::vector<PlanStep> order;
  order.reserve(plan.steps.size());
  std::vector<char> placed(ns, 0);
  std::function<void(int)> place_due = [&](int t) {
    for (int m : due[t + 1]) {
      if (placed[m]) continue;
      placed[m] = 1;
      order.push_back(plan.steps[m]);
      place_due(m);
    }
  };
  place_due(-1);
  for (int s = 0; s < ns; ++s) {
    if (target[s] == -2 && !placed[s]) {
      placed[s] = 1;
      order.push_back(plan.steps[s]);
    }
    if (placed[s]) place_due(s);
  }
  plan.steps = std::move(order);
}

namespace {

// order_by_collectives' list schedule; nullopt when the dependencies have a cycle (whole_groups:
// a call group member waiting on a writer that needs a collective after it).
std::optional<std::vector<PlanStep>> collective_order(const Plan& plan, bool whole_groups) {
  const int ns = static_cast<int>(plan.steps.size());
  const int nb = static_cast<int>(plan.buffers.size());
  // Dependencies in the current order: read after write, write after read or write, and each
  // collective after the previous one (every rank keeps one collective order).
  std::vector<std::vector<int>> next(ns);
  std::vector<int> waiting(ns, 0), level(ns, -1), last_writer(nb, -1);
  std::vector<std::vector<int>> readers(nb);
  std::vector<int> reads, writes, deps;
  int last_collective = -1, collectives = 0;
  // The writers of each call group's operands: every member waits for all of them, so the group
  // stays adjacent (one engine call). Members traced apart (a DDP bucket's all_reduces come in
  // the order of the graph's outputs, each after its own gradient) wait for writers traced after
  // them too (whole_groups), when the group's members follow one another among the collectives.
  std::map<int, std::vector<int>> group_writers;
  // Groups that wait only for the writers traced before each member: those with another
  // collective between two of their members (or all, without whole_groups).
  std::set<int> split;
  {
    std::vector<int> writer(nb, -1);
    std::map<int, int> members_seen;
    int prev_group = 0;
    for (int s = 0; s < ns; ++s) {
      step_buffers(plan, plan.steps[s], reads, writes);
      if (plan.steps[s].kind == PlanStep::Kind::Collective) {
        const int g = group_of(plan, plan.steps[s]);
        if (g > 0 && members_seen[g]++ > 0 && prev_group != g) split.insert(g);
        prev_group = g;
      }
      if (int g = group_of(plan, plan.steps[s]); g > 0)
        for (int b : reads)
          if (b >= 0 && b < nb && writer[b] >= 0) group_writers[g].push_back(writer[b]);
      for (int b : writes)
        if (b >= 0 && b < nb) writer[b] = s;
    }
    if (!whole_groups)
      for (const auto& [g, ws] : group_writers) split.insert(g);
  }
  for (int s = 0; s < ns; ++s) {
    const bool collective = plan.steps[s].kind == PlanStep::Kind::Collective;
    step_buffers(plan, plan.steps[s], reads, writes);
    deps.clear();
    for (int b : reads)
      if (b >= 0 && b < nb && last_writer[b] >= 0) deps.push_back(last_writer[b]);
    for (int b : writes)
      if (b >= 0 && b < nb) {
        if (last_writer[b] >= 0) deps.push_back(last_writer[b]);
        deps.insert(deps.end(), readers[b].begin(), readers[b].end());
      }
    if (collective && last_collective >= 0) deps.push_back(last_collective);
    if (int g = group_of(plan, plan.steps[s]); g > 0)
      for (int w : group_writers[g])
        if (w < s || !split.count(g)) deps.push_back(w);
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (int d : deps) {
      if (d == s) continue;
      next[d].push_back(s);
      ++waiting[s];
      level[s] = std::max(level[s], level[d]);
    }
    if (collective) level[s] = collectives++, last_collective = s;
    for (int b : reads)
      if (b >= 0 && b < nb) readers[b].push_back(s);
    for (int b : writes)
      if (b >= 0 && b < nb) last_writer[b] = s, readers[b].clear();
  }
  // Ready steps by (priority, position): collectives at once; then the steps that wait on no
  // collective, in order; then those that do, by the last collective they wait on.
  using Key = std::tuple<int, int>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  auto priority = [&](int s) {
    return plan.steps[s].kind == PlanStep::Kind::Collective ? -2 : level[s];
  };
  for (int s = 0; s < ns; ++s)
    if (waiting[s] == 0) ready.emplace(priority(s), s);
  std::vector<PlanStep> order;
  order.reserve(plan.steps.size());
  while (!ready.empty()) {
    const int s = std::get<1>(ready.top());
    ready.pop();
    order.push_back(plan.steps[s]);
    for (int n : next[s])
      if (--waiting[n] == 0) ready.emplace(priority(n), n);
  }
  if (static_cast<int>(order.size()) != ns) return std::nullopt;
  return order;
}

}  // namespace

void order_by_collectives(Plan& plan) {
  if (plan.collectives.empty() || plan.steps.empty()) return;
  std::optional<std::vector<PlanStep>> order = collective_order(plan, true);
  if (!order) order = collective_order(plan, false);  // a group that cannot be whole
  if (!order)
    fail(ErrorKind::Runtime, "internal: ordering ", plan.steps.size(),
         " steps by their collectives found a cycle");
  plan.steps = std::move(*order);
}

}  // namespace lt
