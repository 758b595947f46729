#include "backends/cuda/cuda_compile.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>

#include "backends/cuda/nvrtc_compiler.h"
#include "lowering/plan_serialize.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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
  // Identical kernels (repeated layers) are generated and compiled once and launched by each.
  const DistinctKernels codes = distinct_kernels(plan.kernels);
  const size_t n = codes.first.size();
  std::vector<loop::Kernel> all_distinct;
  for (size_t i : codes.first) all_distinct.push_back(plan.kernels[i]);
  const auto tg = Clock::now();
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
  std::vector<size_t> by_work(n), program_of_code(n), load(programs, 0);
  for (size_t c = 0; c < n; ++c) by_work[c] = c;
  std::stable_sort(by_work.begin(), by_work.end(),
                   [&](size_t a, size_t b) { return work[a] > work[b]; });
  for (size_t c : by_work) {
    program_of_code[c] =
        static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[program_of_code[c]] += work[c];
  }
  std::vector<std::vector<size_t>> members(programs);  // codes of each program
  for (size_t c = 0; c < n; ++c) members[program_of_code[c]].push_back(c);

  CudaModuleImage m;
  m.target = target;
  m.cubin = cubin;
  std::vector<CudaModuleSource> gen(programs);
  std::vector<double> codegen_s(programs, 0), nvrtc_s(programs, 0), nvrtc_cpu_s(programs, 0);
  std::vector<std::exception_ptr> errors(programs);
  m.images.resize(programs);
  auto compile_program = [&](size_t p) {
    try {
      auto t0 = Clock::now();
      std::vector<loop::Kernel> distinct;
      for (size_t c : members[p]) distinct.push_back(plan.kernels[codes.first[c]]);
      // One program is the whole translation unit, already generated for sizing.
      gen[p] = programs == 1 ? std::move(whole) : generate_cuda(distinct, options);
      codegen_s[p] = seconds_since(t0);
      if (distinct.empty()) return;
      t0 = Clock::now();
      const double c0 = thread_cpu_s();
      if (cubin) {
        m.images[p] = nvrtc_compile_cubin(gen[p].source, target);
      } else {
        std::string ptx = nvrtc_compile_ptx(gen[p].source, target);
        m.images[p].assign(ptx.begin(), ptx.end());
        m.images[p].push_back('\0');
      }
      nvrtc_s[p] = seconds_since(t0);
      nvrtc_cpu_s[p] = thread_cpu_s() - c0;
    } catch (...) {
      errors[p] = std::current_exception();
    }
  };
  const auto t0 = Clock::now();
  std::vector<std::thread> workers;
  for (size_t p = 1; p < programs; ++p) workers.emplace_back(compile_program, p);
  compile_program(0);
  for (auto& w : workers) w.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);

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
  }
  return m;
}

}  // namespace lt
