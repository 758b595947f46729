// Loop IR builders for tests that write kernels by hand: affine and general indices, a stage
// body, a plan with buffers and kernels. First written for the CPU code generator's tests
// (cpu_codegen_util.h includes this, and the namespace is theirs); needs no backend, so the CUDA
// tests (tests/cpp/cuda_symbolic_codegen_test.cc, tests/gpu) build the same plans.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "lowering/plan.h"

namespace lt::cpu_codegen_test {

using loop::IKind;
using loop::Index;
using loop::Instr;
using loop::Stage;
using loop::StageKind;
using K = BufferSpec::Kind;

inline Index aff(std::vector<int64_t> strides, int64_t offset = 0) {
  Index ix;
  ix.offset = offset;
  ix.strides = std::move(strides);
  return ix;
}
inline Index general(int root) {
  Index ix;
  ix.general = root;
  return ix;
}

// Builds one stage body; each helper returns the new instruction's id.
struct Body {
  Stage st;
  explicit Body(StageKind k) { st.kind = k; }
  int push(Instr in) {
    st.body.push_back(std::move(in));
    return static_cast<int>(st.body.size()) - 1;
  }
  int load(DType t, int arg, Index ix) {
    Instr in{IKind::Load, Op::Add, t};
    in.arg = arg;
    in.index = std::move(ix);
    return push(in);
  }
  int scalar(DType t, int arg) {
    Instr in{IKind::LoadScalar, Op::Add, t};
    in.arg = arg;
    return push(in);
  }
  int cnst(DType t, double v) {
    Instr in{IKind::Const, Op::Add, t};
    in.value = v;
    return push(in);
  }
  int op(Op o, DType t, int a, int b = -1, int c = -1) { return push({IKind::Op, o, t, a, b, c}); }
  int result(DType t, int stage) {
    Instr in{IKind::ReduceResult, Op::Add, t};
    in.arg = stage;
    return push(in);
  }
  int rand(DType t, int seed, int offset, Index ix, int64_t stream) {
    Instr in{IKind::RandUniform, Op::Rand, t, seed, offset};
    in.index = std::move(ix);
    in.stream = stream;
    return push(in);
  }
  void store(int arg, Index ix, int v) { st.stores.push_back({arg, std::move(ix), v}); }
  Stage reduce(Op op, DType acc, int v) {
    st.reduce_op = op;
    st.acc_dtype = acc;
    st.reduce_value = v;
    return st;
  }
};

// A plan with buffers; kernel args name them by buffer id.
struct PlanBuilder {
  Plan p;
  int inputs = 0;
  int add(K kind, DType t, int64_t n) {
    BufferSpec b{kind, t, n};
    if (kind == K::Input || kind == K::Scalar) b.input = inputs++;
    p.buffers.push_back(b);
    return static_cast<int>(p.buffers.size()) - 1;
  }
  loop::Arg arg(int buffer, bool output = false) const {
    const BufferSpec& b = p.buffers[buffer];
    return {buffer, b.dtype, b.numel, b.kind == K::Scalar, output};
  }
  void kernel(Shape outer, Shape inner, std::vector<loop::Arg> args, std::vector<Stage> stages,
              std::vector<loop::IExpr> iexprs = {}) {
    loop::Kernel k;
    k.name = "k" + std::to_string(p.kernels.size());
    k.outer = std::move(outer);
    k.inner = std::move(inner);
    k.args = std::move(args);
    k.stages = std::move(stages);
    k.iexprs = std::move(iexprs);
    p.kernels.push_back(std::move(k));
  }
};

}  // namespace lt::cpu_codegen_test
