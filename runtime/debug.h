// Debugging tools: readable IR of pending tensors, trace dumps with data, replay on any backend
// with output checks, and bisection to the first node whose value diverges from the reference.
#pragma once
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt::debug {

std::string ir_text(const std::vector<Tensor>& tensors);
std::string ir_dot(const std::vector<Tensor>& tensors);
// Generated kernel sources of the last executed graph.
std::vector<std::string> kernel_sources();

// Writes `path` (trace JSON) and, with data, `<stem>.inputs.bin` / `<stem>.outputs.bin` beside it.
// Computes the tensors (a sync) when data is requested. Returns the graph key.
std::string dump(const std::string& path, const std::vector<Tensor>& tensors, bool data = true);

struct ReplayReport {
  bool ok = true;        // every compared output within tolerance
  bool checked = false;  // recorded outputs were present and compared
  std::string backend;
  int outputs = 0;
  double max_abs_error = 0;  // over all compared outputs
  double max_rel_error = 0;
  std::string message;  // one line: what matched or what diverged
  std::vector<Tensor> results;
};
ReplayReport replay(const std::string& path, const std::string& backend, bool check,
                    double tol = 1e-5);

struct BisectReport {
  bool diverged = false;
  int node_id = -1;  // trace id of the first diverging node
  std::string op, shape, dtype, source, message;
  double max_abs_error = 0;
};
BisectReport bisect(const std::string& path, const std::string& backend, double tol = 1e-5);

}  // namespace lt::debug
