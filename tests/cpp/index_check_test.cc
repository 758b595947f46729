// Range checks of index values computed inside a lazy graph (runtime/index_check.h): an index
// derived from data in the same trace is out of range -> the sync raises lt::Error(Index) naming
// the op, the bad value and the shapes; in-range indices give the same results as host-known ones
// (against host loops); host-known indices add no kernel; the process keeps working afterwards.
#include "runtime/index_check.h"

#include <gtest/gtest.h>

#include <functional>

#include "test_util.h"

namespace lt {
namespace {

using testing::kLazyCpu;

// An int64 index computed in the graph: floor(v * 10) of float data uploaded as v / 10, so the
// values are exact and only known after the sync.
Tensor computed_index(const std::vector<int64_t>& v, Shape shape, const Device& d) {
  std::vector<float> f;
  for (int64_t x : v) f.push_back((static_cast<float>(x) + 0.25f) / 10.f);
  Tensor t = from_host(f.data(), DType::Float32, std::move(shape), d);
  return (t * 10.0).floor().to(DType::Int64);
}

Tensor host_index(const std::vector<int64_t>& v, Shape shape, const Device& d) {
  return from_host(v.data(), DType::Int64, std::move(shape), d);
}

// Runs mark_step and returns the IndexError's message ("" when none was raised).
std::string index_error_of_mark_step() {
  try {
    mark_step();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Index) << e.what();
    return e.what();
  }
  return "";
}

struct IndexCase {
  std::string op;
  // Builds the op's result from a 10-row input and an index of the given values and shape.
  std::function<Tensor(const Tensor& index)> run;
  Shape index_shape;
  std::vector<int64_t> good;
};

std::vector<IndexCase> cases() {
  auto a = testing::random_tensor({10, 3}, 7, kLazyCpu);
  auto v = testing::random_tensor({10}, 8, kLazyCpu);
  return {
      {"gather", [a](const Tensor& i) { return gather(a, 0, i); }, {2, 3}, {0, 9, 4, 2, 2, 7}},
      {"scatter_add",
       [a](const Tensor& i) {
         return scatter_add(zeros({10, 3}, DType::Float32, kLazyCpu), 0, i, a);
       },
       {2, 3},
       {1, 8, 3, 5, 5, 0}},
      {"index_select", [a](const Tensor& i) { return index_select(a, 0, i); }, {4}, {3, 0, 9, 3}},
      {"embedding", [a](const Tensor& i) { return embedding(a, i); }, {2, 2}, {9, 1, 0, 4}},
      {"one_hot", [](const Tensor& i) { return one_hot(i, 10); }, {5}, {0, 9, 3, 3, 1}},
      {"index_select_1d", [v](const Tensor& i) { return index_select(v, 0, i); }, {3}, {9, 0, 5}},
  };
}

TEST(IndexCheck, ComputedOutOfRangeIndexRaisesAtTheSyncNamingOpValueAndShapes) {
  for (const auto& c : cases()) {
    for (int64_t bad : {12, -3}) {
      SCOPED_TRACE(c.op + " with " + std::to_string(bad));
      auto vals = c.good;
      vals[1] = bad;
      Tensor out = c.run(computed_index(vals, c.index_shape, kLazyCpu));
      EXPECT_EQ(index_checks::pending_count(), 1u);
      std::string msg = index_error_of_mark_step();
      std::string op = c.op == "index_select_1d" ? "index_select" : c.op;
      EXPECT_NE(msg.find(op + ":"), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("index shape " + shape_str(c.index_shape)), std::string::npos) << msg;
      EXPECT_NE(msg.find("10"), std::string::npos) << msg;
      // The sync's results were assigned before the error: nothing is left pending.
      EXPECT_FALSE(out.is_pending());
      EXPECT_EQ(pending_tensor_count(), 0u);
      EXPECT_EQ(index_checks::pending_count(), 0u);
    }
  }
}

TEST(IndexCheck, InRangeComputedIndicesMatchHostIndicesAndTheProcessContinues) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.op);
    auto vals = c.good;
    vals[0] = 11;  // first a failing step ...
    Tensor bad = c.run(computed_index(vals, c.index_shape, kLazyCpu));
    EXPECT_NE(index_error_of_mark_step(), "");
    // ... then correct steps: the computed index gives what the host-known index gives (whose
    // values the host checks and which the eager cpu device computes independently of lazy).
    for (int step = 0; step < 2; ++step) {
      Tensor got = c.run(computed_index(c.good, c.index_shape, kLazyCpu));
      std::vector<double> g = got.to_vector<double>();
      Tensor want = c.run(host_index(c.good, c.index_shape, kLazyCpu));
      EXPECT_EQ(g, want.to_vector<double>());
    }
    EXPECT_EQ(index_checks::pending_count(), 0u);
  }
}

TEST(IndexCheck, GatherMatchesAHostLoopWithAComputedIndex) {
  auto av = testing::random_floats(30, 3);
  Tensor a = from_host(av.data(), DType::Float32, {10, 3}, kLazyCpu);
  std::vector<int64_t> idx = {4, 0, 9, 9, 1, 2};
  auto got = gather(a, 0, computed_index(idx, {2, 3}, kLazyCpu)).to_vector<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(got[i * 3 + j], av[idx[i * 3 + j] * 3 + j]);
}

TEST(IndexCheck, HostKnownIndicesAddNoCheckAndNoKernel) {
  Tensor a = testing::random_tensor({10, 3}, 1, kLazyCpu);
  Tensor host = host_index({0, 9, 4, 2, 2, 7}, {2, 3}, kLazyCpu);
  (void)gather(a, 0, host).to_vector<float>();
  EXPECT_EQ(index_checks::pending_count(), 0u);
  const int64_t host_kernels = metrics::last_graph().kernels;
  EXPECT_EQ(metrics::last_graph().outputs, 1);
  // A computed index: the index chain recomputes inside the gather kernel; the check ([max, ~min]
  // of the index, one reduction) is one more kernel and output of the same graph, not a sync.
  auto syncs = metrics::counters().at("syncs");
  // (A named result: a temporary index alive through the full expression would be a live tensor
  // sharing the work, materialized with it by the sync; runtime/shared_work.h.)
  Tensor gathered = gather(a, 0, computed_index({0, 9, 4, 2, 2, 7}, {2, 3}, kLazyCpu));
  (void)gathered.to_vector<float>();
  EXPECT_EQ(metrics::counters().at("syncs"), syncs + 1);
  EXPECT_EQ(metrics::last_graph().kernels, host_kernels + 1);
  EXPECT_EQ(metrics::last_graph().outputs, 2);
}

TEST(IndexCheck, HostKnownIndicesStillFailAtTheOp) {
  Tensor a = testing::random_tensor({10, 3}, 1, kLazyCpu);
  for (const Device& d : {kCPU, kLazyCpu}) {
    try {
      (void)gather(a.to(d), 0, host_index({0, 10, 1}, {1, 3}, d));
      ADD_FAILURE() << "no error on " << d.str();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Index);
      EXPECT_NE(std::string(e.what()).find(
                    "gather: index 10 is out of bounds for dimension 0 with size 10"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW((void)index_select(a.to(d), 0, host_index({-1}, {1}, d)), Error);
    EXPECT_THROW((void)embedding(a.to(d), host_index({-2}, {1}, d)), Error);
  }
  EXPECT_EQ(index_checks::pending_count(), 0u);
}

TEST(IndexCheck, EmbeddingAcceptsInt32IndicesAndChecksThem) {
  Tensor w = testing::random_tensor({10, 3}, 2, kLazyCpu);
  Tensor i32 = computed_index({1, 12}, {2}, kLazyCpu).to(DType::Int32);
  Tensor out = embedding(w, i32);
  EXPECT_NE(index_error_of_mark_step().find("embedding: index 12"), std::string::npos);
  Tensor good = embedding(w, computed_index({1, 9}, {2}, kLazyCpu).to(DType::Int32));
  auto g = good.to_vector<float>();
  auto wv = w.to_vector<float>();
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(g[j], wv[3 + j]);
    EXPECT_EQ(g[3 + j], wv[27 + j]);
  }
}

TEST(IndexCheck, OnlyTheSyncThatComputesTheOpRunsItsCheck) {
  Tensor a = testing::random_tensor({10, 3}, 1, kLazyCpu);
  Tensor bad = gather(a, 0, computed_index({0, 10, 1}, {1, 3}, kLazyCpu));
  // An unrelated sync neither computes nor raises the check.
  EXPECT_EQ((a.sum() * 0.0).item(), 0.0);
  EXPECT_EQ(index_checks::pending_count(), 1u);
  try {
    (void)bad.sum().item();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gather: index 10"), std::string::npos) << e.what();
  }
  // A result that dies pending takes its check with it: no error for work never done.
  { Tensor dead = gather(a, 0, computed_index({0, 10, 1}, {1, 3}, kLazyCpu)); }
  mark_step();
  EXPECT_EQ(index_checks::pending_count(), 0u);
}

TEST(IndexCheck, ReferenceBackendChecksToo) {
  const Device ref = Device::parse("lazy:reference");
  Tensor a = testing::random_tensor({10, 3}, 1, ref);
  Tensor out = index_select(a, 0, computed_index({2, 30}, {2}, ref));
  EXPECT_NE(index_error_of_mark_step().find("index_select: index 30"), std::string::npos);
}

}  // namespace
}  // namespace lt
