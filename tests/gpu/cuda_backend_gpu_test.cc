// The CUDA backend on a GPU: the hand-built kernels of cuda_test_kernels.h and lowered graphs run
// through make_cuda_backend() and are compared with host computations written here (float64 math,
// rounded to the output dtype). Not built in CI (no GPU there): tests/gpu/run.sh builds and runs
// it.

#include <gtest/gtest.h>

#include "tests/gpu/cuda_gpu_fixture.h"

namespace lt {
namespace {

using namespace cudagpu;

// ---- hand-built kernels ----

TEST_F(CudaGpu, BiasAddBroadcastVectorAndTail) {
  for (auto [n, m] : {std::pair<int64_t, int64_t>{64, 256}, {3, 5}, {1, 1}, {1000, 37}}) {
    auto x = random_values(DType::Float32, n * m, 1), b = random_values(DType::Float32, m, 2);
    int launches = 0;
    auto out = run(bias_add(n, m),
                   {{make_array(DType::Float32, x)}, {make_array(DType::Float32, b)}}, &launches);
    EXPECT_EQ(launches, 1);
    std::vector<double> want(x.size());
    for (int64_t i = 0; i < n * m; ++i) want[i] = round_to(DType::Float32, x[i] + b[i % m]);
    expect_near(out.at(0), want, 0, 0, "bias_add");
  }
}

TEST_F(CudaGpu, ElementwiseInEveryFloatDtype) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    for (int64_t n : {1, 7, 4099}) {
      auto x = random_values(t, n, 3);
      auto out = run(scale_1d(n, t), {{make_array(t, x)}});
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = round_to(t, std::sin(x[i]) * 2.5 + x[i]);
      expect_near(out.at(0), want, 2 * rtol_of(t), 1e-7, "scale " + std::string(dtype_name(t)));
    }
  }
}

TEST_F(CudaGpu, GeneralIndexTranspose) {
  const int64_t r = 37, c = 53;
  auto x = random_values(DType::Float32, r * c, 4);
  auto out = run(transpose_general(r, c), {{make_array(DType::Float32, x)}});
  std::vector<double> want(x.size());
  for (int64_t f = 0; f < r * c; ++f) want[f] = x[(f % r) * c + f / r];
  expect_near(out.at(0), want, 0, 0, "transpose");
}

TEST_F(CudaGpu, RowReductionsInEveryMapping) {
  struct Case {
    int64_t n, m;
  };
  for (auto c : {Case{4096, 8}, Case{300, 100}, Case{64, 4096}, Case{16, 10000}, Case{4, 1 << 16},
                 Case{5, 0}}) {
    for (Op rop : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
      // Products stay finite with factors 2*x near 1.
      auto x = rop == Op::ReduceProd ? random_values(DType::Float32, c.n * c.m, 5, 0.49, 0.51)
                                     : random_values(DType::Float32, c.n * c.m, 5);
      const double s = -0.75;
      auto out = run(row_reduce(c.n, c.m, rop), {{make_array(DType::Float32, x)}, scalar_in(s)});
      std::vector<double> want(static_cast<size_t>(c.n)), atol(static_cast<size_t>(c.n));
      for (int64_t i = 0; i < c.n; ++i) {
        double acc = rop == Op::ReduceSum    ? 0
                     : rop == Op::ReduceProd ? 1
                     : rop == Op::ReduceMax  ? -INFINITY
                                             : INFINITY;
        double mag = 0;
        for (int64_t j = 0; j < c.m; ++j) {
          double v = 2 * x[i * c.m + j];
          mag += std::fabs(v);
          if (rop == Op::ReduceSum) acc += v;
          if (rop == Op::ReduceProd) acc *= v;
          if (rop == Op::ReduceMax) acc = std::max(acc, v);
          if (rop == Op::ReduceMin) acc = std::min(acc, v);
        }
        want[i] = round_to(DType::Float32, acc + s);
        // Relative to the reduction's magnitude, not the result's: acc + s may cancel.
        atol[i] = (rop == Op::ReduceSum    ? 1e-6 * mag
                   : rop == Op::ReduceProd ? 2e-5 * std::fabs(acc)
                                           : 0) +
                  1e-6;
      }
      const std::string what = "row " + std::string(op_name(rop)) + " " + std::to_string(c.n) +
                               "x" + std::to_string(c.m);
      ASSERT_EQ(out.at(0).size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        double rtol = rop == Op::ReduceProd ? 1e-4 : 1e-6;
        if (std::isinf(want[i])) {
          EXPECT_EQ(out[0][i], want[i]) << what << " at " << i;
        } else {
          EXPECT_NEAR(out[0][i], want[i], atol[i] + rtol * std::fabs(want[i]))
              << what << " at " << i;
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

TEST_F(CudaGpu, ColumnSums) {
  // Tiles, a partial last tile, block-per-column (few columns), thread-per-column (tiny columns).
  for (auto [n, m] : {std::pair<int64_t, int64_t>{512, 4096}, {100, 1031}, {4096, 8}, {3, 2000}}) {
    auto x = random_values(DType::Float32, n * m, 6);
    auto out = run(column_sum(n, m), {{make_array(DType::Float32, x)}});
    std::vector<double> want(static_cast<size_t>(m), 0.0);
    double mag = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j)
        want[j] += x[i * m + j], mag = std::max(mag, std::fabs(x[i * m + j]));
    expect_near(out.at(0), want, 1e-5, 1e-6 * mag * static_cast<double>(n), "column_sum");
  }
}

TEST_F(CudaGpu, SoftmaxRowKernel) {
  struct Case {
    int64_t n, m;
    DType t;
  };
  for (auto c : {Case{128, 4096, DType::Float32}, Case{1000, 96, DType::Float32},
                 Case{64, 10, DType::Float32}, Case{33, 3000, DType::Float16},
                 Case{33, 3000, DType::BFloat16}, Case{9, 700, DType::Float64},
                 Case{4, 20000, DType::Float32}}) {  // the last: too long to cache in registers
    auto x = random_values(c.t, c.n * c.m, 7, -6, 6);
    auto out = run(softmax_rows(c.n, c.m, c.t), {{make_array(c.t, x)}});
    auto want = host_softmax(x, c.n, c.m);
    for (auto& w : want) w = round_to(c.t, w);
    // The kernel computes in float32 (also for float64 input: acc is float32 in this kernel).
    double rtol = c.t == DType::Float32 || c.t == DType::Float64 ? 2e-5 : 2 * rtol_of(c.t);
    expect_near(out.at(0), want, rtol, 1e-9,
                "softmax " + std::to_string(c.n) + "x" + std::to_string(c.m) + " " +
                    std::string(dtype_name(c.t)));
  }
}

TEST_F(CudaGpu, LayerNormThroughATempBuffer) {
  const int64_t n = 96, m = 1024;
  auto x = random_values(DType::Float32, n * m, 8, -3, 5);
  int launches = 0;
  auto out = run(layer_norm_two_kernels(n, m), {{make_array(DType::Float32, x)}}, &launches);
  EXPECT_EQ(launches, 2);
  std::vector<double> want(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < m; ++j) mean += x[i * m + j];
    mean /= m;
    for (int64_t j = 0; j < m; ++j) var += (x[i * m + j] - mean) * (x[i * m + j] - mean);
    var /= m;
    for (int64_t j = 0; j < m; ++j) want[i * m + j] = (x[i * m + j] - mean) / std::sqrt(var + 1e-5);
  }
  expect_near(out.at(0), want, 1e-5, 2e-5, "layer_norm");
}

TEST_F(CudaGpu, EveryCast) {
  std::vector<double> fvals = {0.0,   -0.0,   1.0,   -1.0,  2.7,      -2.7,      0.5,       -0.5,
                               1.5,   255.0,  256.0, 300.5, -129.5,   65504.0,   65520.0,   1e-8,
                               3.0e9, -3.0e9, 1e10,  NAN,   INFINITY, -INFINITY, 123456.789};
  for (DType from : all_dtypes()) {
    std::vector<double> v;
    if (is_floating(from)) {
      for (double f : fvals) v.push_back(round_to(from, f));
    } else {
      v = random_values(from, 64, 9);
      v.push_back(0);
      v.push_back(1);
    }
    HostArray in = make_array(from, v);
    auto out = run(cast_all(from, in.n), {{in}});
    std::vector<double> src = to_doubles(in);
    for (size_t k = 0; k < all_dtypes().size(); ++k) {
      DType to = all_dtypes()[k];
      // The reference conversions (ir/half.h): float -> int truncates via int64, out-of-range and
      // NaN give 0; integer -> integer wraps; -> bool is != 0.
      std::vector<double> want(src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        char buf[8];
        if (is_floating(from))
          store_from_double(buf, to, src[i]);
        else
          store_from_int(buf, to, load_as_int(in.bytes.data() + i * dtype_size(from), from));
        want[i] = load_as_double(buf, to);
      }
      expect_near(out.at(k), want, 0, 0,
                  std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
    }
  }
}

TEST_F(CudaGpu, RandUniformIsBitExact) {
  const int64_t n = 10007;
  const DType ts[4] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  for (auto [seed, offset] : {std::pair<int64_t, int64_t>{1234567, 42}, {-5, 1ll << 40}, {0, 0}}) {
    std::vector<Input> in = {Input{}, Input{}};
    in[0].scalar_i = seed, in[1].scalar_i = offset;
    in[0].scalar = static_cast<double>(seed), in[1].scalar = static_cast<double>(offset);
    auto out = run(rand_all(n), in);
    for (int k = 0; k < 4; ++k) {
      std::vector<double> want(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i)
        want[i] = round_to(ts[k], loop::rand_uniform(seed, offset, i, k % 2, ts[k]));
      expect_near(out.at(k), want, 0, 0, "rand " + std::string(dtype_name(ts[k])));
    }
  }
}

TEST_F(CudaGpu, ScalarsChangeWithoutRecompiling) {
  const int64_t n = 1000;
  auto x = random_values(DType::Float32, n, 10);
  Plan plan = scalar_args(n);
  auto exe = backend_->compile(plan);
  auto xb = backend_->allocate(n * 4);
  HostArray xa = make_array(DType::Float32, x);
  backend_->copy_from_host(*xb, xa.bytes.data(), xa.bytes.size());
  for (auto [a, b, flag] :
       {std::tuple<double, int64_t, int64_t>{1.5, -3, 1}, {0.25, 7, 1}, {9.0, 1, 0}}) {
    std::vector<RunInput> ri(4);
    ri[0].buffer = xb.get();
    ri[1].scalar = a;
    ri[2].scalar_i = b;
    ri[2].scalar = static_cast<double>(b);
    ri[3].scalar_i = flag;
    ri[3].scalar = static_cast<double>(flag);
    auto outs = exe->run(ri, nullptr);
    std::vector<float> got(n);
    backend_->copy_to_host(got.data(), *outs.at(plan.output_buffers[0]), n * 4);
    for (int64_t i = 0; i < n; ++i) {
      // Rounded after each op: the kernels are compiled without FMA contraction.
      volatile float prod = static_cast<float>(x[i]) * static_cast<float>(a);
      float want = flag ? prod + static_cast<float>(b) : static_cast<float>(x[i]);
      ASSERT_EQ(got[i], want) << "a=" << a << " b=" << b << " flag=" << flag << " at " << i;
    }
  }
}

double host_unary(Op op, double x) {
  switch (op) {
    case Op::Neg:
      return -x;
    case Op::Exp:
      return std::exp(x);
    case Op::Log:
      return std::log(x);
    case Op::Sqrt:
      return std::sqrt(x);
    case Op::Sin:
      return std::sin(x);
    case Op::Cos:
      return std::cos(x);
    case Op::Tanh:
      return std::tanh(x);
    case Op::Erf:
      return std::erf(x);
    case Op::Abs:
      return std::fabs(x);
    case Op::Floor:
      return std::floor(x);
    case Op::Recip:
      return 1 / x;
    default:
      return NAN;
  }
}

TEST_F(CudaGpu, UnaryOps) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    auto x = random_values(t, 2000, 11, -4, 4);
    for (double s :
         std::initializer_list<double>{0.0, -0.0, 1.0, -1.0, NAN, INFINITY, -INFINITY, 1e-3, 20.0})
      x.push_back(round_to(t, s));
    auto out = run(unary_ops(static_cast<int64_t>(x.size()), t), {{make_array(t, x)}});
    for (size_t k = 0; k < float_unary_ops().size(); ++k) {
      Op op = float_unary_ops()[k];
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) want[i] = round_to(t, host_unary(op, x[i]));
      expect_near(out.at(k), want, 2 * rtol_of(t), t == DType::Float64 ? 1e-15 : 1e-7,
                  std::string(op_name(op)) + " " + std::string(dtype_name(t)));
    }
    std::vector<double> want_not(x.size());
    for (size_t i = 0; i < x.size(); ++i) want_not[i] = x[i] == 0;
    expect_near(out.back(), want_not, 0, 0, "logical_not");
  }
}

double host_binary(Op op, DType t, double a, double b) {
  if (!is_floating(t) && t != DType::Bool) {
    // Integer arithmetic wraps: compute in uint64 and narrow as the device does.
    uint64_t ua = static_cast<uint64_t>(static_cast<int64_t>(a)),
             ub = static_cast<uint64_t>(static_cast<int64_t>(b));
    uint64_t r = 0;
    switch (op) {
      case Op::Add:
        r = ua + ub;
        break;
      case Op::Sub:
        r = ua - ub;
        break;
      case Op::Mul:
        r = ua * ub;
        break;
      case Op::Maximum:
        return std::max(a, b);
      case Op::Minimum:
        return std::min(a, b);
      default:
        return NAN;
    }
    return wrap_int(t, static_cast<int64_t>(r));
  }
  switch (op) {
    case Op::Add:
      return a + b;
    case Op::Sub:
      return a - b;
    case Op::Mul:
      return a * b;
    case Op::Div:
      return a / b;
    case Op::Pow:
      return std::pow(a, b);
    case Op::Maximum:
      return (std::isnan(a) || std::isnan(b)) ? NAN : std::max(a, b);
    case Op::Minimum:
      return (std::isnan(a) || std::isnan(b)) ? NAN : std::min(a, b);
    default:
      return NAN;
  }
}

TEST_F(CudaGpu, BinaryOpsOfEveryDtype) {
  for (DType t : all_dtypes()) {
    auto x = random_values(t, 3000, 12), y = random_values(t, 3000, 13);
    if (is_floating(t)) {
      // NaN, infinities, zeros and equal pairs.
      const double sp[][2] = {{NAN, 1}, {1, NAN},  {INFINITY, 1}, {-INFINITY, INFINITY},
                              {0, 0},   {0, -0.0}, {2, 2},        {-8, 1.0 / 3},
                              {0, -1},  {2, 0.5}};
      for (auto& p : sp) x.push_back(round_to(t, p[0])), y.push_back(round_to(t, p[1]));
    } else if (t != DType::Bool) {
      x.push_back(5), y.push_back(5);
    }
    auto out = run(binary_ops(static_cast<int64_t>(x.size()), t),
                   {{make_array(t, x)}, {make_array(t, y)}});
    size_t k = 0;
    for (Op op : binary_ops_for(t)) {
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        double r = host_binary(op, t, x[i], y[i]);
        want[i] = is_floating(t) ? round_to(t, r) : r;
      }
      double rtol = op == Op::Pow ? 4 * rtol_of(t) : 2 * rtol_of(t);
      expect_near(out.at(k++), want, rtol, t == DType::Float64 ? 1e-15 : 1e-7,
                  std::string(op_name(op)) + " " + std::string(dtype_name(t)));
    }
    for (Op op : compare_ops()) {
      std::vector<double> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        double a = x[i], b = y[i];
        want[i] = op == Op::Eq   ? a == b
                  : op == Op::Ne ? a != b
                  : op == Op::Lt ? a < b
                  : op == Op::Le ? a <= b
                  : op == Op::Gt ? a > b
                                 : a >= b;
      }
      expect_near(out.at(k++), want, 0, 0,
                  std::string(op_name(op)) + " " + std::string(dtype_name(t)));
    }
    if (!is_floating(t) && t != DType::Bool) {
      std::vector<double> neg(x.size()), abs(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        neg[i] = wrap_int(
            t, static_cast<int64_t>(0ull - static_cast<uint64_t>(static_cast<int64_t>(x[i]))));
        abs[i] = x[i] < 0 ? neg[i] : x[i];
      }
      expect_near(out.at(k++), neg, 0, 0, "neg " + std::string(dtype_name(t)));
      expect_near(out.at(k++), abs, 0, 0, "abs " + std::string(dtype_name(t)));
    }
    if (t == DType::Bool) {
      std::vector<double> a(x.size()), o(x.size());
      for (size_t i = 0; i < x.size(); ++i) a[i] = x[i] && y[i], o[i] = x[i] || y[i];
      expect_near(out.at(k++), a, 0, 0, "and");
      expect_near(out.at(k++), o, 0, 0, "or");
    }
  }
}

TEST_F(CudaGpu, ReductionsOfEveryDtype) {
  for (DType t : all_dtypes()) {
    for (Op rop : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
      if (t == DType::Bool && rop == Op::ReduceSum) continue;
      for (int64_t m : {int64_t{5}, int64_t{300}, int64_t{5000}}) {
        const int64_t n = 24;
        auto x = rop == Op::ReduceProd && is_floating(t) ? random_values(t, n * m, 14, 0.999, 1.001)
                                                         : random_values(t, n * m, 14);
        if (is_floating(t) && rop != Op::ReduceProd)
          x[3 * m + m / 2] = NAN;  // row 3 propagates NaN
        auto out = run(plain_reduce(n, m, rop, t), {{make_array(t, x)}});
        DType acc = (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
        std::vector<double> want(static_cast<size_t>(n));
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
          if (is_floating(t)) {
            double a = rop == Op::ReduceSum    ? 0
                       : rop == Op::ReduceProd ? 1
                       : rop == Op::ReduceMax  ? -INFINITY
                                               : INFINITY;
            double mag = 0;
            for (int64_t j = 0; j < m; ++j) {
              double v = x[i * m + j];
              mag += std::fabs(v);
              if (rop == Op::ReduceSum) a += v;
              if (rop == Op::ReduceProd) a *= v;
              if (rop == Op::ReduceMax) a = std::isnan(a) || std::isnan(v) ? NAN : std::max(a, v);
              if (rop == Op::ReduceMin) a = std::isnan(a) || std::isnan(v) ? NAN : std::min(a, v);
            }
            want[i] = round_to(t, a);
            worst = std::max(worst, mag);
          } else {
            // Integer sums and products wrap in the accumulator's width: the order of a parallel
            // reduction does not change them (arithmetic mod 2^k).
            uint64_t a = rop == Op::ReduceProd ? 1 : 0;
            double mx = -INFINITY, mn = INFINITY;
            for (int64_t j = 0; j < m; ++j) {
              double v = x[i * m + j];
              uint64_t u = static_cast<uint64_t>(static_cast<int64_t>(v));
              if (rop == Op::ReduceSum) a += u;
              if (rop == Op::ReduceProd) a *= u;
              mx = std::max(mx, v), mn = std::min(mn, v);
            }
            want[i] = rop == Op::ReduceMax   ? mx
                      : rop == Op::ReduceMin ? mn
                      : t == DType::Bool     ? static_cast<double>(a != 0)
                                             : wrap_int(t, static_cast<int64_t>(a));
            if (m == 0) want[i] = round_to(t, rop == Op::ReduceProd ? 1 : 0);
          }
        }
        const double rtol =
            is_floating(t) ? 2 * rtol_of(t) + (rop == Op::ReduceProd ? 1e-4 : 0) : 0;
        const double atol = is_floating(t) && rop == Op::ReduceSum ? 2 * rtol_of(acc) * worst : 0;
        expect_near(out.at(0), want, rtol, atol,
                    std::string(op_name(rop)) + " " + std::string(dtype_name(t)) +
                        " m=" + std::to_string(m));
      }
    }
  }
}

// ---- memory ----

TEST_F(CudaGpu, CachingAllocatorReusesBlocks) {
  CudaBackend& c = cuda();
  c.empty_cache();
  auto before = c.memory_stats();
  void* first;
  {
    auto b = backend_->allocate(1000);
    first = b->data();
    EXPECT_FALSE(b->on_host());
    EXPECT_EQ(b->bytes(), 1000u);
    EXPECT_EQ(c.memory_stats().allocated_bytes, before.allocated_bytes + 1024);
  }
  EXPECT_EQ(c.memory_stats().cached_bytes, 1024u);
  {
    auto b = backend_->allocate(900);  // same size class
    EXPECT_EQ(b->data(), first);
    EXPECT_EQ(c.memory_stats().cache_hits, before.cache_hits + 1);
  }
  {
    auto big = backend_->allocate((3 << 20) + 1);
    EXPECT_EQ(c.memory_stats().allocated_bytes, before.allocated_bytes + (size_t(4) << 20));
  }
  c.empty_cache();
  EXPECT_EQ(c.memory_stats().cached_bytes, 0u);
  EXPECT_GE(c.memory_stats().peak_allocated_bytes, size_t(4) << 20);
}

// A request that names the block it held last time gets that block back when it is free, even
// when another free block of its size class was released later (the executables ask for their
// last run's output addresses: cuda_graph.h's replays then need no recapture).
TEST_F(CudaGpu, CachingAllocatorGivesBackThePreferredBlock) {
  CudaCachingAllocator a(CudaDevice::open(0));
  const CUdeviceptr p1 = a.allocate(1000), p2 = a.allocate(1000);
  ASSERT_NE(p1, p2);
  a.release(p1, 1000);
  a.release(p2, 1000);  // the bin's most recent block: taken by a plain request
  EXPECT_EQ(a.allocate(900, p1), p1);
  EXPECT_EQ(a.stats().preferred_hits, 1);
  EXPECT_EQ(a.allocate(900, p1), p2);  // p1 is in use: any block of the class
  a.release(p1, 1000);
  a.release(p2, 1000);
  // A preferred block of another size class is not taken; a null preference is no preference.
  const CUdeviceptr big = a.allocate(3 << 20);
  a.release(big, 3 << 20);
  const CUdeviceptr q = a.allocate(1000, big);
  EXPECT_EQ(q, p2);
  EXPECT_EQ(a.allocate(1000, 0), p1);  // the remaining block of the class
  EXPECT_EQ(a.stats().preferred_hits, 1);
  a.release(q, 1000);
  a.release(p1, 1000);
}

TEST_F(CudaGpu, OutOfMemoryIsAClearError) {
  try {
    auto b = backend_->allocate(size_t(1) << 50);  // 1 PiB
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory"), std::string::npos) << e.what();
  }
  auto ok = backend_->allocate(1 << 20);  // still usable
  EXPECT_TRUE(ok->data());
}

TEST_F(CudaGpu, CopiesAndBadBuffersAreChecked) {
  std::vector<int32_t> src(1000), dst(1000, 0);
  for (int i = 0; i < 1000; ++i) src[i] = i * 7 - 3;
  auto b = backend_->allocate(4000);
  backend_->copy_from_host(*b, src.data(), 4000);
  backend_->copy_to_host(dst.data(), *b, 4000);
  EXPECT_EQ(src, dst);
  EXPECT_THROW(backend_->copy_from_host(*b, src.data(), 4004), Error);
  HostBuffer host(16);
  EXPECT_THROW(backend_->copy_from_host(host, src.data(), 16), Error);
  // A host buffer as a graph input is rejected with a message, not a crash.
  Plan plan = scale_1d(4, DType::Float32);
  auto exe = backend_->compile(plan);
  std::vector<RunInput> ri(1);
  ri[0].buffer = &host;
  EXPECT_THROW(exe->run(ri, nullptr), Error);
  ri[0].buffer = nullptr;
  EXPECT_THROW(exe->run(ri, nullptr), Error);
}

}  // namespace
}  // namespace lt
