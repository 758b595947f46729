// The CUDA backend's executable (cuda_backend.cc compiles and loads them): one plan's buffers,
// kernels, cuBLAS GEMMs, cuDNN convolutions, flash-attention steps and collectives, run on the
// device's stream with memory from the caching allocator, plainly or as a CUDA graph
// (cuda_graph.h); a symbolic plan keeps its library steps and graph per binding of its size
// symbols. Collectives run through the process group's communicator: NCCL on its own stream,
// overlapping the steps that do not touch their memory (launch_with_collectives), or, for a
// Gloo group, through host memory. Included by cuda_backend.cc and cuda_executable.cc (the run's
// larger members) alone: its own files because running a plan and being a backend (device,
// memory, compiling and caching) are separate jobs.
#pragma once
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/cuda_module_image.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/nccl_communicator.h"
#include "backends/host_collective.h"
#include "distributed/process_group.h"
#include "ir/debug_level.h"
#include "ir/error.h"
#include "lowering/collective.h"
#include "lowering/collective_overlap.h"
#include "lowering/memory_plan.h"
#include "lowering/plan.h"
#include "lowering/size_fields.h"

namespace lt {

// Static plans keep their temporaries' memory between runs unless LT_CUDA_KEEP_TEMPS=0 (read
// once): on the GPT-2 124M bf16 step (H200) CUDA graph replays went from 4 to 51 of 55 runs.
inline bool keep_temps() {
  static const bool on = [] {
    const char* e = std::getenv("LT_CUDA_KEEP_TEMPS");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

inline const CudaBuffer& as_cuda(const Buffer& b, const char* what) {
  auto* c = dynamic_cast<const CudaBuffer*>(&b);
  if (!c)
    fail(ErrorKind::Runtime, what, ": the buffer is ",
         b.on_host() ? "host memory" : "not CUDA device memory",
         ", not a buffer of the cuda backend");
  return *c;
}

// Bindings of a symbolic plan whose library steps and graphs an executable keeps; past this many
// it drops them all and starts afresh.
constexpr size_t kMaxBindings = 16;

// Whether this process's collectives run on NCCL (the default group's communicator), whose
// kernels hold SMs beside the compute stream's work.
inline bool collectives_run_on_nccl() {
  return dist::is_initialized() &&
         dynamic_cast<NcclCommunicator*>(dist::default_communicator().get()) != nullptr;
}

class CudaExecutable : public Executable {
 private:
  // Per gemm: device and host copies of its pointer arrays (cublas_gemm.h), when it needs them.
  struct GemmArrays {
    std::shared_ptr<CudaBuffer> device;
    std::vector<uint64_t> host;
  };
  // The library steps of one binding of the size symbols, at its sizes, and its CUDA graph: a
  // static plan has one (static_); a symbolic plan one per binding run (bound_), made on first
  // use. A captured graph holds one binding's grids, sizes and library calls, so each binding
  // warms up and captures its own (kCudaGraphWarmupRuns plain runs first); its GEMM steps are
  // the graph's keys (CudaLaunchStep::gemm), which is why a binding's steps and graph live and
  // go together.
  struct Bound {
    std::vector<int64_t> values;  // the size parameters' values (empty: static)
    std::vector<Gemm> gemms;
    std::vector<GemmArrays> gemm_arrays;
    std::vector<std::unique_ptr<CudnnConv>> convs;  // descriptors and algorithms
    std::vector<AttentionStep> attentions;
    int64_t runs = 0;  // from the (kCudaGraphWarmupRuns + 1)-th on, launches replay graph
    std::shared_ptr<CudaGraphReplay> graph;  // shared: communicators may drop it (hold_graph)
    // LT_CUDA_GRAPH_SEGMENTS: one graph per run of steps between collectives and joins
    // (launch_segments), in order.
    std::vector<std::shared_ptr<CudaGraphReplay>> segments;
    int slow_replays = 0;  // the graph's keep-or-drop rule (cuda_graph.h)
  };

 public:
  // `module` is compile_cuda_module(plan) of this process or of the one that wrote a cache entry;
  // either way the image is only loaded here.
  CudaExecutable(std::shared_ptr<CudaCachingAllocator> alloc, const Plan& plan,
                 CudaModuleImage module, std::shared_ptr<const CublasHandle> blas,
                 std::shared_ptr<const CudnnHandle> dnn)
      : alloc_(std::move(alloc)),
        dev_(alloc_->device()),
        buffers_(plan.buffers),
        kernels_(plan.kernels),
        gemms_(plan.gemms),
        attentions_(plan.attentions),
        conv_steps_(plan.convs),
        steps_(plan.ordered_steps()),
        blas_(std::move(blas)),
        dnn_(std::move(dnn)),
        donations_(plan.donations),
        memory_(plan.memory),
        module_image_(std::move(module)) {
    check_plan(plan, blas_ != nullptr, dnn_ != nullptr);
    keep_symbols(plan);
    if (!sym_.symbolic()) {
      // The static plan's library steps, bound once.
      static_.gemms = gemms_;
      static_.gemm_arrays.resize(gemms_.size());
      static_.attentions = attentions_;
      for (const ConvStep& c : plan.convs)
        static_.convs.push_back(std::make_unique<CudnnConv>(dnn_, c));
    }
    const size_t launches = kernels_.size() + flash_attention_launches(plan);
    if (module_image_.launches.size() != launches)
      fail(ErrorKind::Runtime, "internal: cuda module with ", module_image_.launches.size(),
           " launches for ", launches, " kernels");
    // A plan with collectives replays as a graph too (launch_with_collectives: each NCCL call a
    // child graph captured from the stream, a branch joined at the first step touching its memory).
    graphs_ = steps_.size() >= kCudaGraphMinSteps && cuda_graphs_enabled();
    collectives_ = plan.collectives;
    // What each step touches: a step waits for the collectives in flight on that memory.
    if (!collectives_.empty()) step_touches_ = step_touches(plan, steps_);
    // GEMMs likely to start while a collective holds some SMs plan for the SMs it leaves them
    // (lowering/collective_overlap.h): NCCL's collectives only (a Gloo group's go through host
    // memory and hold none).
    if (const int carveout =
            collectives_.empty() || !collectives_run_on_nccl() ? 0 : cuda_gemm_sm_carveout()) {
      OverlapRates rates;
      rates.sm_count = dev_->sm_count();
      rates.carved_sms = carveout;
      const std::vector<bool> narrow = gemms_beside_collectives(plan, steps_, rates);
      gemm_sm_targets_.assign(narrow.size(), 0);
      for (size_t s = 0; s < narrow.size(); ++s)
        if (narrow[s]) gemm_sm_targets_[s] = dev_->sm_count() - carveout;
    }
    if (launches == 0) return;
    const CudaDriver& d = dev_->driver();
    dev_->bind();
    if (module_image_.program_of.size() != launches)
      fail(ErrorKind::Runtime, "internal: cuda module with ", module_image_.program_of.size(),
           " program indices for ", launches, " kernels");
    try {
      for (const auto& image : module_image_.images) {
        CUmodule mod = nullptr;
        d.check(d.cuModuleLoadData(&mod, image.data()), "cuModuleLoadData");
        modules_.push_back(mod);
      }
      for (size_t k = 0; k < launches; ++k) {
        const uint32_t p = module_image_.program_of[k];
        if (p >= modules_.size())
          fail(ErrorKind::Runtime, "internal: cuda kernel ", k, " in program ", p, " of ",
               modules_.size());
        CUfunction f = nullptr;
        d.check(d.cuModuleGetFunction(&f, modules_[p], module_image_.launches[k].name.c_str()),
                "cuModuleGetFunction");
        functions_.push_back(f);
      }
      // The flash kernels use more than the default 48 KB of dynamic shared memory.
      if (launches > kernels_.size()) {
        for (size_t j = 0; j < kFlashKernelCount; ++j)
          d.check(d.cuFuncSetAttribute(functions_[kernels_.size() + j],
                                       CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       static_cast<int>(kFlashKernels[j].smem)),
                  "cuFuncSetAttribute");
      }
    } catch (...) {  // a cached image without a kernel it should have: no destructor will unload it
      for (CUmodule mod : modules_) d.cuModuleUnload(mod);
      modules_.clear();
      throw;
    }
  }

  // What every executable of `plan` needs, checked before anything is compiled or loaded.
  static void check_plan(const Plan& plan, bool have_blas, bool have_dnn) {
    if (!plan.is_completed())  // lowering's memory plan and kernel grouping (complete_plan)
      fail(ErrorKind::Runtime,
           "internal: cuda executable given a plan that complete_plan has not completed");
    for (const Gemm& g : plan.gemms) {
      for (int buf : {g.a, g.b, g.out})
        if (buf < 0 || buf >= static_cast<int>(plan.buffers.size()) ||
            plan.buffers[buf].dtype != g.dtype ||
            plan.buffers[buf].kind == BufferSpec::Kind::Scalar)
          fail(ErrorKind::Runtime, "internal: gemm ", g.name, " names bad buffer ", buf);
      validate_gemm(g, plan.buffers[g.a].numel, plan.buffers[g.b].numel, plan.buffers[g.out].numel,
                    "cuda executable");
    }
    for (const ConvStep& c : plan.convs) {
      auto bad = [&](int buf) {
        return buf < 0 || buf >= static_cast<int>(plan.buffers.size()) ||
               plan.buffers[buf].dtype != c.dtype ||
               plan.buffers[buf].kind == BufferSpec::Kind::Scalar;
      };
      for (int buf : {c.a, c.b, c.out})
        if (bad(buf))
          fail(ErrorKind::Runtime, "internal: conv ", c.name, " names bad buffer ", buf);
      if (c.bias >= 0 && bad(c.bias))
        fail(ErrorKind::Runtime, "internal: conv ", c.name, " names bad bias buffer ", c.bias);
      if (plan.buffers[c.out].kind == BufferSpec::Kind::Input)
        fail(ErrorKind::Runtime, "internal: conv ", c.name, " writes input buffer ", c.out);
      validate_conv(c, plan.buffers[c.a].numel, plan.buffers[c.b].numel,
                    c.bias >= 0 ? plan.buffers[c.bias].numel : 0, plan.buffers[c.out].numel,
                    "cuda executable");
    }
    // Lowering expands conv prims for a backend without cuDNN (lowering/expand_conv.h).
    if (!plan.convs.empty() && !have_dnn)
      fail(ErrorKind::NotImplemented, "not implemented: library convolution step ",
           plan.convs[0].name, " on cuda: ", cudnn_error());
    if (!plan.gemms.empty() && !have_blas)
      fail(ErrorKind::Runtime, "internal: cuda plan with gemms but no cuBLAS handle");
    std::vector<int64_t> numels;
    std::vector<DType> dtypes;
    for (const BufferSpec& b : plan.buffers) {
      numels.push_back(b.kind == BufferSpec::Kind::Scalar ? -1 : b.numel);
      dtypes.push_back(b.dtype);
    }
    for (const AttentionStep& a : plan.attentions) {
      validate_attention(a, numels, dtypes, "cuda executable");
      check_attention(a);
    }
    for (const CollectiveStep& c : plan.collectives) {
      for (int buf : {c.in, c.out})
        if (buf < 0 || buf >= static_cast<int>(plan.buffers.size()) ||
            plan.buffers[buf].kind == BufferSpec::Kind::Scalar)
          fail(ErrorKind::Runtime, "internal: collective ", c.name, " names bad buffer ", buf);
      validate_collective(c, plan.buffers[c.in].numel, plan.buffers[c.out].numel,
                          "cuda executable");
    }
    for (const PlanStep& st : plan.ordered_steps()) {
      const size_t count = st.kind == PlanStep::Kind::Gemm         ? plan.gemms.size()
                           : st.kind == PlanStep::Kind::Attention  ? plan.attentions.size()
                           : st.kind == PlanStep::Kind::Conv       ? plan.convs.size()
                           : st.kind == PlanStep::Kind::Collective ? plan.collectives.size()
                                                                   : plan.kernels.size();
      if (st.index < 0 || st.index >= static_cast<int>(count))
        fail(ErrorKind::Runtime, "internal: plan step names step ", st.index,
             " that does not exist");
    }
    for (const loop::Kernel& kern : plan.kernels)
      for (const loop::Arg& arg : kern.args) {
        if (arg.buffer < 0 || arg.buffer >= static_cast<int>(plan.buffers.size()))
          fail(ErrorKind::Runtime, "internal: kernel ", kern.name, " uses buffer ", arg.buffer,
               " of ", plan.buffers.size());
        if (!arg.scalar && plan.buffers[arg.buffer].kind == BufferSpec::Kind::Scalar)
          fail(ErrorKind::Runtime, "internal: kernel ", kern.name, " reads scalar buffer ",
               arg.buffer, " through a pointer");
      }
  }

  // What the flash kernels take (at each binding, for a symbolic attention step).
  static void check_attention(const AttentionStep& a) {
    if (!flash_attention_supports(a.dtype, a.E, a.Ev))
      fail(ErrorKind::NotImplemented, "not implemented: attention ", a.name, " in ",
           dtype_name(a.dtype), " with head dims ", a.E, " and ", a.Ev,
           " on cuda (float32, bfloat16 or float16 with 64 only)");
    if (flash_blocks(a.batch, std::max(a.L, a.S)) > INT32_MAX || a.L > INT32_MAX / 64 ||
        a.S > INT32_MAX / 64)
      fail(ErrorKind::NotImplemented, "not implemented: attention ", a.name, " of batch ", a.batch,
           ", L ", a.L, ", S ", a.S, " on cuda (too large for one grid)");
  }

  ~CudaExecutable() override {
    const CudaDriver& d = dev_->driver();
    if (!d.cuCtxSetCurrent || (modules_.empty() && !static_.graph && bound_.empty())) return;
    try {
      dev_->bind();
      d.cuStreamSynchronize(dev_->stream());  // its kernels may still be running
      static_.graph.reset();                  // its kernel nodes name the module's functions
      bound_.clear();
      for (CUmodule mod : modules_) d.cuModuleUnload(mod);
    } catch (...) {
    }
  }

  int num_kernels() const override {
    size_t n = kernels_.size() + gemms_.size() + conv_steps_.size();
    for (const AttentionStep& a : attentions_)
      n += a.kind == AttentionStep::Kind::Forward ? 1 : (a.dq >= 0) + (a.dk >= 0 || a.dv >= 0);
    return static_cast<int>(n);
  }
  std::vector<std::string> kernel_sources() const override { return {module_image_.source}; }
  const CudaModuleImage& module_image() const { return module_image_; }

  bool symbolic() const { return sym_.symbolic(); }

  std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) override {
    LT_CHECK(!sym_.symbolic(), ErrorKind::Value, "cuda executable: the plan has ", sym_.num_symbols,
             " size symbols; run it with their values (run_symbolic)");
    return run_with(inputs, stats, {});
  }

  std::vector<BufferPtr> run_symbolic(const std::vector<RunInput>& inputs, RunStats* stats,
                                      std::span<const int64_t> symbols) override {
    LT_CHECK(symbols.size() == static_cast<size_t>(sym_.num_symbols), ErrorKind::Value,
             "cuda executable: the plan has ", sym_.num_symbols, " size symbols, got ",
             symbols.size(), " values");
    if (!sym_.symbolic()) return run_with(inputs, stats, {});
    return run_with(inputs, stats, symbols);
  }

 private:
  // The run for symbol values `symbols` (empty for a static plan).
  std::vector<BufferPtr> run_with(const std::vector<RunInput>& inputs, RunStats* stats,
                                  std::span<const int64_t> symbols);

  // This run's steps in plan order with their addresses, scalar values and (symbolic) sizes.
  // Collective steps launch nothing here (launch_with_collectives runs them); `starts`, when
  // given, gets the index of each plan step's first launch, and the launches' count last.
  std::vector<CudaLaunchStep> resolve_steps(const std::vector<RunInput>& inputs,
                                            const std::vector<CUdeviceptr>& ptrs, Bound& bound,
                                            std::vector<size_t>* starts = nullptr);

  // Launches a plan's steps with its collectives (under launch_mu_). The first run checks that
  // every rank runs the same collectives. An NCCL collective runs after the steps before it, on
  // the communicator's stream (plain launches) or as a branch of the CUDA graph (replays); a
  // later step that touches its operand or result (temporaries sharing a slot share its address)
  // waits for it first, and the run's work ends after all of them, so outputs, freed temporaries
  // and the next run see them done. A Gloo group runs each collective through host memory, in
  // order.
  void launch_with_collectives(const std::vector<CudaLaunchStep>& launches,
                               const std::vector<size_t>& starts,
                               const std::vector<CUdeviceptr>& ptrs, Bound& bound, bool graph,
                               RunStats* stats);

  // `seq` (with_collectives') as runs of steps between a collective or a join and the next, the
  // NCCL calls enqueued on the communicator's stream between them and joined by events: each run
  // launched step by step (plain launches, capture false), or replayed as a linear graph of its own
  // (LT_CUDA_GRAPH_SEGMENTS=1), instead of as branches of one graph. The segments were meant to win
  // back the DDP step's gap before each kernel (0.2-0.5 us, none in the bare step); measured on 2
  // H200s it keeps those gaps and is no faster (23.72 against 23.43 ms a step): they follow the
  // process's NCCL communicator, not the graph's shape (tests/gpu/nccl_launch_gap.py). Off by
  // default.
  void launch_segments(const std::vector<CudaLaunchStep>& seq, Bound& bound, NcclCommunicator* nccl,
                       bool capture, RunStats* stats);

  // The run's launches with its NCCL collectives in plan order; each kernel or library launch
  // lists in `after` the collectives in flight whose memory its plan step touches (the first
  // launch of the step; a step with no launches passes them on to the next).
  std::vector<CudaLaunchStep> with_collectives(const std::vector<CudaLaunchStep>& launches,
                                               const std::vector<size_t>& starts,
                                               const std::vector<CUdeviceptr>& ptrs,
                                               NcclCommunicator* nccl) const;

  // A collective of device memory through a host-memory communicator (Gloo), synchronously.
  void host_collective(const CollectiveStep& c, CUdeviceptr in, CUdeviceptr out);

  // A cuDNN convolution step with its addresses; its algorithm for the current TF32 setting is
  // chosen on first use, and the executable's one workspace (steps run one after another on the
  // stream) grows to what it needs. Called under launch_mu_.
  CudaLaunchStep conv_launch(CudnnConv& conv, const std::vector<CUdeviceptr>& ptrs) {
    const ConvStep& c = conv.step();
    CudaLaunchStep s;
    s.name = c.name;
    s.conv = &conv;
    s.tf32 = conv_allow_tf32();  // a captured CUDA graph is rebuilt when the setting changes
    const size_t bytes = conv.prepare(s.tf32);
    if (bytes && (!workspace_ || workspace_->bytes() < bytes))
      workspace_ = std::make_shared<CudaBuffer>(alloc_, bytes);
    s.workspace = bytes ? workspace_->ptr() : 0;
    s.a = ptrs[c.a], s.b = ptrs[c.b], s.out = ptrs[c.out];
    s.bias = c.bias >= 0 ? ptrs[c.bias] : 0;
    return s;
  }

  // The flash kernel launches of one attention step (flash_attention.h): the forward, or the
  // backward's kernels for the wanted gradients. float32: dQ zeroed, then the dK/dV/dQ kernel;
  // 16-bit: the dK/dV kernel and the dQ kernel. Arguments as the kernels declare them
  // (flash_attention.cu), each in an 8-byte slot: pointers, then batch, L, S, causal, then the
  // scale times log2(e) and (backward) the scale.
  void add_attention_launches(const AttentionStep& a, const std::vector<CUdeviceptr>& ptrs,
                              std::vector<CudaLaunchStep>& out) const;

  std::shared_ptr<CudaCachingAllocator> alloc_;
  std::mutex last_addr_mu_;
  std::vector<CUdeviceptr> last_addr_;  // per buffer, its address in the last run (0: none)
  std::shared_ptr<CudaDevice> dev_;
  std::vector<BufferSpec> buffers_;
  std::vector<loop::Kernel> kernels_;
  std::vector<Gemm> gemms_;
  std::vector<AttentionStep> attentions_;
  std::vector<ConvStep> conv_steps_;
  std::vector<PlanStep> steps_;
  std::shared_ptr<const CublasHandle> blas_;
  std::shared_ptr<const CudnnHandle> dnn_;
  Bound static_;
  std::map<std::vector<int64_t>, std::unique_ptr<Bound>> bound_;  // keyed by the symbols' values
  // Symbolic sizes: the plan's symbols and parameters, and its buffers and memory plan (for
  // slot_bytes_at). Empty for a static plan.
  PlanSymbols sym_;
  Plan layout_;
  std::shared_ptr<CudaBuffer> workspace_;  // shared by the conv steps, kept with the executable
  std::mutex launch_mu_;
  std::vector<Donation> donations_;  // outputs a run may write into an input's memory
  MemoryPlan memory_;                // which temporaries share an allocation
  std::vector<std::shared_ptr<CudaBuffer>> kept_slots_;  // keep_temps() (run_with)
  std::vector<CollectiveStep> collectives_;
  std::vector<std::vector<int>> step_touches_;  // per step its buffers, when there are collectives
  // With a GEMM SM carveout: per step the SMs cuBLAS plans its GEMM for, > 0 for a GEMM likely to
  // start beside a collective (cuda_gemm_sm_carveout), 0 (all of them) otherwise.
  std::vector<int> gemm_sm_targets_;
  std::atomic<bool> collectives_checked_{false};  // the first run checks them across ranks
  std::string collectives_differ_;                // why they differ: every later run raises it
  CudaModuleImage module_image_;                  // kept for the disk cache (serialize)
  std::vector<CUmodule> modules_;                 // one per NVRTC program
  std::vector<CUfunction> functions_;
  // Whether launches may replay a binding's graph (Bound::graph), created after its warm-up runs
  // (never with LT_CUDA_GRAPHS=0, a driver without graphs, or fewer than kCudaGraphMinSteps steps).
  bool graphs_ = false;
  // LT_CUDA_GRAPH_SEGMENTS=1 (read when the executable is made): a plan with NCCL collectives
  // replays as linear graph segments (launch_segments), not as one graph with branches.
  const bool graph_segments_ = cuda_graph_segments();
  // The graph's keep-or-drop rule (cuda_graph.h): replays in a row that cost more than plain
  // launches would have.
  const bool graphs_always_ = cuda_graphs_always();

  void judge_replay(Bound& b, int recaptured, size_t steps) {
    const bool slow = static_cast<size_t>(recaptured) * kCudaGraphRecaptureCost > steps;
    b.slow_replays = slow ? b.slow_replays + 1 : 0;
    if (b.slow_replays < kCudaGraphSlowReplays) return;
    if (debug_level() >= 1)
      std::fprintf(stderr,
                   "lazytensor: cuda graph: dropped after %d replays in a row that recaptured "
                   "%d of %zu steps (LT_DEBUG=2 names them)\n",
                   kCudaGraphSlowReplays, recaptured, steps);
    graphs_ = false;  // plain launches from now on; the graph goes when its launches complete
    b.graph.reset();
    b.segments.clear();
  }

  // Keeps the plan's size symbols; checks that every size parameter a kernel launch, buffer or
  // library step names is one of the plan's (a static plan names none).
  void keep_symbols(const Plan& plan) {
    validate_size_params(plan);
    if (!plan.sym.symbolic()) return;
    sym_ = plan.sym;
    layout_.buffers = plan.buffers;
    layout_.memory = plan.memory;
    const int np = static_cast<int>(sym_.params.size());
    for (const auto& l : module_image_.launches)
      for (int p : l.size_params)
        LT_CHECK(p >= 0 && p < np, ErrorKind::Runtime, "internal: cuda kernel ", l.name,
                 " takes size parameter ", p, " of ", np);
  }

  // The library steps for this binding (made on first use, checked against this binding's
  // buffer sizes). Called under launch_mu_.
  Bound& bound_at(std::span<const int64_t> symbols, const std::vector<int64_t>& values,
                  const std::vector<int64_t>& numels);
};

}  // namespace lt
