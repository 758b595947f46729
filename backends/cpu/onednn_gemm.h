// Gemm plan steps on the CPU through oneDNN's matmul primitive (float32). Primitives are created
// once per distinct (dtype, shapes, strides) and shared by every executable that needs them.
// Products small enough for backends/cpu/small_gemm.h run as its loop instead (no primitive).
// bfloat16 and float16 products run widened: the operands converted to contiguous float32, the
// float32 product, the result rounded once (to nearest even), as PyTorch's CPU matmul of 16-bit
// tensors accumulates in float32 and rounds once; the conversions cost O(MK + KN + MN) against
// the product's O(MNK) (oneDNN 2.7's 16-bit matmul needs AVX-512 BF16/FP16 hardware).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "lowering/gemm.h"
#include "lowering/plan.h"

namespace lt::cpu {

// Whether this build has oneDNN, so lowering may emit Gemm steps for the CPU (float32, and
// bfloat16 and float16 widened).
bool onednn_gemm_available();

// How many matmul primitives the process-wide cache behind OnednnGemm and OnednnSymbolicGemm
// holds (tests: a symbolic step's primitives do not multiply with its bindings).
size_t onednn_gemm_primitives();

class OnednnGemm {
 public:
  // Throws lt::Error "not implemented: gemm ... on cpu" without oneDNN or for a dtype it lacks
  // (float32, bfloat16 and float16 are supported).
  explicit OnednnGemm(const Gemm& g);
  ~OnednnGemm();
  OnednnGemm(OnednnGemm&&) noexcept;
  // Buffers as the plan binds them (offsets are applied here); blocks until done.
  void run(const void* a, const void* b, void* out) const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
  Gemm g_;
  // 16-bit products: the float32 product over contiguous copies ([batch..., M, K] x
  // [batch..., K, N] -> [batch..., M, N]) that run() widens the operands into.
  std::shared_ptr<const OnednnGemm> widened_;
};

// A symbolic Gemm step (issue 30) run at any binding of its size symbols through primitives whose
// symbolic fields (M, N, K, strides, batch extents) are oneDNN runtime dims, so a new binding
// creates no primitive. The decisions that depend on sizes are made per binding: the small_gemm
// loop for a small product, one thread for a modest one, B's transposed copy. Each such variant
// gets its primitive on first use (at most a few per step); they live in OnednnGemm's shared cache,
// keyed by the step's static fields and which fields are runtime.
class OnednnSymbolicGemm {
 public:
  // g: the step at the binding its plan was made for; sizes: its symbolic fields (ordinals of
  // for_each_size_field). Creates no primitive yet.
  OnednnSymbolicGemm(const Gemm& g, const StepSizeParams& sizes);
  ~OnednnSymbolicGemm();
  // Runs the step instantiated at one binding (with_sizes, validated) on buffers as the plan binds
  // them; blocks until done. Returns false, having run nothing, when oneDNN has no runtime-dims
  // matmul for this layout (or the dtype is not float32): the caller then runs a per-binding
  // OnednnGemm instead.
  bool run(const Gemm& at, const void* a, const void* b, void* out) const;

 private:
  Gemm mask_;  // the step with every size field 1 where symbolic, 0 where static
  bool usable_ = false;
  mutable std::mutex mu_;
  // Per variant (serial, B transposed first, which batch strides are 0): its primitive, or null
  // where oneDNN refused the layout.
  mutable std::map<uint64_t, std::shared_ptr<const OnednnGemm::Impl>> variants_;
};

}  // namespace lt::cpu
