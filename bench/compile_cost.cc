// Where a cold compile's time goes, per stage, for graphs given as trace dumps (LT_DUMP_DIR) or the
// built-in 1,000-node elementwise chain (bench_trace_cost's graph): lowering passes (decompose,
// simplify, split_wide_reductions, fuse, find_donations), then the CPU backend (LLVM optimization,
// LLVM code generation and linking, each the slowest compile thread's) and, where CUDA is built
// in, CUDA C generation and NVRTC (for sm_90; no GPU needed). Wall and process CPU time per stage
// (NVRTC worker processes' CPU is in the "nvrtc cpu" line, not the stage's).
//
//   bench_compile_cost [--repeat N] [--programs P] [--cuda-source FILE] [--no-inplace] [--no-cpu]
//   [--no-cuda] [--cuda-lowering] [--grouping] chain1000 | FILE.json ...
// (--programs 1: the whole plan in one NVRTC program, as before the split. --cuda-lowering: lower
// as the CUDA backend does, GEMMs for cuBLAS and attention for the flash kernels, which then
// compile beside the plan's programs as in CudaBackend::compile; implies --no-cpu.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/clocks.h"
#ifdef LT_HAVE_LLVM
#include "backends/cpu/cpu_executable.h"
#endif
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/node.h"
#include "ir/serialize.h"
#include "lowering/complete_plan.h"
#include "lowering/decompose.h"
#include "lowering/donation.h"
#include "lowering/fuse.h"
#include "lowering/simplify.h"
#include "lowering/split_reduce.h"
#ifdef LT_HAVE_CUDA
#include <future>

#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/nvrtc_worker.h"
#endif

namespace {

using Clock = lt::SteadyClock;

struct Timer {
  Clock::time_point t0 = Clock::now();
  double c0 = lt::process_cpu_seconds();
  // Prints "<what> wall ms (cpu ms)" and restarts.
  void lap(const char* what) {
    std::printf("  %-22s %8.1f ms wall %8.1f ms cpu\n", what, lt::seconds_since(t0) * 1e3,
                (lt::process_cpu_seconds() - c0) * 1e3);
    t0 = Clock::now();
    c0 = lt::process_cpu_seconds();
  }
};

struct NoData : lt::LeafData {};

struct Loaded {
  lt::NodeList roots;
  lt::Graph graph;
};

lt::Graph graph_of(const lt::NodeList& roots) {
  std::vector<const lt::Node*> r;
  for (auto& n : roots) r.push_back(n.get());
  return lt::collect_graph(r);
}

Loaded load(const std::string& what) {
  Loaded l;
  if (what == "chain1000") {
    lt::NodePtr y = lt::make_param(lt::DType::Float32, {64}, std::make_shared<NoData>());
    for (int i = 0; i < 500; ++i)
      y = lt::make_node(
          lt::Op::Add,
          {lt::make_node(lt::Op::Mul, {y, lt::make_scalar(lt::DType::Float32, 1.0001)}),
           lt::make_scalar(lt::DType::Float32, 0.5)});
    l.roots = {y};
  } else {
    std::ifstream f(what);
    if (!f) lt::fail(lt::ErrorKind::Value, "cannot read ", what);
    std::stringstream ss;
    ss << f.rdbuf();
    l.roots = lt::trace_from_json(ss.str(), [](const lt::TraceInput&) {
                return std::make_shared<NoData>();
              }).roots;
  }
  l.graph = graph_of(l.roots);
  return l;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 1;
  size_t programs = 0;          // NVRTC programs: 0 = the backend's choice
  std::string cuda_source_out;  // --cuda-source FILE: writes the generated CUDA C
  bool cpu = true, cuda = true, cuda_lowering = false, grouping = false;
  [[maybe_unused]] bool no_inplace = false;  // read by the CPU compile only (LLVM builds)
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc)
      repeat = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--programs") && i + 1 < argc)
      programs = std::strtoul(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--cuda-source") && i + 1 < argc)
      cuda_source_out = argv[++i];
    else if (!std::strcmp(argv[i], "--no-inplace"))
      no_inplace = true;
    else if (!std::strcmp(argv[i], "--no-cpu"))
      cpu = false;
    else if (!std::strcmp(argv[i], "--no-cuda"))
      cuda = false;
    else if (!std::strcmp(argv[i], "--cuda-lowering"))
      cuda_lowering = true, cpu = false;
    else if (!std::strcmp(argv[i], "--grouping"))
      grouping = true;
    else
      inputs.push_back(argv[i]);
  }
  try {
#ifdef LT_HAVE_CUDA
    lt::start_nvrtc_workers();  // as the CUDA backend does when it opens its device
#endif
    for (const auto& in : inputs) {
      Loaded l = load(in);
      lt::LowerOptions opts;
      if (cuda_lowering) {  // CudaBackend::lower_options (an sm_80+ GPU), cuBLAS, flash kernels
        opts.gemm_dtypes = {lt::DType::Float32, lt::DType::Float64, lt::DType::BFloat16,
                            lt::DType::Float16};
#ifdef LT_HAVE_CUDA
        opts.attention_dtypes = {lt::DType::Float32, lt::DType::BFloat16, lt::DType::Float16};
        opts.attention_head_dim = lt::kFlashTile;
#endif
        // As with cuDNN (the GPU machine's PyTorch ships it): convolutions are library steps.
        opts.conv_dtypes = opts.gemm_dtypes;
        // Library prims these options lack (conv prims: no cuDNN here) are expanded by
        // decompose, as on lazy:cuda.
        opts.split_for_many_threads = true;  // the CUDA backend's default
      } else {
        opts = lt::get_backend("cpu").lower_options();
      }
      for (int rep = 0; rep < repeat; ++rep) {
        std::printf("%s (%zu graph nodes), run %d\n", in.c_str(), l.graph.order.size(), rep + 1);
        Timer t, total;
        lt::PrimGraph p = lt::decompose(l.graph, opts);
        t.lap("decompose");
        p = lt::simplify(p);
        t.lap("simplify");
        p = lt::split_wide_reductions(p, opts);
        t.lap("split_wide_reductions");
        lt::Plan plan = lt::fuse(std::move(p), opts);
        t.lap("fuse");
        lt::find_donations(plan);
        t.lap("find_donations");
        lt::complete_plan(plan);  // as lower() does: the memory plan and the distinct kernels
        t.lap("complete_plan");
        if (grouping) std::printf("%s", plan.grouping.c_str());
        const lt::DistinctKernels& codes = plan.distinct;
        size_t inplace = 0;
        for (size_t f : codes.first) inplace += !plan.kernels[f].inplace.empty();
        std::printf(
            "  %zu kernels (%zu distinct, %zu of them with in-place pairs), %zu gemms, %zu convs\n",
            plan.kernels.size(), codes.first.size(), inplace, plan.gemms.size(), plan.convs.size());
        size_t outputs = 0;
        for (const auto& b : plan.buffers) outputs += b.kind == lt::BufferSpec::Kind::Output;
        std::printf("  %zu of %zu outputs may take an input's memory (donation candidates)\n",
                    plan.donations.size(), outputs);
#ifndef LT_HAVE_LLVM
        if (cpu) std::printf("  cpu compile: not built (LT_WITH_LLVM=OFF)\n");
#else
        if (cpu) {
          // --no-inplace: what the CPU compile would cost without the second (donated) bodies.
          if (no_inplace)
            for (auto& k : plan.kernels) k.inplace.clear();
          lt::cpu::CpuExecutable exe(plan);
          const auto& tm = exe.timings();
          std::printf("  llvm optimize %.1f ms, codegen %.1f ms (slowest thread), link %.1f ms\n",
                      tm.optimize_s * 1e3, tm.codegen_s * 1e3, tm.link_s * 1e3);
          t.lap("cpu compile");
        }
#endif
#ifdef LT_HAVE_CUDA
        if (cuda) {
          lt::CudaCompileTimings ct;
          // The flash kernels compile on threads of their own beside the plan's programs (only
          // the first time in a process: the second run shows a warm process).
          std::future<double> flash;
          if (lt::flash_attention_launches(plan))
            flash = std::async(std::launch::async, [] {
              const auto t0 = Clock::now();
              lt::flash_attention_images("sm_90", true);
              return lt::seconds_since(t0);
            });
          lt::CudaModuleImage m =
              lt::compile_cuda_module(plan, "sm_90", /*cubin=*/true, &ct, programs);
          if (flash.valid()) std::printf("  flash kernels %.1f ms wall\n", flash.get() * 1e3);
          if (!cuda_source_out.empty()) std::ofstream(cuda_source_out) << m.source;
          std::printf(
              "  cuda codegen %.1f ms, nvrtc %.1f ms (%d programs, %d in worker processes, "
              "slowest %.1f ms)\n",
              ct.codegen_s * 1e3, ct.nvrtc_s * 1e3, ct.programs, ct.worker_programs,
              ct.slowest_program_s * 1e3);
          double sum = 0, most = 0;
          std::printf("  nvrtc per program, ms wall/cpu:");
          for (size_t p = 0; p < ct.program_s.size(); ++p) {
            std::printf(" %.0f/%.0f", ct.program_s[p] * 1e3, ct.program_cpu_s[p] * 1e3);
            sum += ct.program_cpu_s[p];
            most = std::max(most, ct.program_cpu_s[p]);
          }
          std::printf("\n  nvrtc cpu: sum %.0f ms, largest program %.0f ms\n", sum * 1e3,
                      most * 1e3);
          t.lap("cuda compile");
        }
#endif
        total.lap("total");
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_compile_cost: %s\n", e.what());
    return 2;
  }
  return 0;
}
