#include "backends/parallel_work.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace lt {

std::vector<size_t> balance_groups(const std::vector<size_t>& work, size_t groups) {
  std::vector<size_t> by_work(work.size()), group_of(work.size()),
      load(std::max<size_t>(groups, 1), 0);
  for (size_t i = 0; i < by_work.size(); ++i) by_work[i] = i;
  std::stable_sort(by_work.begin(), by_work.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  for (size_t i : by_work) {
    group_of[i] = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[group_of[i]] += work[i];
  }
  return group_of;
}

void run_in_parallel(size_t n, const std::function<void(size_t)>& f) {
  std::vector<std::exception_ptr> errors(n);
  auto guarded = [&](size_t i) {
    try {
      f(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (size_t i = 1; i < n; ++i) workers.emplace_back(guarded, i);
  if (n > 0) guarded(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace lt
