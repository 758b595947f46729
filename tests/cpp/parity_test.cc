// The whole pipeline (trace -> lower -> fuse -> compile -> run) on the compiled CPU backend, lazy
// and eager, against the reference interpreter, on random inputs with broadcasting shapes.
#include <gtest/gtest.h>

#include <functional>

#include "test_util.h"

namespace lt {
namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs fn on the same host data on lazy:reference (the oracle), lazy:cpu and eager cpu.
void check(const std::string& what, const std::vector<Shape>& shapes, const Fn& fn,
           double rtol = 1e-5, float lo = -2.f, float hi = 2.f) {
  std::vector<std::vector<float>> data;
  for (size_t i = 0; i < shapes.size(); ++i)
    data.push_back(testing::random_floats(numel(shapes[i]), 100 + i, lo, hi));
  auto run = [&](const Device& d) {
    std::vector<Tensor> in;
    for (size_t i = 0; i < shapes.size(); ++i)
      in.push_back(from_host(data[i].data(), DType::Float32, shapes[i], d));
    Tensor r = fn(in);
    return std::make_pair(r.shape(), r.to_vector<double>());
  };
  auto [ref_shape, ref] = run(Device::parse("lazy:reference"));
  for (const char* dev : {"lazy:cpu", "cpu"}) {
    auto [shape, got] = run(Device::parse(dev));
    EXPECT_EQ(shape, ref_shape) << what << " on " << dev;
    testing::expect_close(got, ref, rtol, 1e-6, what + " on " + dev);
  }
}

const std::vector<std::pair<Shape, Shape>> kBroadcastPairs = {
    {{5}, {5}},   {{3, 1}, {4}},          {{2, 3, 4}, {3, 1}}, {{1}, {6}},
    {{}, {2, 2}}, {{4, 1, 3}, {1, 5, 1}}, {{7, 1}, {7, 1}}};

TEST(Parity, Unary) {
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
      {"exp", [](auto& x) { return x.exp(); }},
      {"sin", [](auto& x) { return x.sin(); }},
      {"cos", [](auto& x) { return x.cos(); }},
      {"tanh", [](auto& x) { return x.tanh(); }},
      {"sigmoid", [](auto& x) { return x.sigmoid(); }},
      {"relu", [](auto& x) { return x.relu(); }},
      {"abs", [](auto& x) { return x.abs(); }},
      {"neg", [](auto& x) { return -x; }},
      {"erf", [](auto& x) { return x.erf(); }},
      {"floor", [](auto& x) { return x.floor(); }},
      {"log", [](auto& x) { return x.abs().log(); }},
      {"sqrt", [](auto& x) { return x.abs().sqrt(); }},
      {"rsqrt", [](auto& x) { return (x.abs() + 0.1).rsqrt(); }},
      {"reciprocal", [](auto& x) { return (x.abs() + 0.1).reciprocal(); }},
  };
  for (auto& [name, f] : ops)
    for (Shape s : {Shape{}, Shape{1}, Shape{17}, Shape{3, 1, 5}})
      check(name + shape_str(s), {s}, [&](auto& in) { return f(in[0]); });
}

TEST(Parity, BinaryWithBroadcasting) {
  std::vector<std::pair<std::string, Fn>> ops = {
      {"add", [](auto& in) { return in[0] + in[1]; }},
      {"sub", [](auto& in) { return in[0] - in[1]; }},
      {"mul", [](auto& in) { return in[0] * in[1]; }},
      {"div", [](auto& in) { return in[0] / in[1]; }},
      {"pow", [](auto& in) { return pow(in[0].abs() + 0.5, in[1]); }},
      {"maximum", [](auto& in) { return maximum(in[0], in[1]); }},
      {"minimum", [](auto& in) { return minimum(in[0], in[1]); }},
      {"lt", [](auto& in) { return cast(lt(in[0], in[1]), DType::Float32); }},
      {"ge", [](auto& in) { return cast(ge(in[0], in[1]), DType::Float32); }},
      {"eq", [](auto& in) { return cast(eq(in[0].floor(), in[1].floor()), DType::Float32); }},
      {"where", [](auto& in) { return where(gt(in[0], 0.0), in[0] * 2, in[1]); }},
      {"and",
       [](auto& in) { return cast(logical_and(gt(in[0], 0.0), lt(in[1], 0.5)), DType::Float32); }},
  };
  for (auto& [name, f] : ops)
    for (auto& [a, b] : kBroadcastPairs) check(name + shape_str(a) + shape_str(b), {a, b}, f, 1e-5);
}

TEST(Parity, Reductions) {
  Shape s = {3, 4, 5};
  for (std::vector<int64_t> dims : {std::vector<int64_t>{}, {0}, {1}, {2}, {-1}, {0, 2}, {1, 2}})
    for (bool keep : {false, true}) {
      std::string d = shape_str(dims) + (keep ? "k" : "");
      check("sum" + d, {s}, [&](auto& in) { return in[0].sum(dims, keep); });
      check("mean" + d, {s}, [&](auto& in) { return in[0].mean(dims, keep); });
      check("amax" + d, {s}, [&](auto& in) { return in[0].amax(dims, keep); });
      check("amin" + d, {s}, [&](auto& in) { return in[0].amin(dims, keep); });
      check(
          "prod" + d, {s}, [&](auto& in) { return in[0].prod(dims, keep); }, 1e-4, 0.5f, 1.5f);
    }
}

TEST(Parity, FusedExpressions) {
  check("issue2", {{32, 64}, {64}, {64}},
        [](auto& in) { return ((in[0] * in[1] + in[2]).sin() * 2).relu().sum({1}); });
  check("softmax", {{16, 33}}, [](auto& in) {
    Tensor e = (in[0] - in[0].amax({1}, true)).exp();
    return e / e.sum({1}, true);
  });
  check(
      "layer_norm", {{8, 40}},
      [](auto& in) {
        Tensor xc = in[0] - in[0].mean({-1}, true);
        return xc * ((xc * xc).mean({-1}, true) + 1e-5).rsqrt();
      },
      1e-4);
  check("reduce_then_broadcast_elsewhere", {{4, 8}, {4, 3}}, [](auto& in) {
    return in[0].sum({1}).reshape({4, 1}) + in[1];
  });
  check(
      "chain20", {{1000}},
      [](auto& in) {
        Tensor x = in[0];
        for (int i = 0; i < 20; ++i) x = x + x.sin();
        return x;
      },
      1e-4);
  check("column_sum", {{64, 48}}, [](auto& in) { return (in[0] * in[0]).sum({0}); });
}

TEST(Parity, Movement) {
  check("permute_reshape", {{8, 4}, {32}}, [](auto& in) {
    return in[0].permute({1, 0}).reshape({32}) * 2 + in[1];
  });
  check("expand_transpose", {{3, 1, 5}}, [](auto& in) {
    return in[0].expand({3, 4, 5}).transpose(0, 2).reshape({5, 12});
  });
  check("unsqueeze_squeeze", {{6, 2}}, [](auto& in) {
    return in[0].unsqueeze(1).expand({6, 3, 2}).flatten() + 1;
  });
  check("reshape_of_permuted_reduce", {{4, 6, 5}}, [](auto& in) {
    return in[0].permute({2, 0, 1}).reshape({5, 24}).sum({1});
  });
}

TEST(Parity, Matmul) {
  check(
      "mm", {{7, 9}, {9, 5}}, [](auto& in) { return matmul(in[0], in[1]); }, 1e-4);
  check(
      "bmm", {{3, 4, 6}, {3, 6, 2}}, [](auto& in) { return matmul(in[0], in[1]); }, 1e-4);
  check(
      "broadcast_mm", {{2, 1, 4, 6}, {3, 6, 2}}, [](auto& in) { return matmul(in[0], in[1]); },
      1e-4);
  check(
      "mv", {{4, 6}, {6}}, [](auto& in) { return matmul(in[0], in[1]); }, 1e-4);
  check(
      "vv", {{6}, {6}}, [](auto& in) { return matmul(in[0], in[1]); }, 1e-4);
  check(
      "linear_relu", {{8, 16}, {16, 4}, {4}},
      [](auto& in) { return (matmul(in[0], in[1]) + in[2]).relu(); }, 1e-4);
}

TEST(Parity, DtypesAndCasts) {
  for (DType t : {DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64,
                  DType::Int8, DType::UInt8, DType::Bool}) {
    std::string n(dtype_name(t));
    check(
        "roundtrip_" + n, {{23}},
        [&](auto& in) { return cast(cast(in[0] * 50, t), DType::Float32); }, 1e-5, 0.f, 2.f);
    check(
        "arith_" + n, {{4, 5}},
        [&](auto& in) {
          Tensor a = cast(in[0] * 10, t), b = cast(in[0].sin() * 10, t);
          return cast(is_bool(t) ? logical_or(a, b) : a * b + a, DType::Float64);
        },
        1e-2, 0.f, 2.f);  // non-negative: float -> uint8 of a negative value is undefined
  }
}

}  // namespace
}  // namespace lt
