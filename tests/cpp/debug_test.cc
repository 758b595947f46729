// Debugging tools: dump -> replay (C++ API and CLI), bisect naming a hand-edited node, CLI exit
// codes for malformed files, LT_DEBUG storm warnings.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace lt {
namespace {
namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("lt_debug_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Runs the CLI; returns {exit code, output}.
std::pair<int, std::string> cli(const std::string& args) {
  std::string cmd = std::string(LT_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (p && fgets(buf, sizeof buf, p)) out += buf;
  int status = p ? pclose(p) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A small training-like step: y = relu(x @ w + b).exp().sum(1)
std::vector<Tensor> step_tensors(const Device& dev) {
  Tensor x = testing::random_tensor({8, 5}, 1, dev), w = testing::random_tensor({5, 3}, 2, dev),
         b = testing::random_tensor({3}, 3, dev);
  Tensor h = (matmul(x, w) + b).relu();
  return {(h * 0.5).exp().sum({1}), h};
}

TEST(Debug, DumpReplaysOnReferenceAndCpu) {
  auto dir = temp_dir("replay");
  auto ts = step_tensors(Device::parse("lazy:cpu"));
  std::string path = (dir / "step.json").string();
  debug::dump(path, ts, true);
  EXPECT_TRUE(fs::exists(dir / "step.inputs.bin"));
  for (const char* be : {"reference", "cpu"}) {
    auto r = debug::replay(path, be, true);
    EXPECT_TRUE(r.ok) << be << ": " << r.message;
    EXPECT_TRUE(r.checked);
    EXPECT_EQ(r.outputs, 2);
    auto [code, out] = cli("replay " + path + " --backend " + be + " --check");
    EXPECT_EQ(code, 0) << out;
  }
  auto [code, out] = cli("show " + path + " --format dot");
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("digraph"), std::string::npos);
}

TEST(Debug, BisectNamesAHandEditedNode) {
  auto dir = temp_dir("bisect");
  std::string path = (dir / "step.json").string();
  debug::dump(path, step_tensors(Device::parse("lazy:cpu")), true);
  EXPECT_FALSE(debug::bisect(path, "cpu").diverged);
  // Change the exp node into sin, as a user hunting a bug might.
  nlohmann::json j = nlohmann::json::parse(std::ifstream(path));
  int edited = -1;
  for (auto& n : j["nodes"])
    if (n["op"] == "exp") n["op"] = "sin", edited = n["id"];
  ASSERT_GE(edited, 0);
  std::ofstream(path) << j.dump();
  auto r = debug::bisect(path, "cpu");
  EXPECT_TRUE(r.diverged);
  EXPECT_EQ(r.node_id, edited) << r.message;
  EXPECT_EQ(r.op, "sin");
  auto [code, out] = cli("bisect " + path + " --backend cpu");
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("%" + std::to_string(edited) + " = sin"), std::string::npos) << out;
  auto [rcode, rout] = cli("replay " + path + " --backend reference --check");
  EXPECT_EQ(rcode, 1) << rout;  // the recorded outputs no longer match
}

TEST(Debug, MalformedFilesExitTwoWithOneLine) {
  auto dir = temp_dir("bad");
  std::string good = (dir / "good.json").string();
  debug::dump(good, step_tensors(Device::parse("lazy:cpu")), true);
  std::ifstream good_in(good);
  std::string text((std::istreambuf_iterator<char>(good_in)), {});
  auto write = [&](const std::string& name, const std::string& body) {
    std::ofstream((dir / name).string()) << body;
    return (dir / name).string();
  };
  auto j = nlohmann::json::parse(text);
  auto edit = [&](auto f) {
    auto c = j;
    f(c);
    return c.dump();
  };
  std::vector<std::pair<std::string, std::string>> cases = {
      {"missing.json", ""},
      {"garbage.json", "{not json"},
      {"future.json", edit([](auto& c) { c["version"] = 7; })},
      {"unknown_op.json", edit([](auto& c) { c["nodes"][0]["op"] = "teleport"; })},
      {"bad_ref.json", edit([](auto& c) { c["inputs"][0]["data"] = "../etc/passwd#0"; })},
      {"no_data.json", edit([](auto& c) { c["inputs"][0]["data"] = "nothere.bin#0"; })},
  };
  for (auto& [name, body] : cases) {
    std::string path =
        name == "missing.json" ? (dir / "does_not_exist.json").string() : write(name, body);
    auto [code, out] = cli("replay " + path + " --backend cpu --check");
    EXPECT_EQ(code, 2) << name << ": " << out;
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << name << ": " << out;
  }
  // A truncated data file.
  fs::resize_file(dir / "good.inputs.bin", 8);
  auto [code, out] = cli("replay " + good + " --backend cpu --check");
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("truncated"), std::string::npos) << out;
  EXPECT_EQ(cli("replay").first, 2);
  EXPECT_EQ(cli("frobnicate").first, 2);
}

TEST(Debug, IrTextNamesOpsAndShapes) {
  Tensor x = testing::random_tensor({2, 3}, 4, Device::parse("lazy:cpu"));
  std::string t = debug::ir_text({(x.sin() * 2).sum({1})});
  EXPECT_NE(t.find("sin("), std::string::npos) << t;
  EXPECT_NE(t.find("reduce_sum("), std::string::npos) << t;
  EXPECT_NE(t.find("float32[2]"), std::string::npos) << t;
  mark_step();
}

}  // namespace
}  // namespace lt
