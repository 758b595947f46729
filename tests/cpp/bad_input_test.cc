// Bad input never crashes (issue 9): a table of wrong shapes, dtypes, devices, indices, sizes and
// autograd misuse, each on the eager and the lazy device. Every case must throw lt::Error of the
// PyTorch-equivalent kind whose message names the op, and afterwards the same session must still
// run a correct step and get the right answer.
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>

#include "autograd/autograd.h"
#include "nn/nn.h"
#include "test_util.h"

namespace lt {
namespace {

struct Case {
  std::string name;
  ErrorKind kind;
  std::string must_mention;  // substring of the message (the op, a shape, ...)
  std::function<void(const Device&)> run;
};

Tensor R(Shape s, const Device& d, uint32_t seed = 1) {
  return testing::random_tensor(std::move(s), seed, d);
}
Tensor I(Shape s, const Device& d) { return cast(R(std::move(s), d) * 3.0, DType::Int64); }
Tensor B(Shape s, const Device& d) { return gt(R(std::move(s), d), 0.0); }
void sync(const Tensor& t) { lt::sync(std::vector<Tensor>{t}); }  // computes; copies nothing out

std::vector<Case> cases() {
  std::vector<Case> c;
  using E = ErrorKind;
  // Every binary op with shapes that do not broadcast.
  struct Bin {
    const char* name;
    std::function<Tensor(const Tensor&, const Tensor&)> f;
  };
  std::vector<Bin> bins = {
      {"add", [](auto& a, auto& b) { return a + b; }},
      {"sub", [](auto& a, auto& b) { return a - b; }},
      {"mul", [](auto& a, auto& b) { return a * b; }},
      {"div", [](auto& a, auto& b) { return a / b; }},
      {"pow", [](auto& a, auto& b) { return pow(a, b); }},
      {"maximum", [](auto& a, auto& b) { return maximum(a, b); }},
      {"minimum", [](auto& a, auto& b) { return minimum(a, b); }},
      {"eq", [](auto& a, auto& b) { return eq(a, b); }},
      {"ne", [](auto& a, auto& b) { return ne(a, b); }},
      {"lt", [](auto& a, auto& b) { return lt::lt(a, b); }},
      {"le", [](auto& a, auto& b) { return le(a, b); }},
      {"gt", [](auto& a, auto& b) { return gt(a, b); }},
      {"ge", [](auto& a, auto& b) { return ge(a, b); }},
  };
  for (auto& b : bins) {
    c.push_back(
        {std::string(b.name) + "_3x4_vs_5", E::Runtime, "[3, 4]", [f = b.f](const Device& d) {
           sync(f(R({3, 4}, d), R({5}, d)));
         }});
    c.push_back(
        {std::string(b.name) + "_2x3_vs_3x2", E::Runtime, "[2, 3]", [f = b.f](const Device& d) {
           sync(f(R({2, 3}, d), R({3, 2}, d)));
         }});
  }
  c.push_back({"logical_and_mismatch", E::Runtime, "[4]",
               [](const Device& d) { sync(logical_and(B({4}, d), B({5}, d))); }});
  c.push_back({"logical_or_mismatch", E::Runtime, "[4]",
               [](const Device& d) { sync(logical_or(B({4}, d), B({5}, d))); }});
  c.push_back({"where_mismatch", E::Runtime, "where",
               [](const Device& d) { sync(where(B({3}, d), R({4}, d), R({3}, d))); }});
  c.push_back({"where_cond_not_bool", E::Runtime, "where",
               [](const Device& d) { sync(where(R({3}, d), R({3}, d), R({3}, d))); }});
  // matmul shapes and dtypes.
  c.push_back({"matmul_inner", E::Runtime, "matmul", [](const Device& d) {
                 sync(matmul(R({3, 4}, d), R({5, 2}, d)));
               }});
  c.push_back({"matmul_batch", E::Runtime, "matmul", [](const Device& d) {
                 sync(matmul(R({2, 3, 4}, d), R({3, 4, 5}, d)));
               }});
  c.push_back({"matmul_0d", E::Runtime, "matmul",
               [](const Device& d) { sync(matmul(R({}, d), R({3}, d))); }});
  c.push_back({"matmul_vec_vec", E::Runtime, "matmul",
               [](const Device& d) { sync(matmul(R({3}, d), R({4}, d))); }});
  c.push_back({"matmul_bool", E::Runtime, "matmul", [](const Device& d) {
                 sync(matmul(B({2, 2}, d), B({2, 2}, d)));
               }});
  c.push_back({"matmul_mixed_dtype", E::Runtime, "matmul", [](const Device& d) {
                 sync(matmul(R({2, 2}, d), cast(R({2, 2}, d), DType::Float64)));
               }});
  c.push_back({"cat_mismatch", E::Runtime, "cat", [](const Device& d) {
                 sync(cat({R({2, 3}, d), R({2, 4}, d)}, 0));
               }});
  // Movement and reduction arguments.
  c.push_back({"reshape_numel", E::Runtime, "reshape", [](const Device& d) {
                 sync(R({3, 4}, d).reshape({5, 3}));
               }});
  c.push_back({"reshape_two_minus_one", E::Runtime, "reshape", [](const Device& d) {
                 sync(R({3, 4}, d).reshape({-1, -1}));
               }});
  c.push_back({"reshape_negative", E::Runtime, "reshape", [](const Device& d) {
                 sync(R({3, 4}, d).reshape({-3, -4}));
               }});
  c.push_back({"permute_not_a_permutation", E::Runtime, "permute", [](const Device& d) {
                 sync(R({2, 3}, d).permute({0, 0}));
               }});
  c.push_back({"permute_wrong_rank", E::Index, "permute", [](const Device& d) {
                 sync(R({2, 3}, d).permute({1, 0, 2}));
               }});
  c.push_back({"permute_out_of_range", E::Index, "permute", [](const Device& d) {
                 sync(R({2, 3}, d).permute({0, 2}));
               }});
  c.push_back({"transpose_out_of_range", E::Index, "transpose", [](const Device& d) {
                 sync(R({2, 3}, d).transpose(0, 5));
               }});
  c.push_back({"expand_incompatible", E::Runtime, "expand", [](const Device& d) {
                 sync(R({3, 2}, d).expand({3, 4}));
               }});
  c.push_back({"expand_fewer_dims", E::Runtime, "expand", [](const Device& d) {
                 sync(R({2, 3}, d).expand({3}));
               }});
  c.push_back({"sum_axis_out_of_range", E::Index, "sum", [](const Device& d) {
                 sync(R({2, 3}, d).sum({2}));
               }});
  c.push_back({"sum_axis_negative_out_of_range", E::Index, "sum", [](const Device& d) {
                 sync(R({2, 3}, d).sum({-3}));
               }});
  c.push_back({"sum_axis_twice", E::Runtime, "sum", [](const Device& d) {
                 sync(R({2, 3}, d).sum({1, -1}));
               }});
  c.push_back({"amax_empty", E::Index, "max", [](const Device& d) {
                 sync(R({0, 3}, d).amax({0}));
               }});
  c.push_back({"softmax_axis", E::Index, "softmax", [](const Device& d) {
                 sync(softmax(R({2, 3}, d), 2));
               }});
  c.push_back({"log_softmax_axis", E::Index, "softmax", [](const Device& d) {
                 sync(log_softmax(R({2, 3}, d), -3));
               }});
  c.push_back({"unsqueeze_out_of_range", E::Index, "unsqueeze", [](const Device& d) {
                 sync(R({2, 3}, d).unsqueeze(4));
               }});
  c.push_back({"squeeze_out_of_range", E::Index, "squeeze", [](const Device& d) {
                 sync(R({2, 3}, d).squeeze(3));
               }});
  c.push_back({"flatten_range", E::Index, "flatten", [](const Device& d) {
                 sync(R({2, 3}, d).flatten(0, 4));
               }});
  c.push_back({"layer_norm_shape", E::Runtime, "layer_norm", [](const Device& d) {
                 sync(layer_norm(R({2, 3}, d), {4}));
               }});
  c.push_back({"layer_norm_weight", E::Runtime, "layer_norm", [](const Device& d) {
                 sync(layer_norm(R({2, 3}, d), {3}, R({4}, d)));
               }});
  // Negative or zero sizes and bad creation arguments.
  c.push_back({"zeros_negative", E::Runtime, "negative", [](const Device& d) {
                 sync(zeros({2, -1}, DType::Float32, d));
               }});
  c.push_back({"randn_negative", E::Runtime, "negative",
               [](const Device& d) { sync(randn({-2}, DType::Float32, d)); }});
  c.push_back({"arange_zero_step", E::Runtime, "arange",
               [](const Device& d) { sync(arange(0, 5, 0, std::nullopt, d)); }});
  c.push_back({"arange_wrong_sign", E::Runtime, "arange",
               [](const Device& d) { sync(arange(0, 5, -1, std::nullopt, d)); }});
  c.push_back({"linspace_negative", E::Runtime, "linspace",
               [](const Device& d) { sync(linspace(0, 1, -3, DType::Float32, d)); }});
  c.push_back({"randint_empty_range", E::Runtime, "randint",
               [](const Device& d) { sync(randint(5, 5, {3}, DType::Int64, d)); }});
  c.push_back({"randn_int_dtype", E::Type, "randn",
               [](const Device& d) { sync(randn({3}, DType::Int64, d)); }});
  // Sizes past int64: each was undefined behaviour (or a segfault: eye) before a check.
  const int64_t big = int64_t{1} << 40;
  c.push_back({"zeros_overflow", E::Runtime, "2^60", [=](const Device& d) {
                 sync(zeros({big, big}, DType::Float32, d));
               }});
  c.push_back({"eye_overflow", E::Runtime, "eye",
               [=](const Device& d) { sync(eye(big, std::nullopt, DType::Float32, d)); }});
  c.push_back({"arange_too_many", E::Runtime, "arange",
               [](const Device& d) { sync(arange(0, 1, 1e-300, std::nullopt, d)); }});
  c.push_back({"linspace_too_many", E::Runtime, "linspace",
               [](const Device& d) { sync(linspace(0, 1, int64_t{1} << 62, DType::Float32, d)); }});
  c.push_back({"full_int_from_huge_float", E::Runtime, "overflow",
               [](const Device& d) { sync(full({2}, Scalar(1e30), DType::Int64, d)); }});
  c.push_back({"reshape_overflow", E::Runtime, "reshape", [=](const Device& d) {
                 sync(R({2}, d).reshape({big, big, -1}));
               }});
  c.push_back({"expand_overflow", E::Runtime, "expand", [=](const Device& d) {
                 sync(R({2, 1}, d).expand({2, int64_t{1} << 62}));
               }});
  c.push_back({"pad_overflow", E::Runtime, "pad", [](const Device& d) {
                 sync(pad(R({2, 3}, d), {int64_t{1} << 62, int64_t{1} << 62}, 0.0));
               }});
  c.push_back({"one_hot_too_many", E::Runtime, "one_hot",
               [](const Device& d) { sync(one_hot(I({2}, d), int64_t{1} << 62)); }});
  // Within int64 but past this machine's memory (16 TiB): PyTorch's "not enough memory" error.
  c.push_back({"allocation_too_big", E::Runtime, "not enough memory", [=](const Device& d) {
                 sync(full({big, 4}, Scalar(2.5), DType::Float32, d).exp());
               }});
  // Host access.
  c.push_back({"item_many", E::Runtime, "3 elements", [](const Device& d) { R({3}, d).item(); }});
  c.push_back({"item_empty", E::Runtime, "0 elements", [](const Device& d) { R({0}, d).item(); }});
  // Devices.
  c.push_back(
      {"unknown_device", E::Runtime, "device", [](const Device&) { Device::parse("tpu"); }});
  c.push_back(
      {"bad_device_index", E::Runtime, "device", [](const Device&) { Device::parse("cuda:x"); }});
  c.push_back({"lazy_unknown_backend", E::Runtime, "device",
               [](const Device&) { Device::parse("lazy:metal"); }});
  c.push_back({"cuda_without_gpu", E::Runtime, "cuda",
               [](const Device& d) { sync(R({2}, Device::parse("cuda"))); }});
  c.push_back({"mixing_devices", E::Runtime, "device", [](const Device& d) {
                 Device other = d.type == Device::Type::Lazy ? kCPU : kLazy;
                 sync(R({2}, d) + R({2}, other));
               }});
  // Autograd misuse.
  c.push_back({"backward_non_scalar", E::Runtime, "scalar", [](const Device& d) {
                 Tensor x = R({3}, d).requires_grad_();
                 (x * 2).backward();
               }});
  c.push_back({"backward_twice", E::Runtime, "retain_graph", [](const Device& d) {
                 Tensor x = R({3}, d).requires_grad_();
                 Tensor y = (x * x).sum();
                 y.backward();
                 y.backward();
               }});
  c.push_back({"backward_nothing_requires_grad", E::Runtime, "grad",
               [](const Device& d) { (R({3}, d) * 2).sum().backward(); }});
  c.push_back({"requires_grad_on_int", E::Runtime, "floating",
               [](const Device& d) { I({3}, d).requires_grad_(); }});
  c.push_back({"requires_grad_on_non_leaf", E::Runtime, "leaf", [](const Device& d) {
                 Tensor x = R({3}, d).requires_grad_();
                 (x * 2).requires_grad_(false);
               }});
  c.push_back({"inplace_on_leaf_requiring_grad", E::Runtime, "leaf", [](const Device& d) {
                 Tensor x = R({3}, d).requires_grad_();
                 x += 1.0;
               }});
  c.push_back({"inplace_float_into_int", E::Runtime, "can't be cast", [](const Device& d) {
                 Tensor t = I({3}, d);
                 t += 1.5;
               }});
  c.push_back({"inplace_number_into_bool", E::Runtime, "can't be cast", [](const Device& d) {
                 Tensor t = B({3}, d);
                 t *= int64_t{2};
               }});
  c.push_back({"backward_grad_shape", E::Runtime, "backward", [](const Device& d) {
                 Tensor x = R({3}, d).requires_grad_();
                 (x * 2).backward(R({4}, d));
               }});
  c.push_back({"assign_shape", E::Runtime, "in-place", [](const Device& d) {
                 Tensor x = R({3}, d);
                 x.assign(R({4}, d));
               }});
  c.push_back({"nn_linear_input", E::Runtime, "Linear", [](const Device& d) {
                 nn::Linear l(4, 3);
                 l.to(d);
                 sync(l.forward(R({2, 5}, d)));
               }});
  return c;
}

class BadInput : public ::testing::TestWithParam<const char*> {};

TEST_P(BadInput, EveryCaseIsAClearErrorAndTheSessionGoesOn) {
  Device dev = Device::parse(GetParam());
  int tried = 0;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    try {
      k.run(dev);
      ADD_FAILURE() << k.name << ": no error was raised";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(k.kind))
          << k.name << ": kind " << static_cast<int>(e.kind()) << " for: " << msg;
      EXPECT_NE(msg.find(k.must_mention), std::string::npos)
          << k.name << ": message does not mention '" << k.must_mention << "': " << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << k.name << ": not one line: " << msg;
    } catch (const std::exception& e) {
      ADD_FAILURE() << k.name << ": threw a non-lt::Error: " << e.what();
    }
    ++tried;
    // The session keeps working: a correct step right after gives the right answer.
    auto xv = testing::random_floats(6, 40 + tried);
    Tensor x = from_host(xv.data(), DType::Float32, {2, 3}, dev);
    auto got = ((x * 2.0 + 1.0).sum({1})).to_vector<double>();
    ASSERT_EQ(got.size(), 2u);
    for (int r = 0; r < 2; ++r) {
      double want = 0;
      for (int j = 0; j < 3; ++j) want += 2.0 * xv[r * 3 + j] + 1.0;
      ASSERT_NEAR(got[r], want, 1e-4) << "after " << k.name;
    }
  }
  std::printf("bad inputs tried on %s: %d\n", GetParam(), tried);
  EXPECT_GE(tried, 60);
}

INSTANTIATE_TEST_SUITE_P(Devices, BadInput, ::testing::Values("cpu", "lazy"));

}  // namespace
}  // namespace lt
