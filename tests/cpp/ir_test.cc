// IR: Merkle hashing, graph keys, shape/dtype inference errors, the op registry.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/half.h"
#include "ir/node.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;

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
  // node_hash packs the small fields into one word and hashes the value and the rand stream only
  // where set (a flag bit each): -0.0 is set (its bits are not zero), and neither an unset value
  // nor an unset stream may collide with a set one, nor the list lengths with each other.
  EXPECT_NE(make_constant(DType::Float32, 0)->hash, make_constant(DType::Float32, -0.0)->hash);
  EXPECT_NE(make_constant(DType::Float32, 0, {2})->hash,
            make_constant(DType::Float32, 0, {2, 1})->hash);
  Attrs c16, c64;
  c16.dtype = DType::Float16;
  c64.dtype = DType::Float64;
  EXPECT_NE(make_node(Op::Cast, {x}, c16)->hash, make_node(Op::Cast, {x}, c64)->hash);
  auto seed = make_scalar(DType::Int64, 1), offset = make_scalar(DType::Int64, 2);
  Attrs s0, s1;
  s0.ints = {2, 3};
  s1.ints = {2, 3};
  s1.stream = 1;
  EXPECT_NE(make_node(Op::Rand, {seed, offset}, s0)->hash,
            make_node(Op::Rand, {seed, offset}, s1)->hash);
  Attrs v1 = s0;
  v1.value = 1;
  EXPECT_NE(make_node(Op::Rand, {seed, offset}, s0)->hash,
            make_node(Op::Rand, {seed, offset}, v1)->hash);
  Attrs w1 = s0;
  w1.value = std::bit_cast<double>(uint64_t{1});  // the same 64-bit word as s1's stream
  EXPECT_NE(make_node(Op::Rand, {seed, offset}, s1)->hash,
            make_node(Op::Rand, {seed, offset}, w1)->hash);
  Attrs p01, p10;  // reshape [2, 3] -> [6] vs [6, 1]: same words hashed, different list lengths
  p01.ints = {6};
  p10.ints = {6, 1};
  EXPECT_NE(make_node(Op::Reshape, {x}, p01)->hash, make_node(Op::Reshape, {x}, p10)->hash);
  // Operand order and each operand's whole 128-bit hash count.
  auto y = param({2, 3}, DType::Float64);
  auto xc = make_node(Op::Cast, {x}, c64);
  EXPECT_NE(make_node(Op::Sub, {xc, y})->hash, make_node(Op::Sub, {y, xc})->hash);
}

TEST(Hash, ScalarValueIsNotHashed) {
  EXPECT_EQ(make_scalar(DType::Float32, 0.1)->hash, make_scalar(DType::Float32, 0.2)->hash);
  EXPECT_NE(make_scalar(DType::Float32, 0.1)->hash, make_scalar(DType::Float64, 0.1)->hash);
}

TEST(Hash, StableAcrossRunsAndVersions) {
  // The disk cache keys on these hashes: changing the hash function must be deliberate (the
  // twelfth session did: node_hash packs its small fields into one word, fewer multiplies per op).
  auto n = make_node(Op::Mul, {param({4, 8}), make_scalar(DType::Float32, 2.0)});
  EXPECT_EQ(n->hash.hex(),
            make_node(Op::Mul, {param({4, 8}), make_scalar(DType::Float32, 3.0)})->hash.hex());
  EXPECT_EQ(n->hash.hex().size(), 32u);
  EXPECT_EQ(n->hash.hex(), "97164d5a39867a4e5b89315a873c2f89");
}

TEST(Hash, ScalarLeafHashesAreStablePerDtype) {
  // make_scalar takes these from a per-dtype table instead of hashing each leaf; the values are the
  // ones node_hash gives a Scalar leaf (re-pinned when the twelfth session packed node_hash's small
  // fields into one word).
  const char* expected[kNumDTypes] = {
      "dc02af5715171a60a65c1afd4b15fe59", "ff51915c0c6df9685fcccf1ecd58b354",
      "bd1d0b1b750ebad8e6e200b616c5d7a0", "a9c71fe0d7d53d498f6f91040573d2fa",
      "8351034ccf07d8795b59b0a63ac1ba3a", "9bed0144986292786f4b7f550f889801",
      "d8c3614942970bf9b09e8c93f7f6e293", "252c2ccb41ff39536cc00119f5d2b259",
      "99948446df6d66e4ff4172ff3c38e005"};
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
    NodePtr l = i % 3 == 0
                    ? make_scalar(DType::Float32, i)
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
    if (l->op == Op::Scalar)
      EXPECT_EQ(in, l.get());
    else
      EXPECT_EQ(in->data, l->data);
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
    for (auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

TEST(Infer, BroadcastMismatchNamesOpAndShapes) {
  expect_error(
      [] {
        make_node(Op::Add, {param({2, 3}), param({4})});
      },
      ErrorKind::Runtime, {"add", "[2, 3]", "[4]"});
}

TEST(Infer, DtypeRules) {
  expect_error([] { make_node(Op::Exp, {param({2}, DType::Int64)}); }, ErrorKind::Type,
               {"exp", "int64"});
  expect_error(
      [] {
        make_node(Op::Add, {param({2}), param({2}, DType::Float64)});
      },
      ErrorKind::Type, {"add"});
  expect_error(
      [] {
        make_node(Op::Where, {param({2}), param({2}), param({2})});
      },
      ErrorKind::Type, {"where"});
  EXPECT_EQ(make_node(Op::Lt, {param({2}), param({2})})->dtype, DType::Bool);
}

TEST(Infer, ReduceAndMovement) {
  Attrs a;
  a.ints = {-1};
  EXPECT_EQ(make_node(Op::ReduceSum, {param({2, 3, 4})}, a)->shape, (Shape{2, 3}));
  a.keepdim = true;
  EXPECT_EQ(make_node(Op::ReduceSum, {param({2, 3, 4})}, a)->shape, (Shape{2, 3, 1}));
  a.ints = {3};
  expect_error(
      [&] {
        make_node(Op::ReduceSum, {param({2, 3, 4})}, a);
      },
      ErrorKind::Index, {"reduce_sum", "out of range"});
  Attrs r;
  r.ints = {5, 5};
  expect_error(
      [&] {
        make_node(Op::Reshape, {param({2, 3})}, r);
      },
      ErrorKind::Runtime, {"reshape", "[5, 5]", "6"});
  Attrs p;
  p.ints = {0, 0};
  expect_error(
      [&] {
        make_node(Op::Permute, {param({2, 3})}, p);
      },
      ErrorKind::Runtime, {"permute"});
  Attrs e;
  e.ints = {4, 3};
  EXPECT_EQ(make_node(Op::Expand, {param({1, 3})}, e)->shape, (Shape{4, 3}));
  e.ints = {4, 5};
  expect_error(
      [&] {
        make_node(Op::Expand, {param({2, 3})}, e);
      },
      ErrorKind::Runtime, {"expand", "[2, 3]"});
  expect_error(
      [] {
        make_node(Op::Matmul, {param({2, 3}), param({4, 5})});
      },
      ErrorKind::Runtime, {"matmul", "[2, 3]", "[4, 5]"});
  EXPECT_EQ(make_node(Op::Matmul, {param({7, 2, 3}), param({3, 5})})->shape, (Shape{7, 2, 5}));
  EXPECT_EQ(make_node(Op::Matmul, {param({3}), param({3})})->shape, (Shape{}));
}

// Attribute arithmetic that overflows int64 is a clear error, not undefined behaviour (these run
// under UBSan in make test-asan; the trace-file fuzzer reaches the same rules with any numbers).
TEST(Infer, SizeArithmeticOverflowIsAnError) {
  const int64_t big = int64_t{1} << 40, huge = int64_t{1} << 62;
  expect_error([&] { param({big, big}); }, ErrorKind::Runtime, {"param", "2^60"});
  expect_error(
      [&] {
        make_node(Op::Add, {param({big, 1}), param({1, big})});
      },
      ErrorKind::Runtime, {"add", "2^60"});
  Attrs r;
  r.ints = {int64_t{1} << 32, int64_t{1} << 32, 2};  // wraps to 0 in int64 arithmetic
  expect_error([&] { make_node(Op::Reshape, {param({0})}, r); }, ErrorKind::Runtime, {"reshape"});
  Attrs sl;
  sl.ints = {0, huge, 3};  // start, step, size: the last index overflows
  expect_error([&] { make_node(Op::Slice, {param({8})}, sl); }, ErrorKind::Runtime,
               {"slice", "overflow"});
  Attrs cv;
  cv.ints = {1, 1, 0, 0, huge, 1, 1};  // dilation 2^62 over a 3-wide kernel
  expect_error(
      [&] {
        make_node(Op::Conv2d, {param({1, 2, 5, 5}), param({4, 2, 3, 3})}, cv);
      },
      ErrorKind::Runtime, {"conv2d", "overflow"});
  cv.ints = {1, 1, 0, 0, 1, 1, huge};  // groups times in_channels/groups
  expect_error(
      [&] {
        make_node(Op::Conv2d, {param({1, 2, 5, 5}), param({4, 2, 3, 3})}, cv);
      },
      ErrorKind::Runtime, {"conv2d", "overflow"});
  Attrs ln;
  ln.ints = {1, std::numeric_limits<int64_t>::max(), 2};  // has_weight + has_bias overflowed
  expect_error(
      [&] {
        make_node(Op::LayerNorm, {param({2, 3})}, ln);
      },
      ErrorKind::Runtime, {"layer_norm"});
}

// A float scalar carries an integer twin for integral consumers; 1e30, inf and NaN have none and
// must not be converted with a plain cast (undefined behaviour; found by the trace fuzzer).
TEST(Node, FloatScalarsOutsideInt64GetIntegerTwinZero) {
  for (double v : {1e30, -5.5e26, std::numeric_limits<double>::infinity(), std::nan("")}) {
    NodePtr s = make_scalar(DType::Float32, v);
    EXPECT_EQ(s->scalar_i, 0) << v;
    EXPECT_TRUE(std::isnan(v) ? std::isnan(s->scalar) : s->scalar == v);
  }
  EXPECT_EQ(make_scalar(DType::Float32, -7.9)->scalar_i, -7);
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

TEST(DType, WidensExactly) {
  EXPECT_TRUE(widens_exactly(DType::BFloat16, DType::Float32));
  EXPECT_TRUE(widens_exactly(DType::Float16, DType::Float64));
  EXPECT_TRUE(widens_exactly(DType::Float32, DType::Float64));
  EXPECT_FALSE(widens_exactly(DType::Float16, DType::BFloat16));  // range
  EXPECT_FALSE(widens_exactly(DType::BFloat16, DType::Float16));  // significand
  EXPECT_FALSE(widens_exactly(DType::Float32, DType::BFloat16));
  EXPECT_FALSE(widens_exactly(DType::Float64, DType::Float32));
  EXPECT_TRUE(widens_exactly(DType::Bool, DType::BFloat16));
  EXPECT_TRUE(widens_exactly(DType::UInt8, DType::BFloat16));  // 255 has 8 significant bits
  EXPECT_FALSE(widens_exactly(DType::Int32, DType::Float32));
  EXPECT_TRUE(widens_exactly(DType::Int32, DType::Float64));
  EXPECT_FALSE(widens_exactly(DType::Int64, DType::Float64));
  EXPECT_FALSE(widens_exactly(DType::Int8, DType::UInt8));  // negatives
  EXPECT_FALSE(widens_exactly(DType::UInt8, DType::Int8));  // 255
  EXPECT_TRUE(widens_exactly(DType::UInt8, DType::Int32));
  EXPECT_FALSE(widens_exactly(DType::Int32, DType::Bool));
  // Every uint8 and int8 value survives a round trip through bfloat16 and float16 (the half
  // conversions of ir/half.h as the oracle).
  for (int v = -128; v < 256; ++v) {
    EXPECT_EQ(bfloat16_to_float(float_to_bfloat16(static_cast<float>(v))), static_cast<float>(v))
        << v;
    EXPECT_EQ(half_to_float(float_to_half(static_cast<float>(v))), static_cast<float>(v)) << v;
  }
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
