// Fused (flash) attention for the CUDA backend: the attention plan steps (lowering/attention.h)
// run as fixed kernels instead of batched GEMMs over the full [.., L, S] score matrix. The forward
// keeps a 64-query tile's scores, online softmax and output in registers and shared memory, never
// writes the scores, and skips the key tiles a causal mask hides; it also writes the row
// logsumexp L. The backward recomputes P = exp(S - L) per tile (FlashAttention-2's rule).
// - float32 (FFMA, no TF32; 256 threads): one kernel per 64-key tile accumulates dK and dV over
//   the query tiles and adds its share of dQ atomically into dQ, zeroed just before by a third
//   kernel (so dQ's last bits may differ run to run).
// - bfloat16 and float16 (tensor cores, mma.sync m16n8k16, compute capability 8.0 and later; 128
//   threads): P and dS stay in registers as the next product's operand; dK/dV per key tile and dQ
//   per query tile are two kernels, the second recomputing S and dP (no atomics, deterministic).
//   Inputs and outputs 16-bit, the statistics (L, D) float32, accumulation float32.
// Head dims E = Ev = 64.
//
// The kernels (flash_attention.cu) ship as cubins built by nvcc with the library for sm_80 and
// sm_90; on other GPUs NVRTC compiles them once per process, beside a graph's own programs. Either
// way they are stored in each module image that launches them, so a disk-cache hit loads them
// like any generated kernel.
#pragma once
#include <cstdint>
#include <string>

#include "backends/cuda/cuda_module_image.h"
#include "ir/dtype.h"
#include "lowering/plan.h"

namespace lt {

constexpr int kFlashThreads = 256;  // float32: 16 x 16 threads, each a 4 x 4 tile of a product
constexpr int kFlashTile = 64;      // queries or keys per tile; also the one head dim supported

// One flash kernel: its extern "C" name, threads per block and dynamic shared memory.
struct FlashKernel {
  const char* name;
  unsigned threads;
  unsigned smem;
};
// 64 x 64 float32 tiles: forward 3, dK/dV/dQ 6. 16-bit: two buffers (the next tile loads while
// one computes) of two 64 x 72 tiles (rows padded against bank conflicts), and in the dK/dV
// kernel of the 64 queries' two row statistics.
constexpr unsigned kFlash16Tiles = 2 * (2 * 64 * 72 * 2);
// In module order: float32 forward, dK/dV/dQ, zero; then forward, dK/dV, dQ of bfloat16 and of
// float16 (flash_kernel_base gives a dtype's first).
constexpr int kFlashKernelCount = 9;
constexpr FlashKernel kFlashKernels[kFlashKernelCount] = {
    {"lt_flash_attention_fwd_f32", 256, 3 * 64 * 64 * 4},
    {"lt_flash_attention_bwd_dkdv_f32", 256, 6 * 64 * 64 * 4},
    {"lt_flash_attention_zero_f32", 256, 0},
    {"lt_flash_attention_fwd_bf16", 128, kFlash16Tiles},
    {"lt_flash_attention_bwd_dkdv_bf16", 128, kFlash16Tiles + 2 * (2 * 64 * 4)},
    {"lt_flash_attention_bwd_dq_bf16", 128, kFlash16Tiles},
    {"lt_flash_attention_fwd_f16", 128, kFlash16Tiles},
    {"lt_flash_attention_bwd_dkdv_f16", 128, kFlash16Tiles + 2 * (2 * 64 * 4)},
    {"lt_flash_attention_bwd_dq_f16", 128, kFlash16Tiles},
};
constexpr const char* kFlashForwardKernel = kFlashKernels[0].name;
constexpr const char* kFlashGradKVKernel = kFlashKernels[1].name;
constexpr const char* kFlashZeroKernel = kFlashKernels[2].name;

// The index in kFlashKernels of dtype t's forward kernel (its backward kernels follow): 0
// float32, 3 bfloat16, 6 float16.
int flash_kernel_base(DType t);

// LT_FLASH_ATTENTION is not 0/off: scaled_dot_product_attention traces attention prims for these
// kernels (else the matmul + softmax decomposition with cuBLAS steps; for A/B comparisons).
bool flash_attention_enabled();

// Whether the kernels cover attention of this dtype and head dims (the 16-bit kernels also need
// compute capability 8.0: the backend checks that before offering them).
bool flash_attention_supports(DType t, int64_t e, int64_t ev);

// The CUDA C of the kernels (backends/cuda/flash_attention.cu; self-contained: no preamble
// needed).
const std::string& flash_attention_source();

// The NVRTC program of kernel `kernel` (an index in kFlashKernels): the shared helpers and the
// kernel.
std::string flash_attention_program_source(int kernel);

// The kernels compiled by NVRTC for `target` (cubin, or PTX with its NUL), one image per kernel
// in kFlashKernels' order, the programs compiled in parallel.
std::vector<std::vector<char>> compile_flash_attention(const std::string& target, bool cubin);

// The cubin holding all the kernels that nvcc built for `target` with the library, or empty
// (another architecture, or a build without nvcc).
std::vector<char> embedded_flash_attention(const std::string& target);

// What a module image needs for `target`: the embedded cubin (one image) where there is one,
// else compile_flash_attention's one per kernel; once per process and target; thread-safe.
const std::vector<std::vector<char>>& flash_attention_images(const std::string& target, bool cubin);

// Functions a plan's attention steps add after its kernels' in a module image: kFlashKernelCount
// when it has any (kFlashKernels, in order), else 0.
size_t flash_attention_launches(const Plan& plan);

// Appends `images` (flash_attention_images: one holding every kernel, or one per kernel) to `m` as
// more programs, and one launch entry per kernel.
void append_flash_attention(CudaModuleImage& m, const std::vector<std::vector<char>>& images);

// Blocks of each kernel's 1-D grid: one per (batch point, tile).
inline int64_t flash_blocks(int64_t batch, int64_t rows) {
  return batch * ((rows + kFlashTile - 1) / kFlashTile);
}

}  // namespace lt
