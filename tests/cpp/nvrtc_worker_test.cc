// NVRTC worker processes (backends/cuda/nvrtc_worker.h), no GPU needed: the worker built next to
// the library compiles byte-identical cubins and PTX to an in-process compile, a source NVRTC
// rejects gives the same lt::Error, a plan's programs go to workers, and workers that are missing,
// exit early, crash, echo or answer garbage leave compile_cuda_module compiling in process with
// the same images. Malformed requests to the worker's side are refused without a reply.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/nvrtc_worker.h"
#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"

namespace lt {
namespace {

const char* kSource = R"(
extern "C" __global__ void axpy(float a, const float* x, float* y, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    y[i] = a * x[i] + y[i];
}
extern "C" __global__ void row_max(const float* x, float* out, int cols) {
  float m = -__int_as_float(0x7f800000);
  for (int c = threadIdx.x; c < cols; c += 32) m = fmaxf(m, x[blockIdx.x * cols + c]);
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x == 0) out[blockIdx.x] = m;
}
)";

// LT_NVRTC_WORKER set for one scope.
struct WorkerEnv {
  explicit WorkerEnv(const std::string& v) { ::setenv("LT_NVRTC_WORKER", v.c_str(), 1); }
  ~WorkerEnv() { ::unsetenv("LT_NVRTC_WORKER"); }
};

std::string script(const std::string& name, const std::string& body) {
  const std::string path =
      (std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".sh"))
          .string();
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

using testing::FakeData;
using testing::param;

// Kernels of three kinds (row reduction, broadcast elementwise, a transcendental): 3 programs.
Plan three_kernel_plan() {
  NodePtr x = param({29, 301});
  Attrs a;
  a.ints = {1};
  NodePtr sm = make_node(Op::Softmax, {x}, a);
  NodePtr y = make_node(Op::Sin, {make_node(Op::Mul, {sm, param({301})})});
  NodePtr z = make_node(Op::Exp, {make_node(Op::Add, {param({7, 5}), param({5})})});
  return lower(collect_graph({y.get(), sm.get(), z.get()}));
}

TEST(NvrtcWorker, BuiltNextToTheLibrary) {
  ::unsetenv("LT_NVRTC_WORKER");
  const std::string w = nvrtc_worker_path();
  ASSERT_FALSE(w.empty()) << "lazytensor-nvrtc was not found beside liblazytensor";
  EXPECT_EQ(std::filesystem::path(w).filename(), "lazytensor-nvrtc");
  EXPECT_EQ(std::filesystem::path(w).parent_path().filename(), "lib");
}

TEST(NvrtcWorker, SameImagesAsInProcess) {
  ::unsetenv("LT_NVRTC_WORKER");
  double cpu = -1;
  auto cubin = nvrtc_compile_in_worker(kSource, "sm_90", "w.cu", NvrtcEffort::Full, true, &cpu);
  ASSERT_TRUE(cubin.has_value());
  EXPECT_EQ(*cubin, nvrtc_compile_cubin(kSource, "sm_90", "w.cu"));
  EXPECT_GT(cpu, 0.0);  // the worker's own CPU time came back
  auto ptx =
      nvrtc_compile_in_worker(kSource, "compute_80", "w.cu", NvrtcEffort::FastCompile, false);
  ASSERT_TRUE(ptx.has_value());
  EXPECT_EQ(std::string(ptx->begin(), ptx->end()),
            nvrtc_compile_ptx(kSource, "compute_80", "w.cu", NvrtcEffort::FastCompile));
}

TEST(NvrtcWorker, CompileErrorIsTheSameError) {
  ::unsetenv("LT_NVRTC_WORKER");
  const std::string bad =
      std::string(kSource) + "extern \"C\" __global__ void broken() { undefined_name(); }\n";
  std::string in_process, in_worker;
  try {
    nvrtc_compile_cubin(bad, "sm_90", "bad.cu");
  } catch (const Error& e) {
    in_process = e.what();
  }
  try {
    nvrtc_compile_in_worker(bad, "sm_90", "bad.cu", NvrtcEffort::Full, true);
  } catch (const Error& e) {
    in_worker = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
  }
  EXPECT_NE(in_process.find("undefined_name"), std::string::npos) << in_process;
  EXPECT_EQ(in_worker, in_process);
}

TEST(NvrtcWorker, PlanProgramsCompileInWorkers) {
  ::unsetenv("LT_NVRTC_WORKER");
  const Plan plan = three_kernel_plan();
  CudaCompileTimings t;
  const CudaModuleImage m = compile_cuda_module(plan, "sm_90", true, &t, 3);
  EXPECT_EQ(t.programs, 3);
  EXPECT_EQ(t.worker_programs, 3);
  CudaCompileTimings t1;
  const CudaModuleImage one = compile_cuda_module(plan, "sm_90", true, &t1, 1);
  EXPECT_EQ(t1.worker_programs, 0);  // one program: compiled here, no process to start
  WorkerEnv off("off");
  CudaCompileTimings t0;
  const CudaModuleImage here = compile_cuda_module(plan, "sm_90", true, &t0, 3);
  EXPECT_EQ(t0.worker_programs, 0);
  EXPECT_EQ(m.images, here.images);
  EXPECT_EQ(m.source, here.source);
}

TEST(NvrtcWorker, BrokenWorkersFallBackToInProcess) {
  const Plan plan = three_kernel_plan();
  CudaModuleImage want;
  {
    WorkerEnv off("off");
    want = compile_cuda_module(plan, "sm_90", true, nullptr, 3);
  }
  const std::string scripts[] = {
      script("lt_worker_exits", "exit 1"),
      script("lt_worker_crashes", "kill -9 $$"),
      script("lt_worker_garbage", "head -c 300 /dev/urandom"),
      script("lt_worker_silent_ok", "cat > /dev/null; exit 0"),
  };
  for (const std::string& w :
       {std::string("/nonexistent/lazytensor-nvrtc"), std::string("/bin/cat"), scripts[0],
        scripts[1], scripts[2], scripts[3]}) {
    SCOPED_TRACE(w);
    WorkerEnv env(w);
    EXPECT_FALSE(
        nvrtc_compile_in_worker(kSource, "sm_90", "w.cu", NvrtcEffort::Full, true).has_value());
    CudaCompileTimings t;
    const CudaModuleImage got = compile_cuda_module(plan, "sm_90", true, &t, 3);
    EXPECT_EQ(t.worker_programs, 0);
    EXPECT_EQ(got.images, want.images);
  }
  for (const std::string& s : scripts) std::filesystem::remove(s);
}

// Runs the worker's side on `request` through pipes: its return code and what it wrote.
std::pair<int, std::string> serve(const std::string& request) {
  const std::string in =
      (std::filesystem::temp_directory_path() / ("lt_worker_req_" + std::to_string(::getpid())))
          .string();
  std::ofstream(in, std::ios::binary) << request;
  FILE* f = std::fopen(in.c_str(), "rb");
  FILE* out = std::tmpfile();
  const int rc = serve_nvrtc_request(fileno(f), fileno(out));
  std::fclose(f);
  std::filesystem::remove(in);
  std::string written(static_cast<size_t>(std::ftell(out)), '\0');
  std::rewind(out);
  if (!written.empty()) {
    EXPECT_EQ(std::fread(written.data(), 1, written.size(), out), written.size());
  }
  std::fclose(out);
  return {rc, written};
}

std::string request(const std::string& arch, const std::string& source) {
  auto field = [](std::string& s, const std::string& v) {
    for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>(uint64_t{v.size()} >> (8 * i)));
    s += v;
  };
  std::string r = "LTNVRTC1";
  r.push_back(1);  // cubin
  r.push_back(0);  // full effort
  field(r, arch);
  field(r, "r.cu");
  field(r, source);
  return r;
}

TEST(NvrtcWorker, MalformedRequestsAreRefused) {
  const std::string good = request("sm_90", kSource);
  auto [rc, reply] = serve(good);
  EXPECT_EQ(rc, 0);
  EXPECT_GT(reply.size(), 1000u);
  EXPECT_EQ(reply.substr(0, 8), "LTNVRTC1");
  // Every truncation, an oversized length, a bad flag, trailing bytes: refused, nothing written.
  std::vector<std::string> bad;
  for (size_t n :
       {size_t{0}, size_t{5}, size_t{8}, size_t{9}, size_t{17}, good.size() / 2, good.size() - 1})
    bad.push_back(good.substr(0, n));
  bad.push_back(good + "x");
  std::string flag = good;
  flag[8] = 7;
  bad.push_back(flag);
  std::string huge = good;
  huge[10 + 7] = '\x7f';  // the arch field's length, top byte
  bad.push_back(huge);
  std::string magic = good;
  magic[3] = 'x';
  bad.push_back(magic);
  std::mt19937 rng(11);
  for (int i = 0; i < 20; ++i) {
    std::string s = good.substr(0, 30);
    s[rng() % s.size()] = static_cast<char>(rng());
    bad.push_back(s);
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    auto [code, out] = serve(bad[i]);
    EXPECT_EQ(code, 2) << "request " << i;
    EXPECT_TRUE(out.empty()) << "request " << i;
  }
  // A well-formed request for an architecture NVRTC does not know: a reply carrying the error.
  auto [rc2, reply2] = serve(request("sm_1", kSource));
  EXPECT_EQ(rc2, 0);
  EXPECT_EQ(reply2[8], 1);
}

}  // namespace
}  // namespace lt

#endif  // LT_HAVE_CUDA
