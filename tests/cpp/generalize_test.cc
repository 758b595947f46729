// Issue 30's symbolic plans (lowering/generalize.h): a GPT block's training graph (layer norm,
// causal attention through reshapes and transposes, GELU, logits, cross-entropy, gradients)
// lowered once symbolically in its sequence length (and batch) is, at other sizes, the plan that
// lowering makes there: byte for byte at primes of its range, and in every value it computes at
// composite sizes (where lowering may fold an index differently), run on the CPU backend.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>

#include "backends/backend.h"
#include "ir/symbolic_graph.h"
#include "lowering/generalize.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "lowering/size_fields.h"
#include "runtime/indexing.h"
#include "runtime/storage.h"
#include "symbolic_util.h"

namespace lt::generalize_test {
namespace {

using namespace symbolic_test;  // NOLINT(google-build-using-namespace): the shared programs

std::string bytes_of(Plan p) {
  p.grouping.clear();
  return serialize_plan(p);
}

// The CPU backend's library steps, so the plans hold GEMM steps as the runtime's would.
LowerOptions cpu_options() { return get_backend("cpu").lower_options(); }

std::vector<RunInput> inputs_of(const Graph& g) {
  std::vector<RunInput> in(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    if (n->op == Op::Scalar) {
      in[i].scalar = n->scalar;
      in[i].scalar_i = n->scalar_i;
    } else {
      in[i].buffer = static_cast<const Storage*>(n->data.get())->buffer.get();
    }
  }
  return in;
}

// Runs plan a (static, or symbolic through the executable `a_exe` at `symbols`) and static plan
// b of one graph on the CPU backend and compares every output.
void expect_same_values(const Plan& a, const Plan& b, const Graph& g, const std::string& what,
                        Executable* a_exe = nullptr, std::span<const int64_t> symbols = {}) {
  Backend& cpu = get_backend("cpu");
  const auto in = inputs_of(g);
  auto out_a = a_exe ? a_exe->run_symbolic(in, nullptr, symbols) : cpu.compile(a)->run(in, nullptr);
  auto out_b = cpu.compile(b)->run(in, nullptr);
  ASSERT_EQ(a.output_buffers.size(), b.output_buffers.size());
  for (size_t r = 0; r < a.output_buffers.size(); ++r) {
    const BufferSpec& sa = a.buffers[a.output_buffers[r]];
    const BufferSpec& sb = b.buffers[b.output_buffers[r]];
    const int64_t na = a_exe ? numel_at(sa, a.sym.values(symbols)) : sa.numel;
    ASSERT_EQ(na, sb.numel) << what << " root " << r;
    ASSERT_EQ(sa.dtype, DType::Float32);
    const auto* x = static_cast<const float*>(out_a[a.output_buffers[r]]->data());
    const auto* y = static_cast<const float*>(out_b[b.output_buffers[r]]->data());
    for (int64_t i = 0; i < sa.numel; ++i)
      ASSERT_NEAR(x[i], y[i], 1e-5 * (1 + std::fabs(y[i])))
          << what << " root " << r << " [" << i << "]";
  }
}

TEST(GeneralizePlan, GptBlockOverItsSequenceLength) {
  const Block at37 = gpt_block(2, 37, 1);
  const SymbolicGraph sg = sym_of(at37);
  const auto t0 = std::chrono::steady_clock::now();
  GeneralizedPlan gp = generalize_plan(at37.traced.graph, sg, cpu_options());
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(gp.plan) << gp.why_not;
  const Plan& sym = *gp.plan;
  EXPECT_EQ(gp.lowerings, 6);  // at 37 (recording the size choices), a grid of 3, 2 checks
  EXPECT_TRUE(sym.sym.symbolic());
  EXPECT_FALSE(sym.sym.params.empty());
  ASSERT_EQ(sym.sym.ranges.size(), sg.env.num_symbols());
  EXPECT_LE(sym.sym.ranges[0].first, 37);
  EXPECT_GE(sym.sym.ranges[0].second, 16 * 37);
  std::printf("generalized in %.1f ms (%d lowerings), %zu size parameters, range [%lld, %lld]\n",
              ms, gp.lowerings, sym.sym.params.size(),
              static_cast<long long>(sym.sym.ranges[0].first),
              static_cast<long long>(sym.sym.ranges[0].second));
  // At the hints the symbolic plan is the static plan.
  EXPECT_EQ(bytes_of(instantiate_plan(sym, values_at(sg, {37}))),
            bytes_of(lower(at37.traced.graph, cpu_options())));
  bool any_symbolic_kernel = false;
  for (const auto& k : sym.kernels) any_symbolic_kernel = any_symbolic_kernel || k.symbolic();
  EXPECT_TRUE(any_symbolic_kernel);

  // Primes in range: the plan lowering makes there, byte for byte.
  for (int64_t T : {41, 101, 307}) {
    const Block b = gpt_block(2, T, 3);
    EXPECT_EQ(bytes_of(instantiate_plan(sym, values_at(sg, {T}))),
              bytes_of(lower(b.traced.graph, cpu_options())))
        << "T " << T;
  }
  // Composite sizes (lowering may fold their indices otherwise): the same values.
  for (int64_t T : {40, 64, 96}) {
    const Block b = gpt_block(2, T, 4);
    expect_same_values(instantiate_plan(sym, values_at(sg, {T})),
                       lower(b.traced.graph, cpu_options()), b.traced.graph,
                       "T " + std::to_string(T));
  }
  // One CPU executable of the symbolic plan, run at many lengths (its range's ends, primes,
  // composites), gives what each length's own static compile gives.
  auto exe = get_backend("cpu").compile(sym);
  for (int64_t T : {37, 38, 40, 41, 64, 97, 200, 593}) {
    const Block b = gpt_block(2, T, 5);
    const std::vector<int64_t> symbols = values_at(sg, {T});
    expect_same_values(sym, lower(b.traced.graph, cpu_options()), b.traced.graph,
                       "symbolic executable at T " + std::to_string(T), exe.get(), symbols);
  }
}

TEST(GeneralizePlan, BatchAndLengthTogether) {
  const Block at = gpt_block(5, 29, 1);  // B 3 would be 3*C/32: a guard pins it
  const SymbolicGraph sg = sym_of(at, /*batch_dynamic=*/true);
  GeneralizedPlan gp = generalize_plan(at.traced.graph, sg, cpu_options());
  ASSERT_TRUE(gp.plan) << gp.why_not << "\n" << describe(sg);
  // At (5, 29), recording the size choices; a 3 x 3 grid; 2 checking probes. The probes replay
  // the choices (lowering/size_choices.h), so the 16x range holds: split reductions, which would
  // change the structure there, are left whole.
  EXPECT_EQ(gp.lowerings, 12);
  std::printf("B, T: %d lowerings, ranges [%lld, %lld] x [%lld, %lld]\n", gp.lowerings,
              static_cast<long long>(gp.plan->sym.ranges[0].first),
              static_cast<long long>(gp.plan->sym.ranges[0].second),
              static_cast<long long>(gp.plan->sym.ranges[1].first),
              static_cast<long long>(gp.plan->sym.ranges[1].second));
  for (auto [B, T] : {std::pair<int64_t, int64_t>{5, 31}, {7, 53}, {3, 131}}) {
    const Block b = gpt_block(B, T, 5);
    EXPECT_EQ(bytes_of(instantiate_plan(*gp.plan, values_at(sg, {B, T}))),
              bytes_of(lower(b.traced.graph, cpu_options())))
        << "B " << B << " T " << T;
  }
  const Block b = gpt_block(4, 30, 6);
  expect_same_values(instantiate_plan(*gp.plan, values_at(sg, {4, 30})),
                     lower(b.traced.graph, cpu_options()), b.traced.graph, "B 4 T 30");
  auto exe = get_backend("cpu").compile(*gp.plan);
  for (auto [B2, T2] : {std::pair<int64_t, int64_t>{5, 29}, {6, 44}, {67, 127}, {8, 30}}) {
    const Block c = gpt_block(B2, T2, 7);
    expect_same_values(
        *gp.plan, lower(c.traced.graph, cpu_options()), c.traced.graph,
        "symbolic executable at B " + std::to_string(B2) + " T " + std::to_string(T2), exe.get(),
        values_at(sg, {B2, T2}));
  }
}

// A mean along a dynamic dim divides by its size: a constant 1/n of the plan that becomes the
// reciprocal of a size parameter.
TEST(GeneralizePlan, AMeanDividesByASizeParameter) {
  auto traced_mean = [](int64_t n) {
    Tensor x = leaf({n, 6}, 11, false);
    Traced t = collect({(x * x).mean({0}), x.sum()});
    return std::make_pair(t, input_of(t, x));
  };
  auto [at, x_input] = traced_mean(23);
  const std::vector<DynamicDim> dyn = {{x_input, 0}};
  const SymbolicGraph sg = symbolic_graph(at.graph, dyn);
  GeneralizedPlan gp = generalize_plan(at.graph, sg, cpu_options());
  ASSERT_TRUE(gp.plan) << gp.why_not;
  bool reciprocal = false;
  for (const auto& k : gp.plan->kernels)
    for (const auto& st : k.stages)
      for (const auto& in : st.body) reciprocal = reciprocal || in.param_reciprocal;
  EXPECT_TRUE(reciprocal);
  for (int64_t n : {29, 30, 200}) {
    auto [other, unused] = traced_mean(n);
    expect_same_values(instantiate_plan(*gp.plan, values_at(sg, {n})),
                       lower(other.graph, cpu_options()), other.graph, "n " + std::to_string(n));
  }
}

int aliased_buffers(const Plan& p) {
  int n = 0;
  for (const BufferSpec& b : p.buffers) n += b.alias >= 0;
  return n;
}

// A DDP bucket under a dynamic batch: the gradients' sizes, and so their offsets in the concat,
// are the same at every batch size, so the symbolic plan computes them in place as a static one
// does; it is byte for byte the static plan at other batches and runs to the same values.
TEST(GeneralizePlan, AConcatOfFixedSizePiecesStaysInPlace) {
  auto traced = [](int64_t batch) {
    Tensor x = leaf({batch, 64}, 13, false);
    Tensor bucket = concat({(x * x).sum({0}), x.sum({0}), x.exp().sum({0})});  // 256 B each
    Traced t = collect({bucket * 0.5});
    return std::make_pair(t, input_of(t, x));
  };
  auto [at, x_input] = traced(17);
  const std::vector<DynamicDim> dyn = {{x_input, 0}};
  const SymbolicGraph sg = symbolic_graph(at.graph, dyn);
  const GeneralizedPlan gp = generalize_plan(at.graph, sg, cpu_options());
  ASSERT_TRUE(gp.plan) << gp.why_not;
  EXPECT_EQ(aliased_buffers(*gp.plan), 3) << gp.plan->grouping;
  auto exe = get_backend("cpu").compile(*gp.plan);
  for (int64_t b : {19, 40, 211}) {
    auto [other, unused] = traced(b);
    const Plan static_plan = lower(other.graph, cpu_options());
    EXPECT_EQ(aliased_buffers(static_plan), 3);
    EXPECT_EQ(bytes_of(instantiate_plan(*gp.plan, values_at(sg, {b}))), bytes_of(static_plan))
        << "batch " << b;
    const std::vector<int64_t> symbols = values_at(sg, {b});
    expect_same_values(*gp.plan, static_plan, other.graph, "batch " + std::to_string(b), exe.get(),
                       symbols);
  }
}

TEST(GeneralizePlan, SaysWhyNot) {
  // Every input dim static: nothing to generalize.
  const Block at = gpt_block(2, 37, 1);
  GeneralizedPlan none =
      generalize_plan(at.traced.graph, symbolic_graph(at.traced.graph, {}), cpu_options());
  EXPECT_FALSE(none.plan);
  EXPECT_EQ(none.why_not, "no free size symbol");
  EXPECT_EQ(none.lowerings, 0);
}

TEST(GeneralizePlan, InstantiatingAStaticPlanChangesNothing) {
  const Block at = gpt_block(2, 9, 1);
  Plan p = lower(at.traced.graph, cpu_options());
  EXPECT_EQ(bytes_of(instantiate_plan(p, {})), bytes_of(p));
}

}  // namespace
}  // namespace lt::generalize_test
