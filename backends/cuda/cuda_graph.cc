#include "backends/cuda/cuda_graph.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/nccl_communicator.h"
#include "ir/debug_level.h"
#include "ir/env_switch.h"
#include "ir/error.h"

namespace lt {
namespace {

bool is_gemm(const CudaLaunchStep& s) { return s.gemm != nullptr; }

// Enqueues a library step on the stream; `staged`: a GEMM's pointer arrays already hold its
// addresses (a graph capture, cuda_graph.h).
void run_library_step(const CublasHandle* blas, const CudaLaunchStep& s, bool staged) {
  if (s.collective)  // the executable enqueues them itself (events, the watchdog)
    fail(ErrorKind::Runtime, "internal: collective step ", s.name, " in a plain launch");
  if (s.conv) {
    s.conv->run(s.a, s.b, s.bias, s.out, s.workspace, s.tf32);
    return;
  }
  if (!blas) fail(ErrorKind::Runtime, "internal: cuda gemm step without a cuBLAS handle");
  CublasPointerArrays arrays = s.arrays;
  arrays.staged = staged;
  blas->gemm(*s.gemm, s.a, s.b, s.out, arrays, s.tf32, s.sm_target);
}

// A kernel step as the driver's launch and node calls take it; `ptrs` keeps the slot pointers.
CUDA_KERNEL_NODE_PARAMS kernel_params(const CudaLaunchStep& s, std::vector<void*>* ptrs) {
  ptrs->resize(s.slots.size());
  for (size_t i = 0; i < s.slots.size(); ++i) (*ptrs)[i] = const_cast<uint64_t*>(&s.slots[i]);
  CUDA_KERNEL_NODE_PARAMS p;
  std::memset(&p, 0, sizeof p);
  p.func = s.fn;
  p.gridDimX = s.grid, p.gridDimY = 1, p.gridDimZ = 1;
  p.blockDimX = s.threads, p.blockDimY = 1, p.blockDimZ = 1;
  p.sharedMemBytes = s.smem;
  p.kernelParams = ptrs->data();
  return p;
}

}  // namespace

bool cuda_graphs_enabled() {
  const char* e = std::getenv("LT_CUDA_GRAPHS");
  if (e) {
    const std::string v = e;
    if (v == "0" || v == "off" || v == "OFF" || v == "false") return false;
  }
  return cuda_driver().graphs;
}

bool cuda_graph_segments() { return env_switch("LT_CUDA_GRAPH_SEGMENTS", "0", "1"); }

int cuda_gemm_sm_carveout() {
  return env_int("LT_CUDA_GEMM_SM_CARVEOUT", 0, 1024, kDefaultGemmSmCarveout);
}

bool cuda_graphs_always() {
  const char* e = std::getenv("LT_CUDA_GRAPHS");
  return e && std::string(e) == "always";
}

void launch_cuda_steps(const CudaDevice& dev, const CublasHandle* blas,
                       std::span<const CudaLaunchStep> steps, RunStats* stats) {
  const CudaDriver& d = dev.driver();
  const bool timed = stats && stats->on_kernel;
  std::vector<void*> ptrs;
  for (const CudaLaunchStep& s : steps) {
    const auto t0 =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (s.is_library()) {
      run_library_step(blas, s, false);
    } else {
      const CUDA_KERNEL_NODE_PARAMS p = kernel_params(s, &ptrs);
      d.check(d.cuLaunchKernel(p.func, p.gridDimX, 1, 1, p.blockDimX, 1, 1, p.sharedMemBytes,
                               dev.stream(), p.kernelParams, nullptr),
              "cuLaunchKernel");
    }
    if (stats) ++stats->kernel_launches;
    if (timed)
      stats->on_kernel((is_gemm(s) ? "gemm "
                        : s.conv   ? "conv "
                                   : "") +
                           std::string(s.name) + " (launch)",
                       t0, std::chrono::steady_clock::now());
  }
}

CudaGraphReplay::CudaGraphReplay(std::shared_ptr<CudaDevice> dev,
                                 std::shared_ptr<const CublasHandle> blas)
    : dev_(std::move(dev)), blas_(std::move(blas)) {}

CudaGraphReplay::~CudaGraphReplay() {
  try {
    dev_->bind();
    reset();
  } catch (...) {  // at process exit the driver may already be gone
  }
}

void CudaGraphReplay::reset() {
  const CudaDriver& d = dev_->driver();
  // An executable graph still in flight is freed when it completes (cuGraphExecDestroy).
  if (exec_) d.cuGraphExecDestroy(exec_);
  if (graph_) d.cuGraphDestroy(graph_);
  for (CUgraph c : children_)
    if (c) d.cuGraphDestroy(c);
  exec_ = nullptr, graph_ = nullptr;
  node_priorities_ = false;
  children_.clear(), nodes_.clear(), last_.clear();
  for (NcclCommunicator* c : comms_) c->release_graph(this);
  comms_.clear();
}

void CudaGraphReplay::drop() {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    dev_->bind();
    reset();
  } catch (...) {  // the driver gone at exit: nothing left to free
  }
}

// The cuBLAS or cuDNN calls of one library step, captured from the stream into a graph of their
// own. Relaxed mode: the libraries may make calls that the stricter modes forbid during a capture.
CUgraph CudaGraphReplay::capture(const CudaLaunchStep& step) {
  const CudaDriver& d = dev_->driver();
  CUstream s = dev_->stream();
  d.check(d.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture");
  try {
    // A GEMM's address copy is issued before each graph launch, outside the graph.
    if (step.collective)
      step.comm->enqueue_captured(step.calls, s);
    else
      run_library_step(blas_.get(), step, true);
  } catch (...) {
    CUgraph junk = nullptr;
    d.cuStreamEndCapture(s, &junk);  // leaves capture mode whatever went wrong
    if (junk) d.cuGraphDestroy(junk);
    throw;
  }
  CUgraph g = nullptr;
  d.check(d.cuStreamEndCapture(s, &g), "cuStreamEndCapture");
  if (step.collective && step.comm->stream_priority() != 0) {
    try {
      prioritize(g, step.comm->stream_priority());
    } catch (...) {
      d.cuGraphDestroy(g);
      throw;
    }
  }
  return g;
}

// The captured NCCL kernels at the communicator's stream priority, as they run without a graph
// (the capture ran on the executable's stream, whose priority is the default). The graph is
// instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY for it to count.
void CudaGraphReplay::prioritize(CUgraph g, int priority) {
  const CudaDriver& d = dev_->driver();
  size_t n = 0;
  d.check(d.cuGraphGetNodes(g, nullptr, &n), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(n);
  d.check(d.cuGraphGetNodes(g, nodes.data(), &n), "cuGraphGetNodes");
  CUlaunchAttributeValue v{};
  v.priority = priority;
  for (CUgraphNode node : nodes) {
    CUgraphNodeType type{};
    d.check(d.cuGraphNodeGetType(node, &type), "cuGraphNodeGetType");
    if (type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    d.check(d.cuGraphKernelNodeSetAttribute(node, CU_LAUNCH_ATTRIBUTE_PRIORITY, &v),
            "cuGraphKernelNodeSetAttribute");
    node_priorities_ = true;
  }
}

void CudaGraphReplay::build(const std::vector<CudaLaunchStep>& steps) {
  const CudaDriver& d = dev_->driver();
  reset();
  d.check(d.cuGraphCreate(&graph_, 0), "cuGraphCreate");
  nodes_.assign(steps.size(), nullptr);
  children_.assign(steps.size(), nullptr);
  std::vector<void*> ptrs;
  // The chain in plan order, with collectives branching off it (CudaLaunchStep says how).
  CUgraphNode chain = nullptr, last_collective = nullptr;
  std::vector<CUgraphNode> deps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const CudaLaunchStep& s = steps[i];
    deps.clear();
    if (chain) deps.push_back(chain);
    if (s.collective && last_collective) deps.push_back(last_collective);
    for (uint32_t j : s.after)
      if (j < i && steps[j].collective) deps.push_back(nodes_[j]);
    if (s.collective && std::find(comms_.begin(), comms_.end(), s.comm) == comms_.end()) {
      s.comm->hold_graph(shared_from_this());  // before the capture: see hold_graph
      comms_.push_back(s.comm);
    }
    if (s.is_library()) {
      children_[i] = capture(s);
      d.check(
          d.cuGraphAddChildGraphNode(&nodes_[i], graph_, deps.data(), deps.size(), children_[i]),
          "cuGraphAddChildGraphNode");
    } else {
      const CUDA_KERNEL_NODE_PARAMS p = kernel_params(s, &ptrs);
      d.check(d.cuGraphAddKernelNode_v2(&nodes_[i], graph_, deps.data(), deps.size(), &p),
              "cuGraphAddKernelNode");
    }
    (s.collective ? last_collective : chain) = nodes_[i];
  }
  d.check(d.cuGraphInstantiateWithFlags(
              &exec_, graph_, node_priorities_ ? CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY : 0),
          "cuGraphInstantiate");
  last_ = steps;
}

bool CudaGraphReplay::matches(const std::vector<CudaLaunchStep>& steps) const {
  if (!exec_ || steps.size() != last_.size()) return false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const CudaLaunchStep &s = steps[i], &l = last_[i];
    if (s.gemm != l.gemm || s.conv != l.conv || s.collective != l.collective ||
        s.calls.size() != l.calls.size() || s.after != l.after || s.tf32 != l.tf32 ||
        s.sm_target != l.sm_target || s.fn != l.fn || s.grid != l.grid || s.threads != l.threads ||
        s.slots.size() != l.slots.size() || s.arrays.device != l.arrays.device)
      return false;
  }
  return true;
}

namespace {

// Whether two call lists make the same NCCL calls on the same memory.
bool same_calls(const std::vector<CollectiveCall>& a, const std::vector<CollectiveCall>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].step != b[i].step || a[i].in != b[i].in || a[i].out != b[i].out) return false;
  return true;
}

}  // namespace

bool CudaGraphReplay::update(const std::vector<CudaLaunchStep>& steps, int* recaptured) {
  const CudaDriver& d = dev_->driver();
  std::vector<void*> ptrs;
  for (size_t i = 0; i < steps.size(); ++i) {
    const CudaLaunchStep& s = steps[i];
    CudaLaunchStep& l = last_[i];
    if (!s.is_library()) {
      if (s.slots == l.slots) continue;
      const CUDA_KERNEL_NODE_PARAMS p = kernel_params(s, &ptrs);
      if (d.cuGraphExecKernelNodeSetParams_v2(exec_, nodes_[i], &p) != CUDA_SUCCESS) return false;
      l.slots = s.slots;
      continue;
    }
    // A pointer-array GEMM reads its addresses from its fixed device arrays: the node never
    // changes.
    if (s.arrays.device || (s.a == l.a && s.b == l.b && s.out == l.out && s.bias == l.bias &&
                            s.workspace == l.workspace && same_calls(s.calls, l.calls)))
      continue;
    if (debug_level() >= 2)  // which library steps keep recapturing, and why (the drop rule)
      std::fprintf(stderr, "lazytensor: cuda graph: recapture %.*s:%s%s%s%s%s\n",
                   static_cast<int>(s.name.size()), s.name.data(), s.a != l.a ? " a" : "",
                   s.b != l.b ? " b" : "", s.out != l.out ? " out" : "",
                   s.bias != l.bias ? " bias" : "", s.workspace != l.workspace ? " workspace" : "");
    CUgraph child = capture(s);
    if (d.cuGraphExecChildGraphNodeSetParams(exec_, nodes_[i], child) != CUDA_SUCCESS) {
      d.cuGraphDestroy(child);
      return false;  // e.g. cuBLAS picked other kernels: the caller instantiates afresh
    }
    if (children_[i]) d.cuGraphDestroy(children_[i]);
    children_[i] = child;
    ++*recaptured;
    l.a = s.a, l.b = s.b, l.out = s.out, l.bias = s.bias, l.workspace = s.workspace;
    l.calls = s.calls;
  }
  return true;
}

bool CudaGraphReplay::launch(const std::vector<CudaLaunchStep>& steps, int* recaptured) {
  std::lock_guard<std::mutex> lock(mu_);
  int captured = 0;
  if (recaptured) *recaptured = 0;
  if (failed_ || steps.empty()) return false;
  const CudaDriver& d = dev_->driver();
  try {
    if (!matches(steps) || !update(steps, &captured)) {
      captured = 0;
      build(steps);
    }
    if (recaptured) *recaptured = captured;
  } catch (const std::exception& e) {
    // Plain launches from now on; LT_DEBUG=1 says why (e.g. a library that cannot be captured).
    if (debug_level() >= 1)
      std::fprintf(stderr,
                   "lazytensor: cuda graph: building or updating failed, launching plainly "
                   "from now on: %s\n",
                   e.what());
    reset();
    failed_ = true;
    return false;
  }
  // The pointer arrays' copies go first, in stream order, outside the graph (a graph would keep
  // the host address, not the values).
  for (const CudaLaunchStep& s : steps)
    if (is_gemm(s) && s.arrays.device) blas_->stage(*s.gemm, s.a, s.b, s.out, s.arrays);
  if (d.cuGraphLaunch(exec_, dev_->stream()) != CUDA_SUCCESS) {
    if (debug_level() >= 1)
      std::fprintf(stderr, "lazytensor: cuda graph: cuGraphLaunch failed, launching plainly\n");
    reset();
    failed_ = true;
    return false;
  }
  return true;
}

}  // namespace lt
