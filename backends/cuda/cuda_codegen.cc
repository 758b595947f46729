// Loop IR -> CUDA C (see cuda_codegen.h for the grid mapping).
//
// The pieces: value semantics and the expression helpers in cuda_expr.cc; one kernel's generator
// (KernelGen) in kernel_gen.h, with the index-width choice in kernel_gen.cc and the elementwise and
// row kernels in kernel_gen_elementwise.cc and kernel_gen_rows.cc. This file: the public functions.
// GCC 12 reports a false -Wrestrict in `"literal" + std::string&&` at -O2/-O3 (GCC bug 105329);
// this file is made of such concatenations.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif
#include "backends/cuda/cuda_codegen.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/cuda_preamble.h"
#include "backends/cuda/kernel_gen.h"
#include "ir/env_switch.h"
#include "ir/error.h"
#include "ir/ops.h"

namespace lt {

int64_t cuda_point_cost(const loop::Kernel& k) {
  int64_t cost = 0;
  for (const auto& st : k.stages)
    for (const auto& in : st.body) {
      if (in.kind != loop::IKind::Op) {
        ++cost;
        continue;
      }
      // Weights per ir/ops.h's tiers: a division or square root is about one instruction here;
      // a math-library call, or the fmod loop (floats) or 64-bit division sequence (integers)
      // behind the division helpers, is some twenty; sin and cos add their range reduction.
      switch (op_info(in.op).cost) {
        case OpCost::Trig:
          cost += 40;
          break;
        case OpCost::Transcendental:
        case OpCost::DivideLoop:
          cost += 20;
          break;
        case OpCost::Cheap:
        case OpCost::Divide:
          ++cost;
          break;
      }
    }
  return cost;
}

int64_t cuda_launch_blocks(const CudaKernelLaunch& l, int64_t outer_n) {
  if (outer_n <= 0) return 0;
  const int64_t threads = std::max(l.threads, 32);
  switch (l.mode) {
    case CudaKernelMode::Elementwise: {
      const int64_t work = std::max<int64_t>(l.vectorized ? outer_n / 4 : outer_n, 1);
      return (work + threads - 1) / threads;
    }
    case CudaKernelMode::Thread:
      return (outer_n + threads - 1) / threads;
    case CudaKernelMode::Warp:
      return (outer_n + threads / 32 - 1) / (threads / 32);
    case CudaKernelMode::Tile:
      return (outer_n + 31) / 32;
    case CudaKernelMode::Block:
      return outer_n;
  }
  return outer_n;
}

const char* cuda_kernel_mode_name(CudaKernelMode m) {
  switch (m) {
    case CudaKernelMode::Elementwise:
      return "elementwise";
    case CudaKernelMode::Thread:
      return "thread-per-row";
    case CudaKernelMode::Warp:
      return "warp-per-row";
    case CudaKernelMode::Block:
      return "block-per-row";
    case CudaKernelMode::Tile:
      return "tile-of-columns";
  }
  return "?";
}

CudaCodegenOptions CudaCodegenOptions::from_env() {
  CudaCodegenOptions o;
  o.max_cached_per_thread = env_int("LT_CUDA_ROW_CACHE", 0, 64, o.max_cached_per_thread);
  o.block_threads = env_int("LT_CUDA_BLOCK_THREADS", 0, 1024, o.block_threads);
  o.row_vectors = env_int("LT_CUDA_ROW_VEC", 0, 1, o.row_vectors ? 1 : 0) != 0;
  return o;
}

std::string CudaCodegenOptions::tag() const {
  const CudaCodegenOptions d;
  std::string t;
  if (max_cached_per_thread != d.max_cached_per_thread)
    t += " rowcache" + std::to_string(max_cached_per_thread);
  if (block_threads != d.block_threads) t += " block" + std::to_string(block_threads);
  if (row_vectors != d.row_vectors) t += row_vectors ? " rowvec" : " norowvec";
  return t;
}

CudaModuleSource generate_cuda(const std::vector<loop::Kernel>& kernels,
                               const CudaCodegenOptions& options) {
  CudaModuleSource out;
  std::ostringstream os;
  bool half = false, rand = false, reduce = false, atomic = false, atomic_half = false;
  std::set<std::string> names;
  for (size_t i = 0; i < kernels.size(); ++i) {
    std::string name =
        cudagen::sanitize(kernels[i].name.empty() ? "kernel" + std::to_string(i) : kernels[i].name);
    if (!names.insert(name).second) {
      name += "_" + std::to_string(i);
      names.insert(name);
    }
    os << "\n";
    const loop::Kernel k = cudagen::with_full_strides(kernels[i]);
    cudagen::KernelGen gen(k, name, options, os);
    out.kernels.push_back(gen.generate());
    half |= gen.uses_half();
    rand |= gen.uses_rand();
    atomic |= gen.uses_atomic();
    for (const auto& st : k.stages)
      for (const auto& store : st.stores)
        atomic_half |= store.accumulate && is_half(k.args[store.arg].dtype);
    reduce |= out.kernels.back().mode == CudaKernelMode::Warp ||
              out.kernels.back().mode == CudaKernelMode::Block ||
              out.kernels.back().mode == CudaKernelMode::Tile;
  }
  std::string pre = cuda_preamble::kPreambleHead;
  if (half) pre += cuda_preamble::kPreambleHalf;
  pre += cuda_preamble::kPreambleBase;
  if (reduce) pre += cuda_preamble::kPreambleReduce;
  if (rand) pre += cuda_preamble::kPreambleRand;
  if (atomic) pre += cuda_preamble::kPreambleAtomic;
  if (atomic_half) pre += cuda_preamble::kPreambleAtomicHalf;
  const std::string body = os.str();
  if (body.find("lt_sinf(") != std::string::npos || body.find("lt_cosf(") != std::string::npos)
    pre += cuda_preamble::kPreambleTrig;
  if (body.find("lt_ld4<") != std::string::npos) pre += cuda_preamble::kPreambleVector;
  for (const char* fn : {"lt_floordiv", "lt_remainder", "lt_fmod", "lt_shl<", "lt_shr<"})
    if (body.find(fn) != std::string::npos) {
      pre += cuda_preamble::kPreambleIntOps;
      break;
    }
  out.source = pre + body;
  return out;
}

std::string cuda_source(const std::vector<loop::Kernel>& kernels) {
  return generate_cuda(kernels).source;
}

}  // namespace lt
