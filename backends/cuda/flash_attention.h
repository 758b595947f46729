// Fused (flash) attention for the CUDA backend: the attention plan steps (lowering/attention.h)
// run as three fixed kernels instead of batched GEMMs over the full [.., L, S] score matrix. The
// forward keeps a 64-query tile's scores, online softmax and output in registers and shared memory,
// never writes the scores, and skips the key tiles a causal mask hides; it also writes the row
// logsumexp L. The backward recomputes P = exp(S - L) per tile (FlashAttention-2's rule): one
// kernel per 64-key tile accumulates dK and dV over the query tiles and adds its share of dQ
// atomically into dQ, zeroed just before by a third kernel (so dQ's last bits may differ run to
// run; a separate dQ pass per query tile, deterministic, cost two more 64 x 64 products per tile
// pair: 0.455 ms of backward per GPT-2 layer on an H100). float32 (FFMA, no TF32) with head
// dims E = Ev = 64.
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

constexpr int kFlashThreads = 256;  // 16 x 16 threads, each a 4 x 4 tile of a 64 x 64 product
constexpr int kFlashTile = 64;      // queries or keys per tile; also the one head dim supported
// Dynamic shared memory of each kernel (64 x 64 float32 tiles: forward 3, dK/dV/dQ 6, zero 0).
constexpr unsigned kFlashForwardSmem = 3 * 64 * 64 * 4;
constexpr unsigned kFlashGradKVSmem = 6 * 64 * 64 * 4;
constexpr unsigned kFlashZeroSmem = 0;

// The extern "C" kernel names.
constexpr const char* kFlashForwardKernel = "lt_flash_attention_fwd_f32";
constexpr const char* kFlashGradKVKernel = "lt_flash_attention_bwd_dkdv_f32";
constexpr const char* kFlashZeroKernel = "lt_flash_attention_zero_f32";

// LT_FLASH_ATTENTION is not 0/off: scaled_dot_product_attention traces attention prims for these
// kernels (else the matmul + softmax decomposition with cuBLAS steps; for A/B comparisons).
bool flash_attention_enabled();

// Whether the kernels cover attention of this dtype and head dims.
bool flash_attention_supports(DType t, int64_t e, int64_t ev);

// The CUDA C of the three kernels (backends/cuda/flash_attention.cu; self-contained: no
// preamble needed).
const std::string& flash_attention_source();

// The NVRTC program of one kernel (0 forward, 1 dK/dV/dQ, 2 zero): the shared helpers and the
// kernel.
std::string flash_attention_program_source(int kernel);

// The three kernels compiled by NVRTC for `target` (cubin, or PTX with its NUL), one image per
// kernel in launch order, the programs compiled in parallel.
std::vector<std::vector<char>> compile_flash_attention(const std::string& target, bool cubin);

// The cubin holding all three kernels that nvcc built for `target` with the library, or empty
// (another architecture, or a build without nvcc).
std::vector<char> embedded_flash_attention(const std::string& target);

// What a module image needs for `target`: the embedded cubin (one image) where there is one,
// else compile_flash_attention's three; once per process and target; thread-safe.
const std::vector<std::vector<char>>& flash_attention_images(const std::string& target, bool cubin);

// Launches a plan's attention steps add after its kernels' in a module image: 3 when it has any
// (the flash kernels, in the order forward, dK/dV/dQ, zero), else 0.
size_t flash_attention_launches(const Plan& plan);

// Appends `images` (flash_attention_images: one holding the three kernels, or one per kernel) to
// `m` as more programs, and the three launches.
void append_flash_attention(CudaModuleImage& m, const std::vector<std::vector<char>>& images);

// Blocks of each kernel's 1-D grid: one per (batch point, tile).
inline int64_t flash_blocks(int64_t batch, int64_t rows) {
  return batch * ((rows + kFlashTile - 1) / kFlashTile);
}

}  // namespace lt
