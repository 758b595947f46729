// The tensor core's trace observer (runtime/trace_observer.h): the core reports leaf reads, host
// reads, graph runs, index checks of host data and transfers to the one observer set, nothing
// once it is cleared; lt.compile's capture is that observer while it runs.
#include "runtime/trace_observer.h"

#include "capture/capture.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace {

using testing::kLazyCpu;
using testing::random_tensor;

struct Counting final : TraceObserver {
  int leaves = 0, host_reads = 0, executions = 0, index_checks = 0, transfers = 0, ends = 0;
  bool ended_with_result = false;
  void on_leaf(TensorImpl&) override { ++leaves; }
  void on_host_read(SyncReason) override { ++host_reads; }
  void on_execution(SyncReason) override { ++executions; }
  void on_index_check(const IndexCheckSpec&, const Tensor&) override { ++index_checks; }
  bool on_transfer_begin(const TensorImpl&) override {
    ++transfers;
    return true;
  }
  void on_transfer_end(const TensorImpl&, const Tensor* result) override {
    ++ends;
    ended_with_result = result && result->defined();
  }
};

struct Observing {
  explicit Observing(TraceObserver* o) { set_trace_observer(o); }
  ~Observing() { set_trace_observer(nullptr); }
};

TEST(TraceObserver, TheCoreReportsEachPoint) {
  Tensor w = random_tensor({8}, 1, kLazyCpu);
  mark_step();
  Counting seen;
  {
    Observing on(&seen);
    EXPECT_EQ(trace_observer(), &seen);
    EXPECT_FALSE(capture::active());  // another observer is not a capture
    Tensor y = (w * 2.0).sum();
    EXPECT_GE(seen.leaves, 1);  // w's data read as a graph leaf
    y.item();
    EXPECT_GE(seen.executions, 1);
    EXPECT_GE(seen.host_reads, 1);
    std::vector<int64_t> idx = {0, 3};
    Tensor i = from_host(idx.data(), DType::Int64, {2}, kLazyCpu);
    index_select(w, 0, i);
    EXPECT_EQ(seen.index_checks, 1);  // host data: checked at the op
    Tensor c = w.to(Device::parse("cpu"));
    EXPECT_EQ(seen.transfers, 1);
    EXPECT_EQ(seen.ends, 1);
    EXPECT_TRUE(seen.ended_with_result);
  }
  EXPECT_EQ(trace_observer(), nullptr);
  Counting before = seen;
  (w * 3.0).sum().item();
  EXPECT_EQ(seen.leaves, before.leaves);
  EXPECT_EQ(seen.executions, before.executions);
  EXPECT_EQ(seen.host_reads, before.host_reads);
}

TEST(TraceObserver, TheCaptureObservesWhileItRuns) {
  Tensor x = random_tensor({4}, 2, kLazyCpu);
  mark_step();
  EXPECT_EQ(trace_observer(), nullptr);
  capture::begin({x});
  EXPECT_NE(trace_observer(), nullptr);
  EXPECT_TRUE(capture::active());
  Tensor y = x + 1.0;
  auto c = capture::end({x}, {y});
  EXPECT_TRUE(c.program) << c.why_not;
  EXPECT_EQ(trace_observer(), nullptr);
  EXPECT_FALSE(capture::active());
}

}  // namespace
}  // namespace lt
