// The op registry's completeness check (ir/ops.h): every op is declared once in ir/ops.def and each
// pipeline stage keeps its own rule table keyed by Op. One walk over the op table asks every stage
// for the op's rule; a missing one fails naming the op and the stage. Which stages an op must
// reach follows from its columns in ir/ops.def (primitive, class), not from a list of ops:
//
//   decomposition   lowering/decompose.cc: a composite (primitive = false) has a rule and a
//                   primitive has none (decompose() never asks for one). Composites reach no
//                   backend: they are primitives by the time anything below runs.
//   scalar          ir/scalar_ops.h: every primitive of a class whose meaning is a function of its
//                   operands' elements (scalar_meaning below) has its forms there, unary or binary
//                   by its arity; constant folding and the reference interpreter read nothing else.
//                   No other op has any (nothing would read them).
//   reference       backends/reference/reference_ops.cc: every primitive, library prims (conv,
//                   attention) included, since the interpreter runs the prim graph itself.
//   cpu / cuda      the code generators, for the primitives that fusion turns into kernel code
//   codegen         (by class, as KernelBuilder::emit does; kernel_form below): an IKind::Op
//                   instruction, a Reduce stage's reduce_op, or an IKind::RandUniform. Each such op
//                   is probed with the one-kernel plan fusion would make of it, over each dtype
//                   ir/infer.cc accepts for it: the CPU backend compiles it (LLVM; where built),
//                   the CUDA generator writes its source (no NVRTC, no GPU; where built). The rule
//                   exists when some accepted dtype goes through; a generator without the op throws
//                   NotImplemented for every one. Classes that never reach a generator as an op
//                   (leaves, movement, indexing, library steps) say in kernel_form what happens
//                   instead.
//   vjp             autograd/vjp.cc: every op that non_differentiable() does not exempt.
//
// Where a stage picks the rule by the op's class alone, any op of that class "has" it, so the walk
// also requires such a class to hold one primitive: a second one would silently run the first
// one's rule (a new Predicate1 op would compile to logical_not on the CPU).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "autograd/vjp.h"
#include "backends/reference/reference_ops.h"
#include "graph_util.h"
#include "ir/error.h"
#include "ir/node.h"
#include "ir/ops.h"
#include "ir/scalar_ops.h"
#include "lowering/complete_plan.h"
#include "lowering/decompose.h"
#include "lowering/loop_ir.h"
#include "lowering/plan.h"
#ifdef LT_HAVE_LLVM
#include "backends/cpu/cpu_backend.h"
#endif
#ifdef LT_HAVE_CUDA
#include "backends/cuda/cuda_codegen.h"
#endif

namespace lt::registry_test {
namespace {

// How fusion hands a primitive of each class to the code generators (lowering/kernel_builder.cc,
// KernelBuilder::emit; lowering/fuse.cc for the library steps and scatter_add). No default: a new
// OpClass does not compile here (-Wswitch -Werror) until someone says how it is lowered.
enum class Form {
  Instr,   // an IKind::Op instruction: cpu emit_elementwise (llvm_ops.cc), cuda instr_expr/op_expr
  Reduce,  // a Reduce stage's reduce_op: cpu emit_reduce_combine, cuda reduce_functor/combine
  Rand,    // an IKind::RandUniform instruction: cpu emit_rand_uniform, cuda lt_rand_f32/f64
  NotOp,   // never an op inside a kernel (`why`)
  None,    // KernelBuilder::emit has no form for the class: a primitive of it cannot be lowered
};
struct Lowering {
  Form form;
  // Where a stage chooses the rule by the class alone (nullptr: every stage looks at the op).
  const char* class_keyed = nullptr;
  const char* why = nullptr;  // NotOp: what lowering does with the op instead
};

Lowering kernel_form(OpClass c) {
  switch (c) {
    case OpClass::Unary:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Logical:
      return {Form::Instr};
    case OpClass::Predicate1:
      return {Form::Instr,
              "the cpu code generator (emit_elementwise emits logical not for the class)"};
    case OpClass::Where:
      return {Form::Instr,
              "the cpu code generator (emit_elementwise emits a select for the class)"};
    case OpClass::Cast:
      return {Form::Instr,
              "both code generators (emit_elementwise and KernelGen::instr_expr convert for the "
              "class)"};
    case OpClass::Reduce:
      return {Form::Reduce};
    case OpClass::Rand:
      return {Form::Rand,
              "fusion (KernelBuilder::emit makes the class a RandUniform: uniform [0, 1))"};
    case OpClass::Leaf:
      return {Form::NotOp, nullptr,
              "a leaf: fusion reads its buffer (Load/LoadScalar), bakes it (Const) or computes "
              "it where it is read (iota: Position)"};
    case OpClass::Reshape:
    case OpClass::Permute:
    case OpClass::Expand:
    case OpClass::Slice:
      return {Form::NotOp, "fusion (KernelBuilder::emit: the class's index arithmetic)",
              "movement: fusion turns it into index arithmetic (symbolic.cc)"};
    case OpClass::Gather:
      return {Form::NotOp, "fusion (KernelBuilder::emit: an indexed load for the class)",
              "an indexed load: the index becomes an IExpr::Value of the source's read"};
    case OpClass::ScatterAdd:
      return {Form::NotOp, nullptr,
              "fusion writes it with an accumulating store (Store::accumulate)"};
    case OpClass::Conv:
      return {
          Form::NotOp, nullptr,
          "a library step (ConvStep: oneDNN, reference loops); the runtime expands it elsewhere"};
    case OpClass::Attention:
      return {Form::NotOp, nullptr,
              "a library step (AttentionStep: flash kernels, reference loops); decompose expands "
              "it elsewhere (expand_attention.cc)"};
    case OpClass::Collective:
      return {Form::NotOp, nullptr,
              "a library step (CollectiveStep: the process group's communicator, distributed/)"};
    case OpClass::Concat:
      return {Form::NotOp, nullptr,
              "placement: fusion writes each operand into its range of the result "
              "(lowering/concat_match.cc)"};
    case OpClass::Matmul:
    case OpClass::AxisUnary:
    case OpClass::LayerNorm:
      return {Form::None};
  }
  return {Form::None};
}

// Whether an op of the class means a function of its operands' elements alone (so ir/scalar_ops.h
// holds it). No default, as in kernel_form. Where, cast and rand are elementwise but not that:
// a selection, a dtype conversion, a counter-based draw (the interpreter has rules of their own).
bool scalar_meaning(OpClass c) {
  switch (c) {
    case OpClass::Unary:
    case OpClass::Predicate1:
    case OpClass::Binary:
    case OpClass::Compare:
    case OpClass::Logical:
      return true;
    case OpClass::Leaf:
    case OpClass::Rand:
    case OpClass::Where:
    case OpClass::Cast:
    case OpClass::Reduce:
    case OpClass::Reshape:
    case OpClass::Permute:
    case OpClass::Expand:
    case OpClass::Matmul:
    case OpClass::AxisUnary:
    case OpClass::LayerNorm:
    case OpClass::Slice:
    case OpClass::Gather:
    case OpClass::ScatterAdd:
    case OpClass::Conv:
    case OpClass::Attention:
    case OpClass::Collective:
    case OpClass::Concat:
      return false;
  }
  return false;
}

// Dtypes a probe tries, the usual one first (the first the code generator accepts ends the probe).
constexpr DType kProbeDTypes[] = {DType::Float32, DType::Int32,   DType::Bool,
                                  DType::Int64,   DType::UInt8,   DType::Int8,
                                  DType::Float64, DType::Float16, DType::BFloat16};
constexpr int64_t kN = 8;

// A kernel as fusion would make it of one op over fresh inputs, with the buffers a plan needs.
struct ProbeKernel {
  loop::Kernel kernel;
  std::vector<BufferSpec> buffers;
};

class KernelMaker {
 public:
  explicit KernelMaker(const std::string& name) { p_.kernel.name = name; }
  int arg(DType t, int64_t n, bool output) {
    BufferSpec b{output ? BufferSpec::Kind::Output : BufferSpec::Kind::Input, t, n};
    if (!output) b.input = inputs_++;
    p_.buffers.push_back(b);
    p_.kernel.args.push_back({static_cast<int>(p_.buffers.size()) - 1, t, n, false, output});
    return static_cast<int>(p_.kernel.args.size()) - 1;
  }
  static int push(loop::Stage& st, loop::Instr in) {
    st.body.push_back(std::move(in));
    return static_cast<int>(st.body.size()) - 1;
  }
  static loop::Index at(std::vector<int64_t> strides) {
    loop::Index ix;
    ix.strides = std::move(strides);
    return ix;
  }
  int load(loop::Stage& st, int a, std::vector<int64_t> strides) {
    loop::Instr in{loop::IKind::Load, Op::Add, p_.kernel.args[a].dtype};
    in.arg = a;
    in.index = at(std::move(strides));
    return push(st, in);
  }
  ProbeKernel& probe() { return p_; }
  loop::Kernel& kernel() { return p_.kernel; }

 private:
  ProbeKernel p_;
  int inputs_ = 0;
};

// The kernel of `info.op` over operands of dtype t, or nothing when ir/infer.cc rejects t for the
// op (the IR never makes such a node, so no generator needs it).
[[maybe_unused]] std::unique_ptr<ProbeKernel> probe_kernel(const OpInfo& info, Form form, DType t) {
  NodeList in;
  Attrs attrs;
  if (form == Form::Rand) {
    in = {testing::param({}, DType::Int64), testing::param({}, DType::Int64)};  // seed, offset
    attrs.ints = {kN};
    attrs.dtype = t;
  } else if (form == Form::Reduce) {
    in = {testing::param({kN, kN}, t)};
    attrs.ints = {1};
  } else {
    for (int i = 0; i < info.arity; ++i)  // ops.def's arity: the operands of the instruction
      in.push_back(testing::param({kN}, info.cls == OpClass::Where && i == 0 ? DType::Bool : t));
    if (info.cls == OpClass::Cast)
      attrs.dtype = t == DType::Float32 ? DType::Int32 : DType::Float32;
  }
  Inferred out;
  try {
    out = infer(info.op, in, attrs);
  } catch (const Error&) {
    return nullptr;
  }
  KernelMaker m("probe_" + std::string(info.name) + "_" + std::string(dtype_name(t)));
  loop::Kernel& k = m.kernel();
  k.outer = {kN};
  loop::Stage body;
  body.kind = loop::StageKind::MapOuter;
  int value;
  if (form == Form::Reduce) {  // [kN, kN] reduced along the inner dim, one result per row
    k.inner = {kN};
    loop::Stage red;
    red.kind = loop::StageKind::Reduce;
    red.reduce_op = info.op;
    const DType acc =
        t == DType::Float16 || t == DType::BFloat16 ? DType::Float32 : t;  // as fusion's
    red.acc_dtype = acc;
    red.reduce_value = m.load(red, m.arg(t, kN * kN, false), {kN, 1});
    k.stages.push_back(std::move(red));
    loop::Instr r{loop::IKind::ReduceResult, Op::Add, acc};
    r.arg = 0;
    value = KernelMaker::push(body, r);
  } else if (form == Form::Rand) {
    loop::Instr seed{loop::IKind::Const, Op::Add, DType::Int64}, offset = seed;
    seed.value = 1234;
    offset.value = 5;
    const int s = KernelMaker::push(body, seed), o = KernelMaker::push(body, offset);
    loop::Instr r{loop::IKind::RandUniform, Op::Rand, out.dtype, s, o};
    r.index = KernelMaker::at({1});
    value = KernelMaker::push(body, r);
  } else {
    std::vector<int> ops;
    for (const NodePtr& n : in) ops.push_back(m.load(body, m.arg(n->dtype, kN, false), {1}));
    loop::Instr op{loop::IKind::Op, info.op, out.dtype};
    if (ops.size() > 0) op.a = ops[0];
    if (ops.size() > 1) op.b = ops[1];
    if (ops.size() > 2) op.c = ops[2];
    value = KernelMaker::push(body, op);
  }
  body.stores.push_back(
      {m.arg(out.dtype, kN, true),
       KernelMaker::at(form == Form::Reduce ? std::vector<int64_t>{1, 0} : std::vector<int64_t>{1}),
       value});
  k.stages.push_back(std::move(body));
  return std::make_unique<ProbeKernel>(std::move(m.probe()));
}

// Whether a code generator (`generate` throws lt::Error NotImplemented where it has no rule) takes
// the op for some dtype the IR accepts; else `why` gets its message for the first such dtype.
template <class F>
bool generator_has_rule(const OpInfo& info, Form form, F&& generate, std::string* why) {
  bool any_dtype = false;
  for (DType t : kProbeDTypes) {
    std::unique_ptr<ProbeKernel> p = probe_kernel(info, form, t);
    if (!p) continue;
    any_dtype = true;
    try {
      generate(*p);
      return true;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::NotImplemented) {  // a malformed probe, not a missing rule
        ADD_FAILURE() << "op " << info.name << ": the probe kernel for " << dtype_name(t)
                      << " is malformed: " << e.what();
        return true;
      }
      if (why->empty()) *why = std::string(dtype_name(t)) + ": " + e.what();
    }
  }
  if (!any_dtype) *why = "ir/infer.cc accepts none of the probed dtypes (the probe needs updating)";
  return false;
}

#ifdef LT_HAVE_LLVM
void compile_on_cpu(const ProbeKernel& p) {
  static const std::unique_ptr<Backend> cpu = make_cpu_backend();
  Plan plan;
  plan.buffers = p.buffers;
  plan.kernels = {p.kernel};
  cpu->compile(completed(plan));
}
#endif
#ifdef LT_HAVE_CUDA
void generate_on_cuda(const ProbeKernel& p) { generate_cuda({p.kernel}); }
#endif

TEST(Registry, EveryOpHasItsRuleInEveryStage) {
  int probed = 0;
  for (const OpInfo& info : all_ops()) {
    const std::string name(info.name);

    // Decomposition: composites have a rule, primitives none.
    if (info.primitive) {
      EXPECT_EQ(decomposition(info.op), nullptr)
          << "op " << name
          << " is a primitive with a decomposition rule, which decompose() never applies";
    } else {
      EXPECT_NE(decomposition(info.op), nullptr)
          << "op " << name << " is a composite with no decomposition rule (lowering fails: "
          << "\"not implemented: decomposition of " << name << "\")";
    }

    // VJP: every differentiable op.
    if (!non_differentiable(info.op)) {
      EXPECT_NE(vjp_rule(info.op), nullptr)
          << "op " << name
          << " has no VJP rule (autograd/vjp.cc) and non_differentiable() does not exempt it";
    }

    // Scalar meaning: the elementwise primitives, in the shape of their arity.
    const ScalarRule sr = scalar_rule(info.op);
    if (info.primitive && scalar_meaning(info.cls)) {
      if (sr.empty()) {
        ADD_FAILURE() << "op " << name
                      << " has no scalar rule (ir/scalar_ops.h): constant folding and "
                      << "the reference interpreter take its meaning from there";
      } else {
        EXPECT_TRUE(info.arity == 1 ? sr.unary() && !sr.binary()
                                    : info.arity == 2 && sr.binary() && !sr.unary())
            << "op " << name << ": its scalar forms (ir/scalar_ops.h) do not match its arity "
            << info.arity;
      }
    } else {
      EXPECT_TRUE(sr.empty()) << "op " << name
                              << " has a scalar rule (ir/scalar_ops.h) that nothing reads "
                              << "(a composite, or a class the interpreter has its own rule for)";
    }

    // Backends see primitives only.
    if (!info.primitive) {
      EXPECT_FALSE(reference_supports(info.op))
          << "op " << name
          << " is a composite with a reference kernel, which never runs (decompose() rewrites it)";
      continue;
    }
    EXPECT_TRUE(reference_supports(info.op)) << "op " << name
                                             << " has no reference kernel (reference_ops.cc; an "
                                                "elementwise op's comes from ir/scalar_ops.h)";

    const Lowering lw = kernel_form(info.cls);
    if (lw.class_keyed) {
      for (const OpInfo& other : all_ops()) {
        EXPECT_TRUE(!other.primitive || other.cls != info.cls || other.op == info.op)
            << "op " << name << ": " << lw.class_keyed
            << " picks the rule by its class alone, which op " << other.name
            << " shares: one of them would run the other's rule";
      }
    }
    if (lw.form == Form::None) {
      ADD_FAILURE() << "op " << name << " is a primitive of a class fusion cannot lower "
                    << "(KernelBuilder::emit: \"not implemented: fusion of " << name << "\")";
      continue;
    }
    if (lw.form == Form::NotOp) continue;  // lw.why: no code generator sees it as an op
    ++probed;
    std::string why;
#ifdef LT_HAVE_LLVM
    EXPECT_TRUE(generator_has_rule(info, lw.form, compile_on_cpu, &why))
        << "op " << name << " has no cpu codegen rule (backends/cpu/llvm_ops.cc): " << why;
#endif
#ifdef LT_HAVE_CUDA
    why.clear();
    EXPECT_TRUE(generator_has_rule(info, lw.form, generate_on_cuda, &why))
        << "op " << name << " has no cuda codegen rule (backends/cuda/cuda_expr.cc): " << why;
#endif
  }
  EXPECT_GT(probed, 0);
}

}  // namespace
}  // namespace lt::registry_test
