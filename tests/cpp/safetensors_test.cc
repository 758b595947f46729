// nn/safetensors.h: the format layer on hand-made files (a table of malformed ones, each with
// the words its error must contain), the header writer, lt::save / lt::load round trips of every
// dtype on eager and lazy devices (bit-exact, with the file's bytes checked directly), and every
// file of the fuzz corpus (tests/fuzz/corpus/safetensors), which holds the fuzzer's regressions.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "ir/half.h"
#include "test_util.h"

namespace lt {
namespace {

using safetensors::Entry;
using safetensors::Header;
using safetensors::parse;

// A file: the 8-byte length of `header`, the header (unpadded, as other writers may leave it),
// `body`.
std::string file_bytes(const std::string& header, const std::string& body = "",
                       uint64_t n = UINT64_MAX) {
  if (n == UINT64_MAX) n = header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + body;
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offs) {
  return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
         ",\"data_offsets\":" + offs + "}";
}

struct Malformed {
  const char* what;
  std::string bytes;
  const char* message;  // a fragment the error must contain
};

std::vector<Malformed> malformed_cases() {
  const std::string f32 = entry("a", "F32", "[1]", "[0,4]");
  return {
      {"empty file", "", "0 bytes, shorter than the 8-byte header length"},
      {"short length", std::string("\x01\x02", 2), "2 bytes"},
      {"length past the end", file_bytes("{}", "", 1 << 20),
       "header length 1048576 exceeds the file"},
      {"length over the format's limit", file_bytes("{}", "", 1ull << 62), "exceeds the file"},
      {"length of 2^64-1", file_bytes("{}", "", UINT64_MAX - 1), "exceeds the file"},
      {"not json", file_bytes("{not json"), "the header is not JSON"},
      {"not utf-8", file_bytes("{\"\xff\":1}"), "the header is not JSON"},
      {"array header", file_bytes("[1,2]"), "not a JSON object"},
      {"empty header", file_bytes(""), "the header is not JSON"},
      {"duplicate tensor", file_bytes("{" + f32 + "," + f32 + "}", std::string(4, '\0')),
       "duplicate key \"a\""},
      {"duplicate field",
       file_bytes(
           "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           std::string(4, '\0')),
       "duplicate key \"dtype\""},
      {"duplicate metadata", file_bytes("{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}"),
       "duplicate key \"k\""},
      {"unknown dtype",
       file_bytes("{" + entry("a", "C64", "[1]", "[0,8]") + "}", std::string(8, '\0')),
       "entry \"a\" has unsupported dtype \"C64\""},
      {"dtype not a string",
       file_bytes("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}",
                  std::string(4, '\0')),
       "unsupported dtype 4"},
      {"missing field",
       file_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", std::string(4, '\0')),
       "entry \"a\" must be an object with exactly dtype, shape and data_offsets"},
      {"extra field",
       file_bytes("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
                  std::string(4, '\0')),
       "exactly dtype, shape and data_offsets"},
      {"entry not an object", file_bytes("{\"a\":[1]}"), "exactly dtype, shape and data_offsets"},
      {"empty name", file_bytes("{" + entry("", "F32", "[1]", "[0,4]") + "}", std::string(4, '\0')),
       "empty name"},
      {"negative dim",
       file_bytes("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", std::string(4, '\0')),
       "entry \"a\" has an invalid dimension -1"},
      {"float dim",
       file_bytes("{" + entry("a", "F32", "[1.0]", "[0,4]") + "}", std::string(4, '\0')),
       "invalid dimension 1.0"},
      {"bool dim",
       file_bytes("{" + entry("a", "F32", "[true]", "[0,4]") + "}", std::string(4, '\0')),
       "invalid dimension true"},
      {"dim over int64", file_bytes("{" + entry("a", "U8", "[9223372036854775808]", "[0,0]") + "}"),
       "invalid dimension 9223372036854775808"},
      {"shape not a list",
       file_bytes("{" + entry("a", "F32", "4", "[0,4]") + "}", std::string(4, '\0')),
       "shape that is not a list"},
      {"element count overflows",
       file_bytes("{" + entry("a", "U8", "[4294967296,4294967296,0]", "[0,0]") + "}"),
       "element count overflows"},
      {"byte count overflows",
       file_bytes("{" + entry("a", "F64", "[2305843009213693952]", "[0,0]") + "}"),
       "byte count overflows"},
      {"bytes do not match shape",
       file_bytes("{" + entry("a", "F32", "[2]", "[0,4]") + "}", std::string(4, '\0')),
       "shape [2] of F32 needs 8 bytes, data_offsets give 4"},
      {"offsets out of range", file_bytes("{" + f32 + "}"),
       "data_offsets [0,4] outside the 0-byte data section"},
      {"offsets reversed",
       file_bytes("{" + entry("a", "U8", "[0]", "[4,0]") + "}", std::string(4, '\0')),
       "data_offsets [4,0]"},
      {"offsets huge",
       file_bytes("{" + entry("a", "U8", "[1]", "[18446744073709551615,0]") + "}", "x"),
       "data_offsets"},
      {"offsets negative", file_bytes("{" + entry("a", "U8", "[1]", "[-1,0]") + "}", "x"),
       "data_offsets [-1,0]"},
      {"offsets of three", file_bytes("{" + entry("a", "U8", "[1]", "[0,1,1]") + "}", "x"),
       "data_offsets [0,1,1]"},
      {"overlap",
       file_bytes("{" + f32 + "," + entry("b", "F32", "[1]", "[0,4]") + "}", std::string(4, '\0')),
       "overlaps another tensor"},
      {"partial overlap",
       file_bytes(
           "{" + entry("a", "U8", "[4]", "[0,4]") + "," + entry("b", "U8", "[4]", "[2,6]") + "}",
           std::string(6, '\0')),
       "starts at 2, expected 4"},
      {"gap", file_bytes("{" + entry("a", "F32", "[1]", "[4,8]") + "}", std::string(8, '\0')),
       "a gap between tensors"},
      {"trailing bytes", file_bytes("{" + f32 + "}", std::string(9, '\0')),
       "5 bytes after the last tensor"},
      {"metadata not an object", file_bytes("{\"__metadata__\":[1]}"),
       "__metadata__ is not an object"},
      {"metadata value not a string", file_bytes("{\"__metadata__\":{\"k\":1}}"),
       "__metadata__ value of \"k\""},
  };
}

TEST(Safetensors, MalformedFilesGiveAValueErrorNamingTheFileAndTheProblem) {
  for (const Malformed& c : malformed_cases()) {
    try {
      parse(c.bytes, "file.st");
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::Value) << c.what;
      EXPECT_EQ(msg.rfind("file.st: not a valid safetensors file: ", 0), 0u)
          << c.what << ": " << msg;
      EXPECT_NE(msg.find(c.message), std::string::npos) << c.what << ": " << msg;
    }
  }
}

TEST(Safetensors, ValidLayoutsParse) {
  // Spans in any header order, empty tensors anywhere, a 0-d tensor, metadata, padding spaces.
  std::string header =
      "{" + entry("b", "U8", "[2]", "[2,4]") + "," + entry("a", "I8", "[2]", "[0,2]") + "," +
      entry("e", "F32", "[0,3]", "[4,4]") + "," + entry("z", "F64", "[0]", "[0,0]") + "," +
      entry("s", "F16", "[]", "[4,6]") + ",\"__metadata__\":{\"format\":\"pt\"}}   ";
  Header h = parse(file_bytes(header, "abcdef"), "ok.st");
  EXPECT_EQ(h.data_start, 8 + header.size());
  ASSERT_EQ(h.entries.size(), 5u);
  EXPECT_EQ(h.entries[0].name, "b");  // the header's order
  EXPECT_EQ(h.entries[0].dtype, DType::UInt8);
  EXPECT_EQ(h.entries[0].begin, 2u);
  EXPECT_EQ(h.entries[2].shape, (Shape{0, 3}));
  EXPECT_EQ(h.entries[4].shape, Shape{});
  EXPECT_EQ(h.entries[4].dtype, DType::Float16);
  EXPECT_EQ(h.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_TRUE(parse(file_bytes("{}"), "x").entries.empty());
  for (const char* name : {"F32", "F64", "F16", "BF16", "I64", "I32", "I8", "U8", "BOOL"}) {
    auto t = safetensors::dtype_from_format_name(name);
    ASSERT_TRUE(t) << name;
    EXPECT_EQ(safetensors::format_dtype_name(*t), name);
  }
  EXPECT_FALSE(safetensors::dtype_from_format_name("f32"));
}

TEST(Safetensors, EncodedHeaderIsPaddedAndReadsBack) {
  std::vector<Entry> es = {{"w", DType::BFloat16, {2, 3}, 0, 12},
                           {"caf\xc3\xa9", DType::Bool, {}, 12, 13}};
  std::string head = safetensors::encode_header(es, {{"k", "v"}});
  EXPECT_EQ(head.size() % 8, 0u);
  Header h = parse(head + std::string(13, '\1'), "enc");
  ASSERT_EQ(h.entries.size(), 2u);
  EXPECT_EQ(h.entries[0].name, "w");
  EXPECT_EQ(h.entries[0].dtype, DType::BFloat16);
  EXPECT_EQ(h.entries[1].name, "caf\xc3\xa9");
  EXPECT_EQ(h.entries[1].end, 13u);
  EXPECT_EQ(h.metadata.at("k"), "v");
  auto refuses = [](std::vector<Entry> bad, const char* fragment) {
    try {
      safetensors::encode_header(bad, {});
      ADD_FAILURE() << fragment;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Value);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  refuses({{"__metadata__", DType::UInt8, {}, 0, 1}}, "cannot be named \"__metadata__\"");
  refuses({{"", DType::UInt8, {}, 0, 1}}, "cannot be named \"\"");
  refuses({{"a", DType::UInt8, {}, 0, 1}, {"a", DType::UInt8, {}, 1, 2}},
          "two tensors named \"a\"");
  refuses({{"\xff", DType::UInt8, {}, 0, 1}}, "valid UTF-8");
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          ("lt_safetensors_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Random raw bytes that are valid values of `t` (bools 0/1), so a round trip must be bit-exact.
std::vector<unsigned char> random_raw(DType t, int64_t n, std::mt19937& rng) {
  std::vector<unsigned char> raw(static_cast<size_t>(n) * dtype_size(t));
  for (auto& b : raw) b = static_cast<unsigned char>(rng() & (t == DType::Bool ? 1 : 0xff));
  if (t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64)
    for (int64_t i = 0; i < n; ++i) {  // finite values (NaN payloads are not the point here)
      double v = std::uniform_real_distribution<double>(-1e3, 1e3)(rng);
      store_from_double(raw.data() + static_cast<size_t>(i) * dtype_size(t), t, v);
    }
  return raw;
}

TEST(Safetensors, SaveLoadRoundTripsEveryDtypeBitExactly) {
  std::mt19937 rng(7);
  for (const char* dev : {"cpu", "lazy:cpu", "lazy:reference"}) {
    Device d = Device::parse(dev);
    std::map<std::string, Tensor> ts;
    std::map<std::string, std::vector<unsigned char>> raw;
    const std::vector<Shape> shapes = {{3, 4}, {}, {0, 5}, {7}};
    for (int i = 0; i < kNumDTypes; ++i) {
      auto t = static_cast<DType>(i);
      Shape s = shapes[static_cast<size_t>(i) % shapes.size()];
      std::string name = std::string(dtype_name(t)) + "_" + std::to_string(i);
      raw[name] = random_raw(t, numel(s), rng);
      ts[name] = from_host(raw[name].data(), t, s, d);
    }
    // A pending tensor is synced by save.
    ts["pending"] = ts.at(std::string(dtype_name(DType::Float32)) + "_7") * 2.0;
    std::vector<float> want = ts["pending"].to_vector<float>();
    std::string path = temp_path(std::string("rt_") + (d.is_lazy() ? "lazy" : "cpu"));
    save(ts, path, {{"format", "pt"}});

    // The file's own bytes: each tensor's raw data at its offsets.
    std::string bytes = read_all(path);
    Header h = parse(bytes, path);
    EXPECT_EQ(h.metadata.at("format"), "pt");
    EXPECT_EQ((h.data_start - 8) % 8, 0u);
    for (const Entry& e : h.entries) {
      if (e.name == "pending") continue;
      const auto& r = raw.at(e.name);
      ASSERT_EQ(e.end - e.begin, r.size()) << e.name;
      if (!r.empty()) {  // memcmp with an empty vector's null data() is undefined behaviour
        EXPECT_EQ(std::memcmp(bytes.data() + h.data_start + e.begin, r.data(), r.size()), 0)
            << e.name;
      }
    }

    std::map<std::string, Tensor> back = load(path, d);
    ASSERT_EQ(back.size(), ts.size());
    for (const auto& [name, t] : ts) {
      const Tensor& b = back.at(name);
      EXPECT_EQ(b.dtype(), t.dtype()) << name;
      EXPECT_EQ(b.shape(), t.shape()) << name;
      EXPECT_EQ(b.device(), d) << name;
      if (name == "pending") {
        EXPECT_EQ(b.to_vector<float>(), want);
        continue;
      }
      std::vector<unsigned char> got(raw.at(name).size());
      b.copy_to_host(got.data());
      EXPECT_EQ(got, raw.at(name)) << name << " on " << dev;
    }
    std::remove(path.c_str());
  }
}

TEST(Safetensors, LoadNormalizesBoolsAndReportsBadFiles) {
  std::string path = temp_path("bools");
  {
    std::ofstream f(path, std::ios::binary);
    f << file_bytes("{" + entry("b", "BOOL", "[3]", "[0,3]") + "}", std::string("\0\x01\x07", 3));
  }
  EXPECT_EQ(load(path).at("b").to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 1}));
  {
    std::ofstream f(path, std::ios::binary);
    f << file_bytes("{" + entry("b", "BOOL", "[3]", "[0,3]") + "}", "xx");
  }
  try {
    load(path);
    ADD_FAILURE() << "a truncated file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Value);
    EXPECT_NE(std::string(e.what()).find("lt.load: " + path + ": not a valid safetensors file"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
  try {
    load(path);
    ADD_FAILURE() << "a missing file loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("cannot open " + path), std::string::npos) << e.what();
  }
  try {
    save({{"a", ones({2})}}, "/nonexistent-dir/x.safetensors");
    ADD_FAILURE() << "saved into a missing directory";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("lt.save: cannot open /nonexistent-dir/x.safetensors"),
              std::string::npos);
  }
}

// Every corpus file either parses (valid_*, which must) or is refused with lt::Error (bad_*, which
// must); regression_* files are inputs that once crashed the reader: either outcome, no crash.
TEST(Safetensors, FuzzCorpusAndRegressions) {
  std::filesystem::path dir =
      std::filesystem::path(LT_SOURCE_DIR) / "tests/fuzz/corpus/safetensors";
  int files = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    std::string name = f.path().filename().string();
    std::string bytes = read_all(f.path().string());
    bool ok = true;
    try {
      parse(bytes, name);
    } catch (const Error& e) {
      ok = false;
      EXPECT_NE(std::string(e.what()).find("not a valid safetensors file"), std::string::npos)
          << name;
    }
    if (name.rfind("valid_", 0) == 0) {
      EXPECT_TRUE(ok) << name;
    }
    if (name.rfind("bad_", 0) == 0) {
      EXPECT_FALSE(ok) << name;
    }
    ++files;
  }
  EXPECT_GE(files, 10);
}

}  // namespace
}  // namespace lt
