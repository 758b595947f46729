// dist_worker's DistributedDataParallel scenarios (dist_worker_ddp.cc), for distributed_test.cc.
#pragma once
#include <string>
#include <vector>

namespace lt_ddp_test {

// Runs scenario `name` with its arguments; returns the worker's exit code (0 passed, 1 a check
// failed), or -1 when `name` is none of these scenarios.
int run_ddp_scenario(const std::string& name, const std::vector<std::string>& args);

}  // namespace lt_ddp_test
