// CUDA graphs (DESIGN.md): from the 4th run of one executable on, its launches go to the GPU as
// one CUgraphExec launch instead of one cuLaunchKernel / cuBLAS call per step, which saves the
// host and driver time of each launch. LT_CUDA_GRAPHS=0 disables them.
//
// Buffer addresses (inputs, and temporaries and outputs from the caching allocator) and scalar
// arguments (a learning rate, Adam's step) change between runs, so the graph is built once with
// one kernel node per kernel step, chained in plan order, and each run updates only the nodes
// whose arguments differ from the last launch (cuGraphExecKernelNodeSetParams, no new
// instantiation). A cuBLAS step is a child graph captured from the stream; a strided GEMM
// whose addresses changed is captured again and swapped in (cuGraphExecChildGraphNodeSetParams).
// A pointer-array GEMM reads its addresses from device memory that the executable owns, so its
// node never changes: the host-to-device copy of the addresses is issued on the stream before
// the graph launch, outside the graph. Anything that cannot be built or updated falls back to
// plain launches for that executable, never to a wrong result.
//
// Capturing a library step again costs far more host time than launching it (a stream capture
// and a child-graph swap per GEMM): a backward graph through torch.compile, whose saved
// activations and gradients are new buffers every step, recaptured nearly every GEMM (GPT-2:
// ~12 ms of host time per replay, 2 replays a step, for ~75 recaptures each: ~150 us apiece,
// where a plain launch costs a few us). So an executable stops using its graph after
// kCudaGraphSlowReplays replays in a row that each recaptured so many library steps that plain
// launches of all its steps would have cost less (a recapture counted as kCudaGraphRecaptureCost
// launches, a lower bound); LT_CUDA_GRAPHS=always keeps graphs regardless. A rule on counts, not
// on measured times, so it decides the same way on every run. Two things keep addresses still so
// that the rule rarely fires: an executable asks the caching allocator for its last run's output
// and temporary addresses (CudaCachingAllocator::allocate's `prefer`; torch.compile's saved
// activations and gradients then come back where they were: its ResNet-18 backward replays as a
// graph, 11.75 -> 7.22 ms a step on an H200), and the torch.compile bridge copies small inputs
// that torch allocates anew each call (a loss's gradient) into a buffer of its own
// (graph_program._Staging).
//
// Symbolic plans (issue 30): a graph bakes one binding's grids, size parameters and library calls,
// so an executable of a symbolic plan keeps one graph per binding of its size symbols, with that
// binding's library steps, each warming up on its own (kCudaGraphWarmupRuns plain runs, then
// replays); a binding that comes back replays its graph. At most 16 bindings are kept; the 17th
// drops them all (cuda_executable.h, kMaxBindings).
#pragma once
#include <cuda.h>

#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/nccl_communicator.h"
#include "lowering/collective.h"

namespace lt {

class NcclCommunicator;

// Runs of an executable launched plainly before its launches are replayed as a graph.
inline constexpr int kCudaGraphWarmupRuns = 3;
// Fewer launches than this gain nothing from a graph (an eager op is one kernel: its graph launch
// plus a node update would cost more than the launch), so they stay plain.
inline constexpr size_t kCudaGraphMinSteps = 2;

// Replays in a row that recaptured more library steps than 1 / kCudaGraphRecaptureCost of the
// steps, after which the executable launches plainly.
inline constexpr int kCudaGraphSlowReplays = 3;
inline constexpr size_t kCudaGraphRecaptureCost = 16;

// LT_CUDA_GRAPHS is not 0/off and the driver has every graph entry point (read at each call;
// executables read it when they are created).
bool cuda_graphs_enabled();
// LT_CUDA_GRAPH_SEGMENTS=1: a plan with NCCL collectives replays as linear graphs between its
// collectives (cuda_executable.h, launch_segments) instead of one graph whose collectives branch
// off the chain. 0 or unset: one graph. Anything else is an error naming the variable.
bool cuda_graph_segments();
// LT_CUDA_GRAPHS=always: graphs are kept even when their replays cost more host time than plain
// launches (tests of the update path).
bool cuda_graphs_always();

// LT_CUDA_GEMM_SM_CARVEOUT=n: the SMs a running NCCL collective holds, which the library GEMMs
// likely to start beside one leave to it (lowering/collective_overlap.h): cuBLAS plans such a GEMM
// for the device's SM count minus n (CublasHandle::gemm's sm_target), so its grid does not wait for
// NCCL's kernel to end. 0: off. Unset or empty: kDefaultGemmSmCarveout. Read when an executable is
// created; a value that is not a whole number from 0 to 1024 is an error naming the variable.
// The default, 24, is the CTAs NCCL runs on two NVLink H200s: against no carveout it measured
// -0.10, -0.31, -0.62 and +0.03 ms a step (32: -0.42, -0.26, +0.03, -0.17; 40 and 48 slower;
// bench/README.md, thirty-fifth session).
inline constexpr int kDefaultGemmSmCarveout = 24;
int cuda_gemm_sm_carveout();

// One step of a run with its arguments resolved: a kernel (fn set), a cuBLAS GEMM (gemm set), a
// cuDNN convolution (conv set) or an NCCL collective (collective set; `a` its operand, `out` its
// result). GEMMs, convolutions and collectives are library steps: a graph holds each as a child
// graph captured from the stream. In a graph, a step follows the kernel or library step before it
// (a chain in plan order), except that a collective branches off that chain (after the previous
// collective too: every rank must run them in one order) and joins it again at the steps that
// list it in `after`, so communication overlaps the steps between.
struct CudaLaunchStep {
  std::string_view name;  // for profiling
  CUfunction fn = nullptr;
  unsigned grid = 0, threads = 0;
  unsigned smem = 0;            // dynamic shared memory bytes (the flash attention kernels)
  std::vector<uint64_t> slots;  // one 8-byte slot per kernel parameter (pointer or scalar value)
  const Gemm* gemm = nullptr;
  const CudnnConv* conv = nullptr;
  // The library step may use TF32 (matmul_allow_tf32() for a GEMM, conv_allow_tf32() for a
  // convolution, when the step was made).
  bool tf32 = false;
  // A GEMM's SM target for cuBLAS (CublasHandle::gemm), > 0 when it runs beside a collective.
  int sm_target = 0;
  CUdeviceptr a = 0, b = 0, out = 0;
  CUdeviceptr bias = 0, workspace = 0;  // a convolution's (0 when it has none)
  CublasPointerArrays arrays;  // device memory fixed per executable, when the GEMM needs it
  const CollectiveStep* collective = nullptr;  // the first of `calls`
  std::vector<CollectiveCall> calls;  // a collective step's NCCL calls: several for a call group
  NcclCommunicator* comm = nullptr;   // the collective's
  std::vector<uint32_t> after;        // indices of earlier collective steps this step waits for

  bool is_library() const { return gemm || conv || collective; }
};

// Launches `steps` in order on the device's stream with cuLaunchKernel and cuBLAS (the plain path),
// counting them in stats->kernel_launches and timing each under profiling (stats->on_kernel).
void launch_cuda_steps(const CudaDevice& dev, const CublasHandle* blas,
                       std::span<const CudaLaunchStep> steps, RunStats* stats);

// One executable's CUDA graph. Thread-safe; the device's context must be current. Owned by a
// shared_ptr: a graph holding NCCL calls registers with their communicator (hold_graph).
class CudaGraphReplay : public std::enable_shared_from_this<CudaGraphReplay> {
 public:
  CudaGraphReplay(std::shared_ptr<CudaDevice> dev, std::shared_ptr<const CublasHandle> blas);
  ~CudaGraphReplay();
  CudaGraphReplay(const CudaGraphReplay&) = delete;
  CudaGraphReplay& operator=(const CudaGraphReplay&) = delete;

  // Enqueues `steps` as one graph launch: builds and instantiates the graph on first use (or when
  // the steps no longer match it), else updates the nodes whose arguments changed. Returns false
  // when the graph cannot be built, updated or launched: the caller then launches the steps
  // itself, and every later call returns false at once (the executable launches plainly from
  // then on). `recaptured`, when given, receives the library steps captured again for this
  // launch's update (0 when nothing changed or the graph was built afresh).
  bool launch(const std::vector<CudaLaunchStep>& steps, int* recaptured = nullptr);
  // Destroys the graph (a launch in flight completes first); the next launch builds it afresh.
  // A communicator calls it before it goes (NcclCommunicator::drop_graphs), from any thread.
  void drop();

 private:
  void build(const std::vector<CudaLaunchStep>& steps);
  bool update(const std::vector<CudaLaunchStep>& steps, int* recaptured);
  bool matches(const std::vector<CudaLaunchStep>& steps) const;
  CUgraph capture(const CudaLaunchStep& step);
  void prioritize(CUgraph g, int priority);
  void reset();

  std::shared_ptr<CudaDevice> dev_;
  std::shared_ptr<const CublasHandle> blas_;
  std::mutex mu_;
  bool failed_ = false;
  CUgraph graph_ = nullptr;  // kept: exec updates name its nodes
  CUgraphExec exec_ = nullptr;
  std::vector<CUgraphNode> nodes_;
  std::vector<CUgraph> children_;         // per GEMM step, the last graph captured for it
  bool node_priorities_ = false;          // a kernel node has its own priority (prioritize)
  std::vector<CudaLaunchStep> last_;      // arguments of the last launch, per step
  std::vector<NcclCommunicator*> comms_;  // those whose calls the graph holds (hold_graph)
};

}  // namespace lt
