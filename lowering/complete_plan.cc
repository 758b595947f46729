#include "lowering/complete_plan.h"

#include <map>
#include <string>

#include "lowering/kernel_code.h"
#include "lowering/memory_plan.h"

namespace lt {

DistinctKernels distinct_kernels(const std::vector<loop::Kernel>& kernels) {
  DistinctKernels d;
  std::map<std::string, size_t> by_code;
  for (size_t i = 0; i < kernels.size(); ++i) {
    auto [it, fresh] = by_code.emplace(kernel_code(kernels[i]), d.first.size());
    if (fresh) d.first.push_back(i);
    d.code_of.push_back(it->second);
  }
  return d;
}

void complete_plan(Plan& plan) {
  plan.memory = plan_memory(plan);
  plan.distinct = distinct_kernels(plan.kernels);
}

}  // namespace lt
