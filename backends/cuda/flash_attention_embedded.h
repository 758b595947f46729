// What the build embeds of the flash attention kernels (cmake/embed_flash.cmake writes the .cc):
// the CUDA C of backends/cuda/flash_attention.cu, and the cubins nvcc compiled from it at build
// time for the GPUs most users have (sm_80, sm_90), so those never run NVRTC for it; none when
// the build found no nvcc.
#pragma once
#include <cstddef>

namespace lt {

struct EmbeddedCubin {
  const char* arch;  // "sm_90"
  const unsigned char* data;
  size_t size;
};

const char* flash_attention_cu_text();
extern const EmbeddedCubin kFlashAttentionCubins[];
extern const size_t kFlashAttentionCubinCount;

}  // namespace lt
