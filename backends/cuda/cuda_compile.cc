#include "backends/cuda/cuda_compile.h"

#include <algorithm>
#include <thread>

#include "backends/clocks.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/nvrtc_worker.h"
#include "backends/parallel_work.h"
#include "ir/error.h"

namespace lt {
namespace {

// Each distinct kernel's share of the translation unit's text: NVRTC's time (front end and
// ptxas) grows with it far more closely than with the loop IR's instruction count.
std::vector<size_t> source_sizes(const CudaModuleSource& all) {
  std::vector<size_t> start;
  for (const auto& l : all.kernels) {
    const size_t at = all.source.find(" " + l.name + "(");
    start.push_back(at == std::string::npos ? 0 : at);
  }
  std::vector<size_t> sizes(start.size(), 1);
  std::vector<size_t> order(start.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return start[a] < start[b]; });
  for (size_t j = 0; j < order.size(); ++j) {
    const size_t end = j + 1 < order.size() ? start[order[j + 1]] : all.source.size();
    sizes[order[j]] = std::max<size_t>(1, end - start[order[j]]);
  }
  return sizes;
}

}  // namespace

CudaModuleImage compile_cuda_module(const Plan& plan, const std::string& target, bool cubin,
                                    CudaCompileTimings* timings, size_t programs) {
  // Identical kernels (repeated layers) are generated and compiled once and launched by each;
  // lowering grouped them (Plan::distinct).
  LT_CHECK(plan.is_completed(), ErrorKind::Runtime,
           "internal: cuda compile given a plan that complete_plan has not completed");
  const DistinctKernels& codes = plan.distinct;
  const size_t n = codes.first.size();
  std::vector<loop::Kernel> all_distinct;
  for (size_t i : codes.first) all_distinct.push_back(plan.kernels[i]);
  const auto tg = SteadyClock::now();
  const CudaCodegenOptions options = CudaCodegenOptions::from_env();  // tuning knobs, if set
  CudaModuleSource whole = generate_cuda(all_distinct, options);
  const std::vector<size_t> work = source_sizes(whole);
  const double sizing_s = seconds_since(tg);
  size_t total = 0;
  for (size_t w : work) total += w;
  if (programs == 0) {
    const size_t cap =
        std::min<size_t>(kMaxPrograms, std::max(1u, std::thread::hardware_concurrency()));
    programs = std::clamp<size_t>(total / kSourceBytesPerProgram, 1, cap);
  }
  programs = std::clamp<size_t>(programs, 1, std::max<size_t>(n, 1));
  // Largest codes first, each to the least loaded program; within a program, plan order.
  const std::vector<size_t> program_of_code = balance_groups(work, programs);
  std::vector<std::vector<size_t>> members(programs);  // codes of each program
  for (size_t c = 0; c < n; ++c) members[program_of_code[c]].push_back(c);

  CudaModuleImage m;
  m.target = target;
  m.cubin = cubin;
  std::vector<CudaModuleSource> gen(programs);
  std::vector<double> codegen_s(programs, 0), nvrtc_s(programs, 0), nvrtc_cpu_s(programs, 0);
  std::vector<char> in_worker(programs, 0);
  const bool use_workers = programs > 1 && !nvrtc_worker_path().empty();
  m.images.resize(programs);
  const auto t0 = SteadyClock::now();
  run_in_parallel(programs, [&](size_t p) {
    auto t1 = SteadyClock::now();
    std::vector<loop::Kernel> distinct;
    for (size_t c : members[p]) distinct.push_back(plan.kernels[codes.first[c]]);
    // One program is the whole translation unit, already generated for sizing.
    gen[p] = programs == 1 ? std::move(whole) : generate_cuda(distinct, options);
    codegen_s[p] = seconds_since(t1);
    if (distinct.empty()) return;
    t1 = SteadyClock::now();
    // Several programs: each in a worker process where one runs (nvrtc_worker.h says why).
    bool worker = false;
    m.images[p] = compile_module_image(gen[p].source, target, "lazytensor_kernels.cu",
                                       NvrtcEffort::FastCompile, cubin, use_workers, &worker,
                                       &nvrtc_cpu_s[p]);
    in_worker[p] = worker;
    nvrtc_s[p] = seconds_since(t1);
  });

  // Where each code's launch lives: its program and its place there.
  std::vector<size_t> slot(n);
  for (size_t p = 0; p < programs; ++p)
    for (size_t j = 0; j < members[p].size(); ++j) slot[members[p][j]] = j;
  for (size_t c : codes.code_of) {
    m.launches.push_back(gen[program_of_code[c]].kernels.at(slot[c]));
    m.program_of.push_back(static_cast<uint32_t>(program_of_code[c]));
  }
  if (programs == 1) {
    m.source = std::move(gen[0].source);
  } else {
    for (size_t p = 0; p < programs; ++p) {
      m.source += "// ---- NVRTC program " + std::to_string(p + 1) + " of " +
                  std::to_string(programs) + " ----\n";
      m.source += gen[p].source;
    }
  }
  if (plan.kernels.empty()) m.images.clear();
  if (timings) {
    timings->programs = static_cast<int>(programs);
    timings->codegen_s = sizing_s;
    for (double s : codegen_s) timings->codegen_s += s;
    timings->nvrtc_s = seconds_since(t0);
    timings->program_s = nvrtc_s;
    timings->program_cpu_s = nvrtc_cpu_s;
    timings->slowest_program_s = *std::max_element(nvrtc_s.begin(), nvrtc_s.end());
    timings->worker_programs = static_cast<int>(std::count(in_worker.begin(), in_worker.end(), 1));
  }
  return m;
}

}  // namespace lt
