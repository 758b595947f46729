#include "lowering/memory_plan.h"

#include <algorithm>
#include <limits>

#include "lowering/size_fields.h"

namespace lt {

MemoryPlan plan_memory(const Plan& plan) {
  const int nb = static_cast<int>(plan.buffers.size());
  MemoryPlan mp;
  mp.slot_of.assign(nb, -1);
  // Lifetime of each temporary in step numbers: [first touch, last touch].
  constexpr int kNever = std::numeric_limits<int>::max();
  std::vector<int> first(nb, kNever), last(nb, -1);
  auto touch = [&](int b, int step) {
    if (b < 0 || b >= nb) return;
    first[b] = std::min(first[b], step);
    last[b] = std::max(last[b], step);
  };
  std::vector<PlanStep> steps = plan.ordered_steps();
  const int n = static_cast<int>(steps.size());
  // A collective runs beside the steps after it (on NCCL's stream, on the collective worker) until
  // the first step that touches its operand or result waits for it (the executables' `after`
  // joins, by address). Its operand's slot is therefore in use until that step, not only at the
  // collective's own step: a later temporary placed in that slot would be a write the collective
  // may still be reading, and the executable, seeing the address, would make that step wait for
  // the collective and every step behind it with it. A DDP step's AdamW updates all queued behind
  // its last all_reduce (the 154 MB embedding gradient's) that way, because a bias-correction
  // scalar computed after the backward pass had taken the slot of that all_reduce's operand.
  std::vector<const CollectiveStep*> unjoined;
  std::vector<int> reads, writes;
  for (int s = 0; s < n; ++s) {
    step_buffers(plan, steps[s], reads, writes);
    for (int b : reads) touch(b, s);
    for (int b : writes) touch(b, s);
    std::erase_if(unjoined, [&](const CollectiveStep* c) {
      for (const auto* list : {&reads, &writes})
        for (int b : *list)
          if (b == c->out || b == c->in) {
            last[c->in] = std::max(last[c->in], s);
            return true;
          }
      return false;
    });
    if (steps[s].kind != PlanStep::Kind::Collective) continue;
    const CollectiveStep& c = plan.collectives.at(static_cast<size_t>(steps[s].index));
    if (c.in >= 0 && c.in < nb) unjoined.push_back(&c);
  }
  for (const CollectiveStep* c : unjoined)  // no step reads the result: the run's end waits
    last[c->in] = std::max(last[c->in], n);
  std::vector<int> temps;
  for (int b = 0; b < nb; ++b)
    if (plan.buffers[b].kind == BufferSpec::Kind::Temp && plan.buffers[b].alias < 0 && last[b] >= 0)
      temps.push_back(b);
  std::sort(temps.begin(), temps.end(),
            [&](int x, int y) { return first[x] != first[y] ? first[x] < first[y] : x < y; });
  std::vector<int> slot_free_after;  // per slot: the last step of its current occupant
  for (int b : temps) {
    const size_t bytes =
        static_cast<size_t>(plan.buffers[b].numel) * dtype_size(plan.buffers[b].dtype);
    mp.temp_bytes_unshared += bytes;
    // Best fit among slots free before this temporary's first step: the smallest that is big
    // enough, else the biggest (which grows); a new slot when none is free.
    int pick = -1;
    for (int s = 0; s < static_cast<int>(slot_free_after.size()); ++s) {
      if (slot_free_after[s] >= first[b]) continue;
      if (pick < 0) {
        pick = s;
        continue;
      }
      const bool fits = mp.slot_bytes[s] >= bytes, pick_fits = mp.slot_bytes[pick] >= bytes;
      if ((fits && (!pick_fits || mp.slot_bytes[s] < mp.slot_bytes[pick])) ||
          (!fits && !pick_fits && mp.slot_bytes[s] > mp.slot_bytes[pick]))
        pick = s;
    }
    if (pick < 0) {
      pick = static_cast<int>(mp.slot_bytes.size());
      mp.slot_bytes.push_back(0);
      slot_free_after.push_back(-1);
    }
    mp.slot_bytes[pick] = std::max(mp.slot_bytes[pick], bytes);
    slot_free_after[pick] = last[b];
    mp.slot_of[b] = pick;
  }
  for (size_t s : mp.slot_bytes) mp.temp_bytes_planned += s;
  return mp;
}

std::vector<size_t> slot_bytes_at(const Plan& plan, std::span<const int64_t> values) {
  std::vector<size_t> bytes(plan.memory.slot_bytes.size(), 0);
  for (size_t b = 0; b < plan.buffers.size() && b < plan.memory.slot_of.size(); ++b) {
    const int slot = plan.memory.slot_of[b];
    if (slot < 0) continue;
    const size_t need =
        static_cast<size_t>(numel_at(plan.buffers[b], values)) * dtype_size(plan.buffers[b].dtype);
    bytes[static_cast<size_t>(slot)] = std::max(bytes[static_cast<size_t>(slot)], need);
  }
  return bytes;
}

}  // namespace lt
