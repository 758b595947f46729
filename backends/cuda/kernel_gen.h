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
#include "lowering/branch_regions.h"

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
  // Symbolic sizes (loop_ir.h): the kernel parameter holding size parameter p ("p3"), loop
  // variable v's extent as C (its parameter, or a literal), whether v's extent is <= 1 at every
  // binding (static and <= 1; a symbolic extent is never assumed small), the product of the
  // outer (inner) extents as C, and whether every inner extent is static.
  static std::string pname(int p) { return "p" + std::to_string(p); }
  int ext_param(size_t v) const { return v < ep_.size() ? ep_[v] : -1; }
  std::string ext_str(size_t v) const;
  bool unit_ext(size_t v) const { return ext_param(v) < 0 && ext_.at(v) <= 1; }
  std::string extent_product(int first, int count) const;
  std::string outer_expr() const { return extent_product(0, nouter_); }
  std::string inner_expr() const { return extent_product(nouter_, ninner_); }
  bool outer_static() const;
  bool inner_static() const;
  static int stride_param(const Index& ix, size_t v) {
    return v < ix.stride_params.size() ? ix.stride_params[v] : -1;
  }
  std::string shape_comment(int first, int count) const;
  std::string index_expr(const Index& ix) const;
  std::string iexpr(int id) const;
  Interval range(int id) const;
  bool fits_32bit() const;
  void collect_vars(const Index& ix, std::set<int>& used) const;
  void collect_iexpr_vars(int id, std::set<int>& used) const;
  // `prefix`: the variables' names (i<d> by default).
  void decompose(const std::string& flat, int first, int count, const std::string& prefix = "i");

  // Bodies. A hook may take over a Load (returning the storage expression) or a Store.
  struct Hooks {
    std::function<std::string(int stage, int instr)> load;  // storage expression
    std::function<bool(int stage, const loop::Store& st, const std::string& value)> store;
  };
  void emit_body(int s, const Hooks& h);
  void emit_region(int s, const Hooks& h, const loop::BranchRegions& br, int r);
  void emit_stores(int s, const Hooks& h);
  std::string instr_expr(int s, int i, const Hooks& h);
  void check_kernel() const;

  // Kernels.
  void emit_signature(int threads);
  void gen_elementwise(CudaKernelLaunch& launch);
  void gen_rows(CudaKernelLaunch& launch);
  void choose_row_mode(CudaKernelLaunch& launch) const;
  bool flat_access(const Index& ix) const;
  bool flat_access_symbolic(const Index& ix) const;
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
  // Symbolic sizes: whether the kernel reads any (then indices are int64 and every annotated
  // size is the kernel parameter pname(p)), per loop variable its extent's parameter or -1, and
  // the parameters the kernel takes (ascending).
  bool sym_ = false;
  std::vector<int> ep_;
  std::vector<int> params_;
  bool uses_half_ = false, uses_rand_ = false;
  // Per stage, which instructions go inside a select's branch (branch_regions), found at the
  // stage's first emission: a body is emitted once per vector lane and once more for the tail.
  std::vector<loop::BranchRegions> regions_;
};

}  // namespace lt::cudagen
