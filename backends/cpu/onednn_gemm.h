// Gemm plan steps on the CPU through oneDNN's matmul primitive (float32). Primitives are created
// once per distinct (dtype, shapes, strides) and shared by every executable that needs them.
// Products small enough for backends/cpu/small_gemm.h run as its loop instead (no primitive).
#pragma once
#include <memory>

#include "lowering/gemm.h"

namespace lt::cpu {

// Whether this build has oneDNN, so lowering may emit float32 Gemm steps for the CPU.
bool onednn_gemm_available();

class OnednnGemm {
 public:
  // Throws lt::Error "not implemented: gemm ... on cpu" without oneDNN or for a dtype it lacks.
  explicit OnednnGemm(const Gemm& g);
  ~OnednnGemm();
  OnednnGemm(OnednnGemm&&) noexcept;
  // Buffers as the plan binds them (offsets are applied here); blocks until done.
  void run(const void* a, const void* b, void* out) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
  Gemm g_;
};

}  // namespace lt::cpu
