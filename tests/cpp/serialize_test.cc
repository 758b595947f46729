// The trace file: round trip, and a table of malformed files that must each give one clear error.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

#include "graph_util.h"
#include "ir/error.h"
#include "ir/serialize.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;
std::shared_ptr<LeafData> fake(const TraceInput&) { return std::make_shared<FakeData>(); }
std::string none(int) { return ""; }

std::string sample() {
  auto x = param({4, 3});
  auto w = param({3});
  Attrs ax;
  ax.ints = {1};
  auto y = make_node(Op::ReduceSum, {make_node(Op::Sin, {make_node(Op::Mul, {x, w})})}, ax);
  auto z = make_node(Op::Mul, {y, make_scalar(DType::Float32, 2.5)});
  auto g = collect_graph({z.get()});
  return trace_to_json(g, "h", "cpu", none, none);
}

TEST(Trace, RoundTripKeepsTheGraphKey) {
  std::string text = sample();
  LoadedTrace t = trace_from_json(text, fake);
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.inputs.size(), 3u);
  EXPECT_EQ(t.roots[0]->shape, (Shape{4}));
  auto x = param({4, 3});
  auto w = param({3});
  Attrs ax;
  ax.ints = {1};
  auto z = make_node(
      Op::Mul, {make_node(Op::ReduceSum, {make_node(Op::Sin, {make_node(Op::Mul, {x, w})})}, ax),
                make_scalar(DType::Float32, 7)});
  EXPECT_EQ(collect_graph({t.roots[0].get()}).key, collect_graph({z.get()}).key);
  EXPECT_DOUBLE_EQ(t.inputs[2].value, 2.5);
}

// An iota (a lazy device's positions: a one-hot gradient, a causal mask) is a leaf without data:
// it round-trips by its length; a malformed one is refused with the node named.
TEST(Trace, IotaRoundTripsAndMalformedOnesAreRefused) {
  auto hit = make_node(Op::Eq, {param({5, 1}, DType::Int64), make_iota(7)});
  const std::string text = trace_to_json(collect_graph({hit.get()}), "h", "cpu", none, none);
  LoadedTrace t = trace_from_json(text, fake);
  ASSERT_EQ(t.roots.size(), 1u);
  EXPECT_EQ(t.roots[0]->shape, (Shape{5, 7}));
  EXPECT_EQ(collect_graph({t.roots[0].get()}).key, collect_graph({hit.get()}).key);
  for (const nlohmann::json& shape : {nlohmann::json{7, 2}, nlohmann::json{-3}}) {
    nlohmann::json bad = nlohmann::json::parse(text);
    int edited = 0;
    for (auto& n : bad["nodes"])
      if (n["op"] == "iota") n["shape"] = shape, ++edited;
    ASSERT_EQ(edited, 1) << text;
    try {
      trace_from_json(bad.dump(), fake);
      ADD_FAILURE() << "accepted an iota of shape " << shape.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("iota"), std::string::npos) << e.what();
    }
  }
}

// JSON has no inf or NaN: a causal mask's -inf scalar (what a GPT step's dump holds) and NaN or
// inf constants are written as strings and read back as the same values.
TEST(Trace, NonFiniteScalarsAndConstantsRoundTrip) {
  const double inf = std::numeric_limits<double>::infinity();
  auto x = param({2, 3});
  auto keep = make_node(Op::Gt, {x, make_scalar(DType::Float32, 0.5)});
  auto masked = make_node(Op::Where, {keep, x, make_scalar(DType::Float32, -inf)});
  auto y = make_node(Op::Add, {make_node(Op::Maximum, {masked, make_constant(DType::Float32, inf)}),
                               make_constant(DType::Float32, std::nan(""))});
  const std::string text = trace_to_json(collect_graph({y.get()}), "h", "cpu", none, none);
  EXPECT_EQ(text.find("null"), std::string::npos) << text;
  LoadedTrace t = trace_from_json(text, fake);
  EXPECT_EQ(collect_graph({t.roots[0].get()}).key, collect_graph({y.get()}).key);
  std::vector<double> scalars;
  for (const auto& in : t.inputs)
    if (in.scalar) scalars.push_back(in.value);
  ASSERT_EQ(scalars.size(), 2u);
  EXPECT_TRUE(std::isinf(scalars[0]) || std::isinf(scalars[1]));
  EXPECT_DOUBLE_EQ(std::min(scalars[0], scalars[1]), -inf);
  bool saw_inf = false, saw_nan = false;
  for (const auto& n : t.nodes)
    if (n->op == Op::Constant)
      saw_inf |= n->attrs.value == inf, saw_nan |= std::isnan(n->attrs.value);
  EXPECT_TRUE(saw_inf && saw_nan);
  // Any other string is a clear error, not a crash.
  std::string broken = text;
  broken.replace(broken.find("\"-inf\""), 6, "\"-infinity\"");
  try {
    trace_from_json(broken, fake);
    ADD_FAILURE() << "a bad float string was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("-infinity"), std::string::npos) << e.what();
  }
}

std::string replace(std::string s, const std::string& a, const std::string& b) {
  auto p = s.find(a);
  EXPECT_NE(p, std::string::npos) << a;
  if (p != std::string::npos) s.replace(p, a.size(), b);
  return s;
}

std::string edit(const std::string& text, const std::function<void(nlohmann::json&)>& f) {
  auto j = nlohmann::json::parse(text);
  f(j);
  return j.dump();
}

TEST(Trace, MalformedFilesGiveClearErrors) {
  std::string ok = sample();
  struct Case {
    std::string name, text, expect;
  };
  std::vector<Case> cases = {
      {"empty", "", "not valid JSON"},
      {"truncated", ok.substr(0, ok.size() / 2), "not valid JSON"},
      {"not an object", "[1,2]", "top level"},
      {"wrong format", replace(ok, "lazytensor-trace", "other"), "format"},
      {"future version", replace(ok, "\"version\": 1", "\"version\": 99"), "newer"},
      {"unknown op", replace(ok, "\"op\": \"sin\"", "\"op\": \"frobnicate\""), "unknown op"},
      {"unknown dtype", replace(ok, "\"dtype\": \"float32\"", "\"dtype\": \"float7\""),
       "unknown dtype"},
      {"dangling input", edit(ok, [](auto& j) { j["nodes"][0]["inputs"][0] = 42; }), "not defined"},
      {"wrong arity", replace(ok, "\"op\": \"sin\"", "\"op\": \"add\""), "expected 2 operands"},
      {"bad shape",
       edit(ok,
            [](auto& j) {
              j["inputs"][0]["shape"] = {4, -3};
            }),
       "dimension"},
      {"shape mismatch", edit(ok, [](auto& j) { j["inputs"][1]["shape"] = {5}; }), "broadcastable"},
      {"id out of range", edit(ok, [](auto& j) { j["outputs"][0]["node"] = 1000; }),
       "does not exist"},
      {"wrong attr type", edit(ok, [](auto& j) { j["nodes"][2]["attrs"]["axes"] = "one"; }),
       "wrong type"},
      {"recorded shape lies", edit(ok, [](auto& j) { j["nodes"][2]["shape"] = {7}; }), "infers"},
      {"scalar with dims", edit(ok, [](auto& j) { j["inputs"][2]["shape"] = {2}; }), "scalar"},
      {"no outputs", replace(ok, "\"outputs\": [", "\"outputz\": ["), "outputs"},
  };
  for (auto& c : cases) {
    try {
      trace_from_json(c.text, fake);
      ADD_FAILURE() << c.name << ": loaded";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.expect), std::string::npos)
          << c.name << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos)
          << c.name << ": more than one line";
    }
  }
}

}  // namespace
}  // namespace lt

namespace lt {
namespace {

// Regressions found by tests/fuzz (make test-fuzz): each corpus file named regression_* once
// crashed the loader (or made UBSan report, under make test-asan) and must now give lt::Error or
// load, nothing else.
TEST(Trace, FuzzerRegressionsGiveClearErrors) {
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(std::string(LT_SOURCE_DIR) +
                                                               "/tests/fuzz/corpus/trace")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("regression_", 0) != 0) continue;
    ++seen;
    std::ifstream f(entry.path(), std::ios::binary);
    ASSERT_TRUE(f) << name;
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    try {
      trace_from_json(text, [](const TraceInput&) { return nullptr; });
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("trace:"), std::string::npos)
          << name << ": " << e.what();
    }
  }
  EXPECT_GE(seen, 4);  // the directory was found and read
}

}  // namespace
}  // namespace lt
