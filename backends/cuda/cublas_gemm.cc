#include "backends/cuda/cublas_gemm.h"

#include <cublas_v2.h>  // the documented entry: it defines CUBLASAPI, which cublas_api.h needs
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <vector>

#include "backends/cuda/driver_api.h"
#include "backends/cuda/toolkit_library.h"
#include "ir/error.h"

namespace lt {
namespace {

// Spelled out rather than decltype(&::name): cublas_api.h overloads some of these for C++.
struct Cublas {
  std::string error;
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  // Optional (cuBLAS 11.3+): without it a GEMM's SM target is ignored.
  cublasStatus_t (*set_sm_count_target)(cublasHandle_t, int) = nullptr;
  const char* (*status_string)(cublasStatus_t) = nullptr;
  cublasStatus_t (*gemm_strided_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                         int, int, const void*, const void*, cudaDataType, int,
                                         long long, const void*, cudaDataType, int, long long,
                                         const void*, void*, cudaDataType, int, long long, int,
                                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  cublasStatus_t (*gemm_batched)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                 int, const void*, const void* const*, cudaDataType, int,
                                 const void* const*, cudaDataType, int, const void*, void* const*,
                                 cudaDataType, int, int, cublasComputeType_t,
                                 cublasGemmAlgo_t) = nullptr;
};

const Cublas& load_cublas() {
  static Cublas c;
  static std::once_flag once;
  std::call_once(once, [] {
    // Privately, as NVRTC is (toolkit_library.h); a missing cuBLAS only disables library GEMMs.
    std::string tried;
    void* h = open_toolkit_library("libcublas", &tried);
    if (!h) {
      c.error = "cannot load cuBLAS (tried " + tried + ")";
      return;
    }
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    sym(c.create, "cublasCreate_v2");
    sym(c.destroy, "cublasDestroy_v2");
    sym(c.set_stream, "cublasSetStream_v2");
    sym(c.set_math_mode, "cublasSetMathMode");
    sym(c.set_workspace, "cublasSetWorkspace_v2");
    sym(c.status_string, "cublasGetStatusString");
    sym(c.gemm_strided_batched, "cublasGemmStridedBatchedEx");
    sym(c.gemm_batched, "cublasGemmBatchedEx");
    if (!missing.empty()) c.error = "cuBLAS lacks " + missing;
    c.set_sm_count_target =
        reinterpret_cast<decltype(c.set_sm_count_target)>(dlsym(h, "cublasSetSmCountTarget"));
  });
  return c;
}

void check(cublasStatus_t s, const char* call) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  const Cublas& c = load_cublas();
  fail(ErrorKind::Runtime, "cuBLAS error in ", call, ": ",
       c.status_string ? c.status_string(s) : "", " (status ", static_cast<int>(s), ")");
}

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

int as_int(int64_t v, const Gemm& g, const char* what) {
  if (v > std::numeric_limits<int>::max())
    fail(ErrorKind::NotImplemented, "not implemented: gemm ", g.name, " with ", what, " ", v,
         " beyond 32 bits on cuda");
  return static_cast<int>(v);
}

}  // namespace

bool cublas_available() { return load_cublas().error.empty(); }
std::string cublas_error() { return load_cublas().error; }

CublasHandle::CublasHandle(CUstream stream) {
  const Cublas& c = load_cublas();
  if (!c.error.empty()) fail(ErrorKind::NotImplemented, "not implemented: gemm on cuda: ", c.error);
  cublasHandle_t h = nullptr;
  check(c.create(&h), "cublasCreate");
  handle_ = h;
  check(c.set_stream(h, reinterpret_cast<cudaStream_t>(stream)), "cublasSetStream");
  stream_ = stream;
  // After cublasSetStream, which resets the workspace to cuBLAS's default pool. 32 MiB is what
  // cuBLAS documents for Hopper (4 MiB suffices elsewhere).
  const CudaDriver& d = cuda_driver();
  d.check(d.cuMemAlloc_v2(&workspace_, kWorkspaceBytes), "cuMemAlloc (cuBLAS workspace)");
  check(c.set_workspace(h, reinterpret_cast<void*>(workspace_), kWorkspaceBytes),
        "cublasSetWorkspace");
  // Pedantic: the prescribed precision in every phase, so float32 results match the loop kernels
  // and the CPU to float32 rounding, as PyTorch's default (allow_tf32 = False) does. A GEMM that
  // may use TF32 switches the mode for its own calls (gemm()).
  check(c.set_math_mode(h, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
}

CublasHandle::~CublasHandle() {
  if (handle_) load_cublas().destroy(static_cast<cublasHandle_t>(handle_));
  if (workspace_) {  // queued gemms may still use it
    const CudaDriver& d = cuda_driver();
    d.cuStreamSynchronize(stream_);
    d.cuMemFree_v2(workspace_);
  }
}

size_t CublasHandle::pointer_array_bytes(const Gemm& g) {
  if (g.batch.size() < 2) return 0;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < g.batch.size(); ++d) outer *= g.batch[d];
  if (outer < 2) return 0;
  return 3 * static_cast<size_t>(g.batch_count()) * sizeof(uint64_t);
}

void CublasHandle::stage(const Gemm& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out,
                         PointerArrays arrays) const {
  if (!pointer_array_bytes(g) || !arrays.device || !arrays.host)
    fail(ErrorKind::Runtime, "internal: gemm ", g.name, " staged without pointer arrays");
  const size_t nb = g.batch.size(), es = dtype_size(g.dtype);
  const int64_t total = g.batch_count();
  const int64_t sc = g.M * g.N;
  std::vector<uint64_t>& host = *arrays.host;
  host.resize(3 * static_cast<size_t>(total));
  for (int64_t p = 0; p < total; ++p) {
    int64_t oa = g.a_offset, ob = g.b_offset, rest = p;
    for (size_t d = nb; d-- > 0;) {
      int64_t i = rest % g.batch[d];
      rest /= g.batch[d];
      oa += i * g.a_batch_stride[d], ob += i * g.b_batch_stride[d];
    }
    host[static_cast<size_t>(p)] = b + static_cast<CUdeviceptr>(ob) * es;  // cuBLAS's first operand
    host[static_cast<size_t>(total + p)] = a + static_cast<CUdeviceptr>(oa) * es;
    host[static_cast<size_t>(2 * total + p)] = out + static_cast<CUdeviceptr>(p * sc) * es;
  }
  // From pageable memory the driver stages `host` before returning, so the next run may refill it.
  const CudaDriver& d = cuda_driver();
  d.check(
      d.cuMemcpyHtoDAsync_v2(arrays.device, host.data(), host.size() * sizeof(uint64_t), stream_),
      "cuMemcpyHtoDAsync");
}

void CublasHandle::gemm(const Gemm& g, CUdeviceptr a, CUdeviceptr b, CUdeviceptr out,
                        PointerArrays arrays, bool tf32, int sm_target) const {
  const Cublas& c = load_cublas();
  cudaDataType type;
  cublasComputeType_t compute;
  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  const void *alpha, *beta;
  if (g.dtype == DType::Float32) {
    type = CUDA_R_32F, compute = tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    alpha = &one32, beta = &zero32;
  } else if (g.dtype == DType::Float64) {
    type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F, alpha = &one64, beta = &zero64;
  } else if (g.dtype == DType::BFloat16 || g.dtype == DType::Float16) {
    // 16-bit operands and output, float32 accumulation (alpha/beta are then float), as PyTorch.
    type = g.dtype == DType::BFloat16 ? CUDA_R_16BF : CUDA_R_16F, compute = CUBLAS_COMPUTE_32F;
    alpha = &one32, beta = &zero32;
  } else {
    fail(ErrorKind::NotImplemented, "not implemented: gemm in ", dtype_name(g.dtype), " on cuda");
  }
  const size_t es = dtype_size(g.dtype);
  // cuBLAS is column-major: row-major out[M, N] is column-major out^T[N, M] = B^T A^T, and a
  // row-major operand read column-major is its transpose, so B goes first and A second, each
  // transposed again (op T) exactly when it is stored transposed.
  const cublasOperation_t op_b = g.b_transposed() ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = g.a_transposed() ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = as_int(g.N, g, "N"), n = as_int(g.M, g, "M"), k = as_int(g.K, g, "K");
  const int ldb = as_int(g.ldb(), g, "ldb"), lda = as_int(g.lda(), g, "lda"), ldc = m;
  // The innermost batch dim is cuBLAS's strided batch; outer ones (a batch that does not collapse
  // into one stride) are a host loop of such calls.
  const size_t nb = g.batch.size();
  const int count = nb ? as_int(g.batch.back(), g, "batch") : 1;
  const long long sa = nb ? g.a_batch_stride.back() : 0, sb = nb ? g.b_batch_stride.back() : 0;
  const long long sc = static_cast<long long>(g.M) * g.N;
  int64_t outer = 1;
  for (size_t d = 0; d + 1 < nb; ++d) outer *= g.batch[d];
  // Pedantic math (set on the handle for float32) would keep 16-bit GEMMs off the tensor cores;
  // they run in the default math mode and the handle goes back to its own mode afterwards.
  const bool low = g.dtype == DType::BFloat16 || g.dtype == DType::Float16;
  const bool fast = low || (tf32 && g.dtype == DType::Float32);
  const cublasMath_t own_mode = CUBLAS_PEDANTIC_MATH;
  struct ModeGuard {  // restores the handle's mode even when a call below throws
    const Cublas& c;
    cublasHandle_t h;
    cublasMath_t mode;
    ~ModeGuard() {
      if (h) c.set_math_mode(h, mode);
    }
  } guard{c, nullptr, own_mode};
  if (fast) {
    guard.h = static_cast<cublasHandle_t>(handle_);
    check(c.set_math_mode(guard.h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  // The SMs cuBLAS's heuristics plan for (its kernel and grid), back to all of them afterwards.
  struct SmTargetGuard {
    const Cublas& c;
    cublasHandle_t h;
    ~SmTargetGuard() {
      if (h) c.set_sm_count_target(h, 0);
    }
  } sm_guard{c, nullptr};
  if (sm_target > 0 && c.set_sm_count_target) {
    sm_guard.h = static_cast<cublasHandle_t>(handle_);
    check(c.set_sm_count_target(sm_guard.h, sm_target), "cublasSetSmCountTarget");
  }
  if (outer > 1 && arrays.device && arrays.host) {
    // One call over every batch point: its A, B and C addresses, staged into device memory in
    // stream order. Many small products in one launch fill the GPU where a loop of launches of
    // `count` products each leaves most of it idle (attention's 512 x 512 x 64 per head).
    const int64_t total = outer * count;
    if (!arrays.staged) stage(g, a, b, out, arrays);
    auto* dev = reinterpret_cast<void**>(arrays.device);
    check(c.gemm_batched(static_cast<cublasHandle_t>(handle_), op_b, op_a, m, n, k, alpha,
                         reinterpret_cast<const void* const*>(dev), type, ldb,
                         reinterpret_cast<const void* const*>(dev + total), type, lda, beta,
                         dev + 2 * total, type, ldc, as_int(total, g, "batch"), compute,
                         CUBLAS_GEMM_DEFAULT),
          "cublasGemmBatchedEx");
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    int64_t oa = g.a_offset, ob = g.b_offset, oc = o * count * sc, rest = o;
    for (size_t d = nb ? nb - 1 : 0; d-- > 0;) {
      int64_t i = rest % g.batch[d];
      rest /= g.batch[d];
      oa += i * g.a_batch_stride[d], ob += i * g.b_batch_stride[d];
    }
    const void* pa = reinterpret_cast<const void*>(a + static_cast<CUdeviceptr>(oa) * es);
    const void* pb = reinterpret_cast<const void*>(b + static_cast<CUdeviceptr>(ob) * es);
    void* pc = reinterpret_cast<void*>(out + static_cast<CUdeviceptr>(oc) * es);
    check(c.gemm_strided_batched(static_cast<cublasHandle_t>(handle_), op_b, op_a, m, n, k, alpha,
                                 pb, type, ldb, sb, pa, type, lda, sa, beta, pc, type, ldc, sc,
                                 count, compute, CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
  }
}

}  // namespace lt
