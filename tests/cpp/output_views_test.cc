// Graph roots that are contiguous parts of another computed value read its buffer (lowering/
// output_views.h, Plan::output_offsets): the plan, its stored form, and the values and memory the
// runtime hands back on the lazy CPU backend and the reference interpreter, against host math.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/storage.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"
#include "test_util.h"

namespace lt {
namespace output_views_test {

NodePtr slice_of(NodePtr x, std::vector<int64_t> start_step_size) {
  Attrs a;
  a.ints = to_ints(start_step_size);
  return make_node(Op::Slice, {std::move(x)}, a);
}

NodePtr exp_of(NodePtr x) { return make_node(Op::Exp, {std::move(x)}); }

Plan plan_for(const NodeList& roots) {
  std::vector<const Node*> r;
  for (const auto& n : roots) r.push_back(n.get());
  return lower(collect_graph(r));
}

// The three rows of a computed [3, 4] value: one kernel writes the value, and each row is its
// buffer from 0, 4 and 8.
TEST(OutputViews, RowsOfAComputedValueAreItsBuffer) {
  NodePtr y = exp_of(testing::param({3, 4}));
  NodeList rows;
  for (int64_t r = 0; r < 3; ++r) rows.push_back(slice_of(y, {r, 1, 1, 0, 1, 4}));
  const Plan p = plan_for(rows);
  EXPECT_EQ(p.kernels.size(), 1u) << p.grouping;
  ASSERT_EQ(p.output_offsets, (std::vector<int64_t>{0, 4, 8}));
  EXPECT_EQ(p.output_buffers[0], p.output_buffers[1]);
  EXPECT_EQ(p.output_buffers[1], p.output_buffers[2]);
  EXPECT_EQ(p.output_shapes[2], (Shape{1, 4}));
  EXPECT_EQ(p.buffers[static_cast<size_t>(p.output_buffers[0])].numel, 12);

  // Stored and read back with the offsets; an offset past the buffer is a damaged plan.
  const Plan back = deserialize_plan(serialize_plan(p));
  EXPECT_EQ(back.output_offsets, p.output_offsets);
  Plan bad = p;
  bad.output_offsets[2] = 9;  // rows of 4 from 9 overrun 12 elements
  EXPECT_THROW(deserialize_plan(serialize_plan(bad)), Error);
}

// Columns are strided, not contiguous; a small part of a value no root holds would keep all of it
// alive: both stay copies. Off in the options (symbolic plans), no root is a view.
TEST(OutputViews, StridedPartsSmallPartsAndTheOptionStayCopies) {
  NodePtr y = exp_of(testing::param({3, 4}));
  const Plan cols = plan_for({slice_of(y, {0, 1, 3, 1, 1, 2}), slice_of(y, {0, 1, 3, 3, 1, 1})});
  EXPECT_TRUE(cols.output_offsets.empty());
  const Plan small = plan_for({slice_of(y, {0, 1, 1, 0, 1, 4})});  // 4 of 12 elements
  EXPECT_TRUE(small.output_offsets.empty());
  const Plan with_base = plan_for({slice_of(y, {0, 1, 1, 0, 1, 4}), y});  // the base is a root
  EXPECT_EQ(with_base.output_offsets, (std::vector<int64_t>{0, 0}));
  LowerOptions off;
  off.output_views = false;
  NodePtr row = slice_of(y, {2, 1, 1, 0, 1, 4});
  EXPECT_TRUE(lower(collect_graph({row.get(), y.get()}), off).output_offsets.empty());
}

// What DDP's flat averaging traces: pieces flattened, concatenated, reduced (here a computed
// value), then sliced back and reshaped. On the CPU backend and the reference interpreter, each
// piece equals host math and its memory lies inside the whole's buffer; the copies are gone.
TEST(OutputViews, FlattenedPiecesShareTheWholeOnEveryHostBackend) {
  const std::vector<Shape> shapes = {{5, 7}, {3}, {2, 3, 4}, {11}};
  for (const char* dev_name : {"lazy:cpu", "lazy:reference"}) {
    const Device dev = Device::parse(dev_name);
    std::vector<Tensor> pieces;
    std::vector<std::vector<float>> host;
    for (size_t i = 0; i < shapes.size(); ++i) {
      host.push_back(testing::random_floats(numel(shapes[i]), static_cast<uint32_t>(i + 7)));
      pieces.push_back(from_host(host.back().data(), DType::Float32, shapes[i], dev));
    }
    std::vector<Tensor> flat;
    for (const Tensor& t : pieces) flat.push_back(reshape(t, {-1}));
    const Tensor whole = cat(flat, 0) * 3.0;
    std::vector<Tensor> back;
    int64_t offset = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      back.push_back(reshape_to(narrow(whole, 0, offset, numel(shapes[i])), shapes[i]));
      offset += numel(shapes[i]);
    }
    sync(back);
    for (size_t i = 0; i < shapes.size(); ++i) {
      EXPECT_EQ(back[i].shape(), shapes[i]) << dev_name;
      const std::vector<float> got = back[i].to_vector<float>();
      ASSERT_EQ(got.size(), host[i].size());
      for (size_t j = 0; j < got.size(); ++j)
        EXPECT_FLOAT_EQ(got[j], host[i][j] * 3.0f) << dev_name << " piece " << i << " at " << j;
    }
    const auto* s0 = back[0].impl()->storage.get();
    const auto* s3 = back[3].impl()->storage.get();
    ASSERT_TRUE(s0 && s3 && s0->buffer && s3->buffer) << dev_name;
    // Piece 3 starts 35 + 3 + 24 floats after piece 0, in one allocation.
    EXPECT_EQ(
        static_cast<const char*>(s3->buffer->data()) - static_cast<const char*>(s0->buffer->data()),
        static_cast<std::ptrdiff_t>((35 + 3 + 24) * sizeof(float)))
        << dev_name;
    EXPECT_FALSE(s3->buffer->runtime_owned()) << dev_name;  // never updated in place
    // A later op on a view reads it as any input, and leaves the others alone.
    const Tensor next = back[1] + 1.0;
    const std::vector<float> n = next.to_vector<float>();
    for (size_t j = 0; j < n.size(); ++j) EXPECT_FLOAT_EQ(n[j], host[1][j] * 3.0f + 1.0f);
    EXPECT_FLOAT_EQ(back[2].to_vector<float>()[0], host[2][0] * 3.0f);
  }
}

}  // namespace output_views_test
}  // namespace lt
