// Conv plan steps on the CPU through oneDNN's convolution primitives (float32): forward with the
// bias and a ReLU post-op fused, backward-data and backward-weights for the gradients. Primitives
// are created once per distinct (kind, shapes, stride, padding, dilation, groups, bias, relu) and
// shared by every executable that needs them (the eager `cpu` device compiles one graph per op).
#pragma once
#include <memory>

#include "lowering/conv.h"

namespace lt::cpu {

// Whether this build has oneDNN, so lowering may emit float32 Conv steps for the CPU.
bool onednn_conv_available();

class OnednnConv {
 public:
  // Throws lt::Error "not implemented: conv ... on cpu" without oneDNN or for a dtype it lacks.
  explicit OnednnConv(const ConvStep& c);
  ~OnednnConv();
  OnednnConv(OnednnConv&&) noexcept;
  // Buffers as the plan binds them (bias may be null when the step has none); blocks until done.
  void run(const void* a, const void* b, const void* bias, void* out) const;

 private:
  struct Impl;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace lt::cpu
