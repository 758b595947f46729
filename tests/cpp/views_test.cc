// The C++ API's views alias their base (runtime/views.h), as PyTorch's and as the Python API's
// (tests/python/test_views.py checks those against torch): expected values are computed here on
// plain host arrays from the same random draw, without the library.
#include <gtest/gtest.h>

#include <vector>

#include "autograd/autograd.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace lt {
namespace {

class Views : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
};

TEST_P(Views, WriteThroughSliceAndTransposeReachesBaseAndSiblings) {
  std::vector<float> host = testing::random_floats(12, 7);
  Tensor b = from_host(host.data(), DType::Float32, {3, 4}, dev());
  Tensor row = select(b, 0, 1);                  // b[1]
  Tensor col = select(b.transpose(0, 1), 0, 2);  // b[:, 2]
  row *= 10.0;                                   // b[1, :] *= 10
  std::vector<double> want(host.begin(), host.end());
  for (int j = 0; j < 4; ++j) want[4 + j] *= 10.0;
  testing::expect_close(b.to_vector<double>(), want, 1e-6, 1e-6, "base after row write");
  // The sibling view was taken before the write and sees it.
  std::vector<double> col_want{want[2], want[6], want[10]};
  testing::expect_close(col.to_vector<double>(), col_want, 1e-6, 1e-6, "column view");
  // A write to the base reaches the view.
  b += 1.0;
  for (auto& v : col_want) v += 1.0;
  testing::expect_close(col.to_vector<double>(), col_want, 1e-6, 1e-6, "column after base write");
}

TEST_P(Views, DetachedAliasUpdatesParameterWithoutHistory) {
  std::vector<float> host = testing::random_floats(6, 11);
  Tensor p = from_host(host.data(), DType::Float32, {6}, dev());
  p.requires_grad_(true);
  Tensor d = p.detach();
  d -= 0.5;  // p.data.sub_(0.5)
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
  std::vector<double> got = p.to_vector<double>();
  for (int i = 0; i < 6; ++i) EXPECT_NEAR(got[i], host[i] - 0.5, 1e-6);
}

TEST_P(Views, GradientFollowsWriteThroughView) {
  std::vector<float> host = testing::random_floats(3, 5);
  Tensor x = from_host(host.data(), DType::Float32, {3}, dev());
  x.requires_grad_(true);
  Tensor c = x * 1.0;
  Tensor tail = slice(c, 0, 1, 3);
  tail *= 5.0;  // c[1:] *= 5: dc/dx = [1, 5, 5]
  c.sum().backward();
  testing::expect_close(x.grad().to_vector<double>(), {1, 5, 5}, 1e-6, 1e-6, "x.grad");
}

TEST_P(Views, ExpandedViewWriteIsAnErrorNamingTheShape) {
  Tensor b = ones({1, 3}, DType::Float32, dev());
  Tensor e = b.expand({2, 3});
  try {
    e += 1.0;
    FAIL() << "expected an error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("[2, 3]"), std::string::npos) << err.what();
  }
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{1, 1, 1}));  // and the process goes on
}

INSTANTIATE_TEST_SUITE_P(Devices, Views, ::testing::Values("cpu", "lazy:cpu"));

}  // namespace
}  // namespace lt
