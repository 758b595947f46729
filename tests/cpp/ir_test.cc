// IR: Merkle hashing, graph keys, shape/dtype inference errors, the op registry.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/node.h"

namespace lt {
namespace {

struct FakeData : LeafData {};

NodePtr param(Shape s, DType t = DType::Float32) { return make_param(t, std::move(s), std::make_shared<FakeData>()); }

TEST(Hash, SameStructureSameHashDifferentDataSameHash) {
  auto a = make_node(Op::Add, {param({2, 3}), param({3})});
  auto b = make_node(Op::Add, {param({2, 3}), param({3})});
  EXPECT_EQ(a->hash, b->hash);  // leaves hash dtype+shape, never data
}

TEST(Hash, OpShapeDtypeAttrsAllMatter) {
  auto x = param({2, 3});
  auto h = make_node(Op::Sin, {x})->hash;
  EXPECT_NE(h, make_node(Op::Cos, {x})->hash);
  EXPECT_NE(h, make_node(Op::Sin, {param({3, 2})})->hash);
  EXPECT_NE(h, make_node(Op::Sin, {param({2, 3}, DType::Float64)})->hash);
  Attrs a0, a1;
  a0.ints = {0};
  a1.ints = {1};
  EXPECT_NE(make_node(Op::ReduceSum, {x}, a0)->hash, make_node(Op::ReduceSum, {x}, a1)->hash);
  Attrs k = a0;
  k.keepdim = true;
  EXPECT_NE(make_node(Op::ReduceSum, {x}, a0)->hash, make_node(Op::ReduceSum, {x}, k)->hash);
  EXPECT_NE(make_constant(DType::Float32, 0)->hash, make_constant(DType::Float32, 1)->hash);
}

TEST(Hash, ScalarValueIsNotHashed) {
  EXPECT_EQ(make_scalar(DType::Float32, 0.1)->hash, make_scalar(DType::Float32, 0.2)->hash);
  EXPECT_NE(make_scalar(DType::Float32, 0.1)->hash, make_scalar(DType::Float64, 0.1)->hash);
}

TEST(Hash, StableAcrossRunsAndVersions) {
  // The disk cache keys on these hashes: changing the hash function must be deliberate.
  auto n = make_node(Op::Mul, {param({4, 8}), make_scalar(DType::Float32, 2.0)});
  EXPECT_EQ(n->hash.hex(), make_node(Op::Mul, {param({4, 8}), make_scalar(DType::Float32, 3.0)})->hash.hex());
  EXPECT_EQ(n->hash.hex().size(), 32u);
  EXPECT_EQ(n->hash.hex(), "5e051236e56eda75bea086cbe1d39cc1");
}

TEST(Hash, ScalarLeafHashesAreStablePerDtype) {
  // make_scalar takes these from a per-dtype table instead of hashing each leaf; the values are the
  // ones the per-leaf hashing gave, so disk-cache keys did not move.
  const char* expected[kNumDTypes] = {
      "eb313ab7007ae5c1b0fcd15522df48c0", "054ab9d70778ab703018f5866eca118c",
      "65231e0bc50dc9a7ceeba3e91de57b68", "01d283d7bd8059996c5d3440f1799c1b",
      "be0e75f449a4fc7db27862a9c5fe72e7", "193ee41df9fa3aad65cbf952a91622b5",
      "751dab38c89bab0a888d8fbed5313529", "ab858adc9319337a42e4bd68546a2866",
      "f72cdd7a21fec3272e7a9406ce890eec"};
  for (int i = 0; i < kNumDTypes; ++i) {
    const auto t = static_cast<DType>(i);
    EXPECT_EQ(make_scalar(t, 1.5)->hash.hex(), expected[i]) << dtype_name(t);
    EXPECT_EQ(make_int_scalar(t, -7)->hash.hex(), expected[i]) << dtype_name(t);
  }
}

TEST(GraphKey, SharingOfInputsIsPartOfTheKey) {
  auto x = param({3}), y = param({3});
  auto xx = make_node(Op::Add, {x, x});
  auto xy = make_node(Op::Add, {x, y});
  EXPECT_EQ(xx->hash, xy->hash);  // same Merkle hash ...
  auto gxx = collect_graph({xx.get()}), gxy = collect_graph({xy.get()});
  EXPECT_NE(gxx.key, gxy.key);  // ... but different graphs
  EXPECT_EQ(gxx.inputs.size(), 1u);
  EXPECT_EQ(gxy.inputs.size(), 2u);
  // Same structure over new data: same key.
  auto z = param({3}), w = param({3});
  EXPECT_EQ(collect_graph({make_node(Op::Add, {z, w}).get()}).key, gxy.key);
}

TEST(GraphKey, ParamsWithSameDataDeduplicate) {
  auto data = std::make_shared<FakeData>();
  auto a = make_param(DType::Float32, {3}, data), b = make_param(DType::Float32, {3}, data);
  auto g = collect_graph({make_node(Op::Add, {a, b}).get()});
  EXPECT_EQ(g.inputs.size(), 1u);
}

// A graph of thousands of leaves (the graph maps grow well past their first size): every leaf maps
// to the input of its data, inputs are distinct, the key follows the sharing pattern only.
struct WideGraph {
  NodePtr root;
  NodeList leaves;
};
// Param leaf i reads data[(i * 7) % used]: `used` sets which leaves share data.
WideGraph wide_graph(const std::vector<std::shared_ptr<FakeData>>& data, size_t used) {
  WideGraph w;
  w.root = param({2});
  for (int i = 0; i < 3000; ++i) {
    NodePtr l = i % 3 == 0 ? make_scalar(DType::Float32, i)
                           : make_param(DType::Float32, {2}, data[static_cast<size_t>(i * 7) % used]);
    w.leaves.push_back(l);
    w.root = make_node(Op::Add, {w.root, l});
  }
  return w;
}

TEST(GraphKey, WideGraphMapsEveryLeafToItsInput) {
  std::vector<std::shared_ptr<FakeData>> data(300), other(300);
  for (auto& d : data) d = std::make_shared<FakeData>();
  for (auto& d : other) d = std::make_shared<FakeData>();
  WideGraph w = wide_graph(data, 300);
  Graph g = collect_graph({w.root.get()});
  EXPECT_EQ(g.order.size(), 6001u);
  std::set<const LeafData*> distinct;
  for (const NodePtr& l : w.leaves)
    if (l->op == Op::Param) distinct.insert(l->data.get());
  EXPECT_EQ(g.inputs.size(), 1 + 1000 + distinct.size());
  std::set<const Node*> input_nodes(g.inputs.begin(), g.inputs.end());
  EXPECT_EQ(input_nodes.size(), g.inputs.size());
  for (const NodePtr& l : w.leaves) {
    const Node* in = g.inputs.at(static_cast<size_t>(g.input_of.at(l.get())));
    if (l->op == Op::Scalar) EXPECT_EQ(in, l.get());
    else EXPECT_EQ(in->data, l->data);
  }
  // Operands come before their users.
  std::map<const Node*, size_t> pos;
  for (size_t i = 0; i < g.order.size(); ++i) pos[g.order[i]] = i;
  for (const Node* n : g.order)
    for (const NodePtr& c : n->inputs) EXPECT_LT(pos.at(c.get()), pos.at(n));
  // New data in the same pattern: same key (a cache hit); another pattern: another key.
  EXPECT_EQ(collect_graph({wide_graph(other, 300).root.get()}).key, g.key);
  EXPECT_NE(collect_graph({wide_graph(data, 150).root.get()}).key, g.key);
  // A small graph after the big one (maps sized from the previous graph) still comes out right.
  auto x = param({3});
  Graph small = collect_graph({make_node(Op::Add, {x, x}).get()});
  EXPECT_EQ(small.inputs.size(), 1u);
  EXPECT_EQ(small.order.size(), 2u);
}

TEST(GraphKey, DeepChainDoesNotOverflowTheStack) {
  NodePtr x = param({4});
  for (int i = 0; i < 200000; ++i) x = make_node(Op::Sin, {x});
  auto g = collect_graph({x.get()});
  EXPECT_EQ(g.order.size(), 200001u);
  // Destroying a 200k-deep chain must not overflow the stack either.
  NodeList keep;
  keep.push_back(x);
}

void expect_error(std::function<void()> f, ErrorKind kind, std::vector<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected an lt::Error";
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    for (auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(Infer, BroadcastMismatchNamesOpAndShapes) {
  expect_error([] { make_node(Op::Add, {param({2, 3}), param({4})}); }, ErrorKind::Runtime, {"add", "[2, 3]", "[4]"});
}

TEST(Infer, DtypeRules) {
  expect_error([] { make_node(Op::Exp, {param({2}, DType::Int64)}); }, ErrorKind::Type, {"exp", "int64"});
  expect_error([] { make_node(Op::Add, {param({2}), param({2}, DType::Float64)}); }, ErrorKind::Type, {"add"});
  expect_error([] { make_node(Op::Where, {param({2}), param({2}), param({2})}); }, ErrorKind::Type, {"where"});
  EXPECT_EQ(make_node(Op::Lt, {param({2}), param({2})})->dtype, DType::Bool);
}

TEST(Infer, ReduceAndMovement) {
  Attrs a;
  a.ints = {-1};
  EXPECT_EQ(make_node(Op::ReduceSum, {param({2, 3, 4})}, a)->shape, (Shape{2, 3}));
  a.keepdim = true;
  EXPECT_EQ(make_node(Op::ReduceSum, {param({2, 3, 4})}, a)->shape, (Shape{2, 3, 1}));
  a.ints = {3};
  expect_error([&] { make_node(Op::ReduceSum, {param({2, 3, 4})}, a); }, ErrorKind::Index, {"reduce_sum", "out of range"});
  Attrs r;
  r.ints = {5, 5};
  expect_error([&] { make_node(Op::Reshape, {param({2, 3})}, r); }, ErrorKind::Runtime, {"reshape", "[5, 5]", "6"});
  Attrs p;
  p.ints = {0, 0};
  expect_error([&] { make_node(Op::Permute, {param({2, 3})}, p); }, ErrorKind::Runtime, {"permute"});
  Attrs e;
  e.ints = {4, 3};
  EXPECT_EQ(make_node(Op::Expand, {param({1, 3})}, e)->shape, (Shape{4, 3}));
  e.ints = {4, 5};
  expect_error([&] { make_node(Op::Expand, {param({2, 3})}, e); }, ErrorKind::Runtime, {"expand", "[2, 3]"});
  expect_error([] { make_node(Op::Matmul, {param({2, 3}), param({4, 5})}); }, ErrorKind::Runtime, {"matmul", "[2, 3]", "[4, 5]"});
  EXPECT_EQ(make_node(Op::Matmul, {param({7, 2, 3}), param({3, 5})})->shape, (Shape{7, 2, 5}));
  EXPECT_EQ(make_node(Op::Matmul, {param({3}), param({3})})->shape, (Shape{}));
}

TEST(Registry, EveryOpHasANameAndInfo) {
  for (const auto& info : all_ops()) {
    Op back;
    ASSERT_TRUE(op_from_name(info.name, &back)) << info.name;
    EXPECT_EQ(back, info.op);
  }
}

TEST(DType, Promotion) {
  EXPECT_EQ(promote(DType::Int64, DType::Float16), DType::Float16);
  EXPECT_EQ(promote(DType::Float16, DType::BFloat16), DType::Float32);
  EXPECT_EQ(promote(DType::Bool, DType::Int32), DType::Int32);
  EXPECT_EQ(promote(DType::UInt8, DType::Int8), DType::Int32);
  EXPECT_EQ(promote_with_scalar(DType::Int32, ScalarKind::Float), DType::Float32);
  EXPECT_EQ(promote_with_scalar(DType::Float16, ScalarKind::Float), DType::Float16);
  EXPECT_EQ(promote_with_scalar(DType::Bool, ScalarKind::Int), DType::Int64);
  EXPECT_EQ(promote_with_scalar(DType::Int8, ScalarKind::Int), DType::Int8);
}

TEST(Shape, BroadcastSameShapesAndZeroDimOperands) {
  EXPECT_EQ(broadcast_shapes({2, 3}, {2, 3}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({2, 3}, {}, "add"), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes({}, {4, 1, 5}, "add"), (Shape{4, 1, 5}));
  EXPECT_EQ(broadcast_shapes({}, {}, "add"), Shape{});
  EXPECT_EQ(broadcast_shapes({0}, {}, "add"), Shape{0});
  EXPECT_EQ(broadcast_shapes({3, 1}, {1, 4}, "add"), (Shape{3, 4}));
  EXPECT_EQ(broadcast_shapes({5}, {2, 1}, "add"), (Shape{2, 5}));
  EXPECT_EQ(broadcast_shapes({0, 1}, {3}, "add"), (Shape{0, 3}));
  try {
    broadcast_shapes({2, 3}, {4}, "mul");
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("mul: shapes [2, 3] and [4] are not broadcastable"), msg.npos) << msg;
  }
}

}  // namespace
}  // namespace lt
