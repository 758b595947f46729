// C++ source locations (runtime/cpp_source.h): with capture on, a node traced here carries this
// file's name and the line of the call, and a trace dump's "source" says so; with capture off no
// location is recorded. This file is built with -g (tests/cpp/CMakeLists.txt) for addr2line.
#include "runtime/cpp_source.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "runtime/debug.h"
#include "test_util.h"

namespace lt {
namespace {

std::string source_of(const Tensor& t) { return source_str(t.node()->source); }

bool names_line(const std::string& loc, int line) {
  const std::string want = "cpp_source_test.cc:" + std::to_string(line);
  return loc.size() >= want.size() && loc.compare(loc.size() - want.size(), want.size(), want) == 0;
}

TEST(CppSource, TracedNodesNameTheCallersFileAndLineInTheDump) {
  set_cpp_source_locations(true);
  Tensor x = testing::random_tensor({4, 3}, 1, kLazy);
  const int mul_line = __LINE__ + 1;
  Tensor y = x * 2.0;
  const int sum_line = __LINE__ + 1;
  Tensor z = (y + 1.0).sum({1});  // the sum's node; the add is on the same line
  EXPECT_TRUE(names_line(source_of(y), mul_line)) << source_of(y);
  EXPECT_TRUE(names_line(source_of(z), sum_line)) << source_of(z);

  auto path = std::filesystem::temp_directory_path() / "lt_cpp_source_test.json";
  debug::dump(path.string(), {z}, false);
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in);
  std::filesystem::remove(path);
  int found = 0;
  for (const auto& n : j["nodes"]) {
    const std::string op = n["op"], src = n["source"];
    if (op == "mul") found += names_line(src, mul_line) ? 1 : 100;
    if (op == "reduce_sum") found += names_line(src, sum_line) ? 1 : 100;
  }
  EXPECT_EQ(found, 2) << j.dump(1);
  set_cpp_source_locations(false);
}

TEST(CppSource, OffRecordsNothing) {
  set_cpp_source_locations(false);
  Tensor x = testing::random_tensor({4}, 2, kLazy);
  Tensor y = x * 3.0;
  EXPECT_EQ(y.node()->source, -1);
  EXPECT_FALSE(cpp_source_locations());
}

}  // namespace
}  // namespace lt
