// backends/cpu/transpose.h: the scratch transpose some CPU GEMMs run first (onednn_gemm.cc).
#include "backends/cpu/transpose.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "test_util.h"

namespace lt::cpu {
namespace {

TEST(Transpose, EveryElementLandsAtItsTransposedPlaceForRaggedSizesAndStrides) {
  // rows x cols with a source row stride: multiples of 8 (the AVX2 blocks), ragged edges on
  // either side, one band and many (bands are 64 rows), and rows padded past cols.
  for (auto [rows, cols, stride] : std::vector<std::array<int64_t, 3>>{{1, 1, 1},
                                                                       {8, 8, 8},
                                                                       {7, 9, 9},
                                                                       {9, 7, 12},
                                                                       {64, 64, 64},
                                                                       {65, 130, 131},
                                                                       {200, 33, 40},
                                                                       {333, 517, 520}}) {
    auto src = testing::random_floats(static_cast<int64_t>(rows * stride), 3);
    std::vector<float> dst(static_cast<size_t>(rows * cols), -1.0f);
    transpose_f32(src.data(), stride, rows, cols, dst.data());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        ASSERT_EQ(dst[static_cast<size_t>(j * rows + i)], src[static_cast<size_t>(i * stride + j)])
            << rows << "x" << cols << " stride " << stride << " at (" << i << ", " << j << ")";
  }
}

TEST(Transpose, EmptyIsANoOp) {
  float dst = 5.0f;
  transpose_f32(nullptr, 0, 0, 3, &dst);
  transpose_f32(nullptr, 0, 3, 0, &dst);
  EXPECT_EQ(dst, 5.0f);
}

}  // namespace
}  // namespace lt::cpu
