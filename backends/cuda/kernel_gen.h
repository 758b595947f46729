// The generator of one CUDA kernel from a loop::Kernel (internal to the CUDA code generator,
// cuda_codegen.cc). Shared members: kernel_gen.cc; the elementwise kernel:
// kernel_gen_elementwise.cc; row kernels (Reduce/MapInner stages): kernel_gen_rows.cc.
#pragma once
#include <cstdint>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"

namespace lt::cudagen {

using loop::IExpr;
using loop::IKind;
using loop::Index;
using loop::Instr;
using loop::Kernel;
using loop::Stage;
using loop::StageKind;

struct Interval {
  double lo = 0, hi = 0;
};

class KernelGen {
 public:
  KernelGen(const Kernel& k, std::string name, const CudaCodegenOptions& opt,
            std::ostringstream& os)
      : k_(k), name_(std::move(name)), opt_(opt), os_(os) {}
  CudaKernelLaunch generate();
  // What the kernel needs from the preamble.
  bool uses_half() const { return uses_half_; }
  bool uses_rand() const { return uses_rand_; }
  bool uses_atomic() const { return k_.accumulates(); }

 private:
  // Emission.
  void line(const std::string& s) {
    os_ << std::string(static_cast<size_t>(ind_) * 2, ' ') << s << "\n";
  }
  void open(const std::string& s) { line(s.empty() ? "{" : s + " {"), ++ind_; }
  void close(const std::string& tail = "") { --ind_, line("}" + tail); }

  // Index arithmetic.
  std::string ilit(int64_t v) const;
  std::string index_expr(const Index& ix) const;
  std::string iexpr(int id) const;
  Interval range(int id) const;
  bool fits_32bit() const;
  void collect_vars(const Index& ix, std::set<int>& used) const;
  void collect_iexpr_vars(int id, std::set<int>& used) const;
  void decompose(const std::string& flat, int first, int count);

  // Bodies. A hook may take over a Load (returning the storage expression) or a Store.
  struct Hooks {
    std::function<std::string(int stage, int instr)> load;  // storage expression
    std::function<bool(int stage, const loop::Store& st, const std::string& value)> store;
  };
  void emit_body(int s, const Hooks& h);
  void emit_stores(int s, const Hooks& h);
  std::string instr_expr(int s, int i, const Hooks& h);
  void check_kernel() const;

  // Kernels.
  void emit_signature(int threads);
  void gen_elementwise(CudaKernelLaunch& launch);
  void gen_rows(CudaKernelLaunch& launch);
  void choose_row_mode(CudaKernelLaunch& launch) const;
  bool flat_access(const Index& ix) const;
  bool row_flat_access(const Index& ix) const;
  std::string all_aligned(const std::set<int>& args) const;

  const Kernel& k_;
  std::string name_;
  const CudaCodegenOptions& opt_;
  std::ostringstream& os_;
  int ind_ = 0;
  bool i32_ = true;
  std::string itype_;
  std::vector<int64_t> ext_;  // loop extents: outer then inner
  int nouter_ = 0, ninner_ = 0;
  int64_t outer_n_ = 1, inner_n_ = 1;
  std::set<int> used_vars_;
  bool uses_half_ = false, uses_rand_ = false;
};

}  // namespace lt::cudagen
