// Splitting a compile across threads, shared by the CPU backend (LLVM modules) and the CUDA
// backend (NVRTC programs): items of known weight are balanced over groups, and the groups run
// on threads with their exceptions carried back to the caller.
#pragma once
#include <cstddef>
#include <functional>
#include <vector>

namespace lt {

// The group of each item: items taken largest first, each to the least loaded of `groups`
// groups (ties: the lower index). `groups` >= 1.
std::vector<size_t> balance_groups(const std::vector<size_t>& work, size_t groups);

// Runs f(0), ..., f(n - 1): f(0) on the calling thread, the others on threads of their own. When
// all have returned, rethrows the exception of the lowest index that threw, if any.
void run_in_parallel(size_t n, const std::function<void(size_t)>& f);

}  // namespace lt
