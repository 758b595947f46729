// The on-disk compile cache (runtime/disk_cache.h): a second process compiles nothing; damaged,
// foreign and wrong-key entries are rebuilt with the right results; unwritable directories and
// concurrent writers are safe; `lazytensor cache info|clear`.
//
// Cross-process cases run this test binary again as a child (--gtest_filter=DiskCacheChild.*)
// with LT_DCT_OUT set: the child runs a fixed workload against the given LT_CACHE_DIR and writes
// its counters and results (as exact hex floats) to that file.
#include "runtime/disk_cache.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "runtime/executor.h"
#include "test_util.h"

extern char** environ;

namespace lt {
namespace {

namespace fs = std::filesystem;

// ---- the child's workload -------------------------------------------------------------------

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i) + scale);
  return v;
}

struct Workload {
  std::vector<std::vector<float>> values;  // one per graph
  std::vector<std::string> caches;         // last_graph()["cache"] at each graph's first sync
};

// Five different graphs (fused elementwise + reduction, softmax, matmul + epilogue, random
// numbers, integer/cast), each synced twice with a changed runtime scalar.
Workload run_workload() {
  Workload w;
  const Device dev = Device::parse("lazy:cpu");
  auto xs = ramp(32 * 64, 0.f), ws = ramp(64, 1.f), ms = ramp(64 * 16, 2.f);
  Tensor x = from_host(xs.data(), DType::Float32, {32, 64}, dev);
  Tensor wv = from_host(ws.data(), DType::Float32, {64}, dev);
  Tensor m = from_host(ms.data(), DType::Float32, {64, 16}, dev);
  std::vector<int32_t> is(100);
  for (int i = 0; i < 100; ++i) is[i] = (i * 37) % 101 - 50;
  Tensor xi = from_host(is.data(), DType::Int32, {100}, dev);
  mark_step();
  auto record = [&](const Tensor& t, int step) {
    mark_step();
    if (step == 0) {
      w.caches.push_back(metrics::last_graph().cache);
      w.values.push_back(t.to_vector<float>());
    } else {
      auto v = t.to_vector<float>();
      w.values.back().insert(w.values.back().end(), v.begin(), v.end());
    }
  };
  for (int step = 0; step < 2; ++step) {
    double s = 1.0 + 0.5 * step;
    record(((x * wv + 0.5).sin() * s).relu().sum({1}), step);
  }
  for (int step = 0; step < 2; ++step) record(softmax(x * (1.0 + step), 1), step);
  for (int step = 0; step < 2; ++step) record((matmul(x, m) * (2.0 - step)).tanh(), step);
  manual_seed(7);
  for (int step = 0; step < 2; ++step)
    record(rand({257}, DType::Float32, dev) + static_cast<double>(step), step);
  for (int step = 0; step < 2; ++step)
    record((xi * static_cast<int64_t>(3 + step)).to(DType::Float32).abs().sqrt(), step);
  return w;
}

TEST(DiskCacheChild, Workload) {
  const char* out = std::getenv("LT_DCT_OUT");
  if (!out) GTEST_SKIP() << "runs only as the child process of the other disk cache tests";
  metrics::reset();
  Workload w = run_workload();
  auto c = metrics::counters();
  std::ofstream f(out);
  f << "graph_compiles " << c["graph_compiles"] << "\n";
  f << "disk_cache_hits " << c["disk_cache_hits"] << "\n";
  f << "caches";
  for (auto& s : w.caches) f << " " << s;
  f << "\n";
  for (auto& v : w.values) {
    f << "values";
    char buf[64];
    for (float x : v) {
      std::snprintf(buf, sizeof buf, " %a", static_cast<double>(x));
      f << buf;
    }
    f << "\n";
  }
}

// ---- running children -----------------------------------------------------------------------

struct ChildResult {
  int status = -1;  // exit code, or -signal
  int64_t compiles = -1, disk_hits = -1;
  std::vector<std::string> caches;
  std::vector<std::string> values;  // one line of hex floats per graph
  std::string err;                  // the child's stderr
  int warnings() const {
    int n = 0;
    std::istringstream in(err);
    for (std::string line; std::getline(in, line);)
      if (line.find("warning: disk cache") != std::string::npos) ++n;
    return n;
  }
};

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

struct Child {
  pid_t pid = -1;
  std::string out, err;
};

// Starts this binary as the workload child with LT_CACHE_DIR=dir (LT_DEBUG=debug when given).
// With as_nobody (when this test runs as root) the child drops to uid/gid 65534, for whom
// permissions hold.
Child start_child(const std::string& dir, const std::string& tag, const char* debug = nullptr,
                  bool as_nobody = false) {
  Child c;
  static int counter = 0;
  std::string base = (fs::temp_directory_path() / ("lt_dct_" + std::to_string(getpid()) + "_" +
                                                   tag + "_" + std::to_string(counter++)))
                         .string();
  c.out = base + ".out";
  c.err = base + ".err";
  std::remove(c.out.c_str());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view s(*e);
    if (s.starts_with("LT_CACHE_DIR=") || s.starts_with("LT_DEBUG=") ||
        s.starts_with("LT_DCT_OUT=") || s.starts_with("GTEST_") || s.starts_with("LT_DUMP_DIR="))
      continue;
    env.emplace_back(s);
  }
  env.push_back("LT_CACHE_DIR=" + dir);
  env.push_back("LT_DCT_OUT=" + c.out);
  if (debug) env.push_back(std::string("LT_DEBUG=") + debug);
  std::vector<char*> envp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string exe = self_exe();
  std::string filter = "--gtest_filter=DiskCacheChild.Workload";
  std::vector<char*> argv = {exe.data(), filter.data(), nullptr};
  int err_fd = ::open(c.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  c.pid = fork();
  if (c.pid == 0) {
    ::dup2(err_fd, 2);
    ::dup2(null_fd, 1);
    if (as_nobody && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0))
      _exit(126);
    ::execve(exe.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  ::close(err_fd);
  ::close(null_fd);
  return c;
}

ChildResult finish_child(const Child& c) {
  ChildResult r;
  int st = 0;
  if (c.pid > 0 && waitpid(c.pid, &st, 0) == c.pid)
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
  std::ifstream e(c.err);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  std::ifstream in(c.out);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ls(line);
    std::string word;
    ls >> word;
    if (word == "graph_compiles")
      ls >> r.compiles;
    else if (word == "disk_cache_hits")
      ls >> r.disk_hits;
    else if (word == "caches")
      for (std::string s; ls >> s;) r.caches.push_back(s);
    else if (word == "values")
      r.values.push_back(line);
  }
  std::remove(c.out.c_str());
  std::remove(c.err.c_str());
  return r;
}

ChildResult run_child(const std::string& dir, const char* debug = nullptr) {
  return finish_child(start_child(dir, "run", debug));
}

std::vector<fs::path> entries(const std::string& dir) {
  std::vector<fs::path> v;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".ltc") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<fs::path> all_files(const std::string& dir) {
  std::vector<fs::path> v;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir, ec)) v.push_back(e.path());
  return v;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "lt_disk_cache_XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : "";
  }
  ~TempDir() {
    std::error_code ec;
    fs::permissions(path_, fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The first run in an empty directory: compiles every graph and writes one entry for each.
ChildResult cold_run(const std::string& dir) {
  ChildResult r = run_child(dir);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.compiles, 5);
  EXPECT_EQ(r.disk_hits, 0);
  EXPECT_EQ(r.values.size(), 5u);
  EXPECT_EQ(r.caches, std::vector<std::string>(5, "compiled"));
  EXPECT_EQ(entries(dir).size(), 5u);
  return r;
}

void expect_warm(const ChildResult& r, const ChildResult& cold) {
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.compiles, 0) << r.err;
  EXPECT_EQ(r.disk_hits, 5);
  EXPECT_EQ(r.caches, std::vector<std::string>(5, "disk"));
  EXPECT_EQ(r.values, cold.values);
}

// ---- tests ----------------------------------------------------------------------------------

TEST(DiskCache, SecondProcessCompilesNothingAndGetsTheSameResults) {
  TempDir dir;
  ChildResult cold = cold_run(dir.path());
  // The first graph checked against the host: sum_j relu(sin(x*w + 0.5) * s), s = 1 then 1.5.
  auto xs = ramp(32 * 64, 0.f), ws = ramp(64, 1.f);
  std::vector<double> want;
  for (double s : {1.0, 1.5})
    for (int i = 0; i < 32; ++i) {
      double acc = 0;
      for (int j = 0; j < 64; ++j)
        acc += std::max(0.0, std::sin(static_cast<double>(xs[i * 64 + j]) * ws[j] + 0.5) * s);
      want.push_back(acc);
    }
  std::istringstream first(cold.values.at(0));
  std::string word;
  first >> word;
  std::vector<double> got;
  for (std::string v; first >> v;) got.push_back(std::strtod(v.c_str(), nullptr));
  testing::expect_close(got, want, 1e-4, 1e-4, "relu-sum graph");

  ChildResult warm = run_child(dir.path());
  expect_warm(warm, cold);
  EXPECT_EQ(entries(dir.path()).size(), 5u);
  EXPECT_EQ(all_files(dir.path()).size(), 5u) << "temp files left behind";
}

TEST(DiskCache, MissingDirectoryIsCreated) {
  TempDir dir;
  std::string nested = dir.path() + "/a/b/cache";
  ChildResult cold = cold_run(nested);
  expect_warm(run_child(nested), cold);
}

struct Damage {
  const char* name;
  void (*apply)(const std::vector<fs::path>& files);
};

void PrintTo(const Damage& d, std::ostream* os) { *os << d.name; }

void flip(const fs::path& p, size_t at) {
  std::string s = read_bytes(p);
  ASSERT_LT(at, s.size());
  s[at] = static_cast<char>(s[at] ^ 0x5a);
  write_bytes(p, s);
}

const Damage kDamages[] = {
    {"truncated_half",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) fs::resize_file(p, fs::file_size(p) / 2);
     }},
    {"truncated_by_one",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) fs::resize_file(p, fs::file_size(p) - 1);
     }},
    {"empty",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) fs::resize_file(p, 0);
     }},
    {"flipped_payload_byte",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) flip(p, fs::file_size(p) * 3 / 4);
     }},
    {"flipped_last_byte",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) flip(p, fs::file_size(p) - 1);
     }},
    {"flipped_checksum",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) flip(p, 24);
     }},
    {"bad_magic",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) flip(p, 0);
     }},
    {"format_version_from_the_future",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) {
         std::string s = read_bytes(p);
         s[8] = 99;  // u32 little-endian format version
         write_bytes(p, s);
       }
     }},
    {"other_library_version",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) flip(p, 32 + 8 + 3);  // inside the version string
     }},
    {"payload_longer_than_header_says",
     [](const std::vector<fs::path>& fs_) {
       for (auto& p : fs_) write_bytes(p, read_bytes(p) + std::string(16, '\0'));
     }},
    {"wrong_key",
     [](const std::vector<fs::path>& fs_) {
       // Every file gets its neighbour's (valid) contents.
       std::vector<std::string> data;
       for (auto& p : fs_) data.push_back(read_bytes(p));
       for (size_t i = 0; i < fs_.size(); ++i) write_bytes(fs_[i], data[(i + 1) % data.size()]);
     }},
    {"garbage",
     [](const std::vector<fs::path>& fs_) {
       uint32_t x = 12345;
       for (auto& p : fs_) {
         std::string s(fs::file_size(p), '\0');
         for (auto& c : s) c = static_cast<char>((x = x * 1664525u + 1013904223u) >> 24);
         write_bytes(p, s);
       }
     }},
};

class DiskCacheDamage : public ::testing::TestWithParam<Damage> {};

TEST_P(DiskCacheDamage, IsDetectedRebuiltAndRewritten) {
  TempDir dir;
  ChildResult cold = cold_run(dir.path());
  auto files = entries(dir.path());
  ASSERT_EQ(files.size(), 5u);
  std::vector<std::string> good;
  for (auto& p : files) good.push_back(read_bytes(p));
  GetParam().apply(files);
  for (size_t i = 0; i < files.size(); ++i) ASSERT_NE(read_bytes(files[i]), good[i]);

  // Each damaged entry is a miss: recompiled, same results, at most one warning line each.
  ChildResult r = run_child(dir.path(), "1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.compiles, 5) << r.err;
  EXPECT_EQ(r.disk_hits, 0);
  EXPECT_EQ(r.values, cold.values);
  EXPECT_GE(r.warnings(), 1) << r.err;
  EXPECT_LE(r.warnings(), 5) << r.err;
  // ... and rewritten, whole: the next process loads them all.
  for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(read_bytes(files[i]).size(), good[i].size());
  ChildResult again = run_child(dir.path());
  expect_warm(again, cold);
  EXPECT_EQ(again.warnings(), 0);
  EXPECT_EQ(all_files(dir.path()).size(), 5u);
}

INSTANTIATE_TEST_SUITE_P(All, DiskCacheDamage, ::testing::ValuesIn(kDamages),
                         [](const ::testing::TestParamInfo<Damage>& i) {
                           return std::string(i.param.name);
                         });

TEST(DiskCache, DamageIsSilentWithoutDebug) {
  TempDir dir;
  ChildResult cold = cold_run(dir.path());
  for (auto& p : entries(dir.path())) fs::resize_file(p, 10);
  ChildResult r = run_child(dir.path());
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.compiles, 5);
  EXPECT_EQ(r.values, cold.values);
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
}

TEST(DiskCache, UnwritableDirectoryOnlyDisablesWriting) {
  TempDir dir;
  // A path under a regular file can never be created, whoever runs the test (root included).
  std::string file = dir.path() + "/not_a_dir";
  write_bytes(file, "x");
  std::string cache = file + "/cache";
  ChildResult r = run_child(cache, "1");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.compiles, 5);
  EXPECT_EQ(r.values.size(), 5u);
  EXPECT_LE(r.warnings(), 1) << r.err;  // one line for the directory, not one per graph
  ChildResult quiet = run_child(cache);
  EXPECT_EQ(quiet.status, 0);
  EXPECT_EQ(quiet.values, r.values);
  EXPECT_EQ(quiet.err.find("warning"), std::string::npos) << quiet.err;
}

TEST(DiskCache, ReadOnlyDirectoryIsReadButNotWritten) {
  TempDir dir;
  ChildResult cold = cold_run(dir.path());
  auto files = entries(dir.path());
  fs::remove(files[0]);  // one graph must compile and cannot be stored
  // Root ignores permissions, so as root the reading process runs as nobody.
  const bool as_nobody = geteuid() == 0;
  const auto rx = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                  fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(dir.path(), rx, fs::perm_options::replace);
  ChildResult r = finish_child(start_child(dir.path(), "ro", "1", as_nobody));
  ASSERT_NE(r.status, 126) << "cannot drop privileges";
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.compiles, 1) << r.err;
  EXPECT_EQ(r.disk_hits, 4);
  EXPECT_EQ(r.values, cold.values);
  EXPECT_EQ(r.warnings(), 1) << r.err;  // "cannot write to <dir>", once
  EXPECT_EQ(entries(dir.path()).size(), 4u);
  EXPECT_EQ(all_files(dir.path()).size(), 4u);
}

TEST(DiskCache, ConcurrentWritersOfTheSameKeys) {
  TempDir dir;
  constexpr int kProcs = 4;
  for (int round = 0; round < 2; ++round) {
    std::error_code ec;
    for (auto& p : all_files(dir.path())) fs::remove(p, ec);
    std::vector<Child> kids;
    for (int i = 0; i < kProcs; ++i) kids.push_back(start_child(dir.path(), "conc"));
    std::vector<ChildResult> rs;
    for (auto& k : kids) rs.push_back(finish_child(k));
    for (auto& r : rs) {
      EXPECT_EQ(r.status, 0) << r.err;
      EXPECT_EQ(r.values.size(), 5u);
      EXPECT_EQ(r.values, rs[0].values);
      EXPECT_EQ(r.compiles + r.disk_hits, 5);
    }
    EXPECT_EQ(entries(dir.path()).size(), 5u);
    EXPECT_EQ(all_files(dir.path()).size(), 5u) << "temp files left behind";
    ChildResult warm = run_child(dir.path(), "1");
    expect_warm(warm, rs[0]);
    EXPECT_EQ(warm.warnings(), 0) << warm.err;
  }
}

// In-process: an entry written by this process is found again once the memory cache is gone.
class InProcess : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("LT_CACHE_DIR", dir_.path().c_str(), 1); }
  void TearDown() override {
    ::setenv("LT_CACHE_DIR", "off", 1);
    clear_graph_cache();
  }
  TempDir dir_;
};

TEST_F(InProcess, ClearingTheMemoryCacheHitsTheDisk) {
  clear_graph_cache();
  const Device dev = Device::parse("lazy:cpu");
  auto xs = ramp(1000, 3.f);
  auto graph = [&] {
    Tensor x = from_host(xs.data(), DType::Float32, {10, 100}, dev);
    Tensor y = (x.exp() * 0.25 + x.sin()).sum({1});
    return y.to_vector<float>();
  };
  metrics::reset();
  auto first = graph();
  auto c = metrics::counters();
  EXPECT_EQ(c["graph_compiles"], 1);
  EXPECT_EQ(metrics::last_graph().cache, "compiled");
  EXPECT_EQ(entries(dir_.path()).size(), 1u);

  auto second = graph();
  EXPECT_EQ(metrics::last_graph().cache, "memory");

  clear_graph_cache();
  metrics::reset();
  auto third = graph();
  c = metrics::counters();
  EXPECT_EQ(c["graph_compiles"], 0);
  EXPECT_EQ(c["disk_cache_hits"], 1);
  EXPECT_EQ(c["kernels_compiled"], 0);
  EXPECT_EQ(metrics::last_graph().cache, "disk");
  EXPECT_GE(metrics::last_graph().kernels, 1);
  EXPECT_FALSE(last_kernel_sources().empty());
  EXPECT_EQ(first, second);
  EXPECT_EQ(first, third);

  // With the cache off nothing is read or written.
  ::setenv("LT_CACHE_DIR", "off", 1);
  clear_graph_cache();
  metrics::reset();
  graph();
  EXPECT_EQ(metrics::counters()["graph_compiles"], 1);
  EXPECT_FALSE(cache_info().enabled);
}

TEST_F(InProcess, CacheInfoAndClearInCpp) {
  clear_graph_cache();
  const Device dev = Device::parse("lazy:cpu");
  Tensor x = from_host(ramp(64, 0.f).data(), DType::Float32, {64}, dev);
  (x.tanh() + 2.0).to_vector<float>();
  DiskCacheInfo info = cache_info();
  EXPECT_TRUE(info.enabled);
  EXPECT_EQ(info.dir, dir_.path());
  EXPECT_EQ(info.entries, 1);
  EXPECT_GT(info.bytes, 100);
  write_bytes(dir_.path() + "/not_ours.txt", "keep me");
  EXPECT_EQ(cache_clear(), 1);
  EXPECT_EQ(cache_info().entries, 0);
  EXPECT_TRUE(fs::exists(dir_.path() + "/not_ours.txt"));
}

// ---- plan serialization ---------------------------------------------------------------------

Plan sample_plan() {
  const Device dev = Device::parse("lazy:cpu");
  Tensor x = from_host(ramp(48, 0.f).data(), DType::Float32, {6, 8}, dev);
  Tensor y = softmax(x * 3.0, 1) + x.sum({1}, true).sqrt();
  NodePtr root = y.node();
  std::vector<const Node*> roots = {root.get()};
  return lower(collect_graph(roots));
}

TEST(PlanSerialize, RoundTripsAndRejectsEveryTruncation) {
  Plan p = sample_plan();
  ASSERT_FALSE(p.kernels.empty());
  std::string bytes = serialize_plan(p);
  Plan q = deserialize_plan(bytes);
  EXPECT_EQ(serialize_plan(q), bytes);
  EXPECT_EQ(q.kernels.size(), p.kernels.size());
  EXPECT_EQ(q.output_buffers, p.output_buffers);
  EXPECT_EQ(q.grouping, p.grouping);
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(deserialize_plan(std::string_view(bytes).substr(0, n)), Error) << "at " << n;
  EXPECT_THROW(deserialize_plan(bytes + "x"), Error);
}

TEST(PlanSerialize, CorruptBytesNeverCrash) {
  std::string bytes = serialize_plan(sample_plan());
  int rejected = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string b = bytes;
    b[i] = static_cast<char>(b[i] ^ 0xff);
    try {
      deserialize_plan(b);  // may decode (e.g. a changed constant) but must stay in range
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 0);
}

// ---- the command line -----------------------------------------------------------------------

struct Cli {
  int code;
  std::string out;
};

Cli cli(const std::string& cache_dir, const std::string& args) {
  std::string cmd = "LT_CACHE_DIR='" + cache_dir + "' " + LT_CLI_PATH + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Cli r{-1, ""};
  if (!p) return r;
  char buf[512];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) r.out.append(buf, n);
  int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(DiskCacheCli, InfoAndClear) {
  TempDir dir;
  cold_run(dir.path());
  write_bytes(dir.path() + "/keep.txt", "not ours");
  Cli info = cli(dir.path(), "cache info");
  EXPECT_EQ(info.code, 0) << info.out;
  EXPECT_NE(info.out.find(dir.path()), std::string::npos) << info.out;
  EXPECT_NE(info.out.find("entries: 5"), std::string::npos) << info.out;
  Cli clear = cli(dir.path(), "cache clear");
  EXPECT_EQ(clear.code, 0) << clear.out;
  EXPECT_TRUE(entries(dir.path()).empty());
  EXPECT_TRUE(fs::exists(dir.path() + "/keep.txt"));
  info = cli(dir.path(), "cache info");
  EXPECT_EQ(info.code, 0);
  EXPECT_NE(info.out.find("entries: 0"), std::string::npos) << info.out;
  EXPECT_EQ(cli(dir.path(), "cache clear").code, 0);  // clearing an empty cache is fine
  EXPECT_EQ(cli("off", "cache info").code, 0);
  EXPECT_EQ(cli(dir.path() + "/never/made", "cache info").code, 0);
}

TEST(DiskCacheCli, BadSubcommandIsExit2WithOneLine) {
  for (const char* args : {"cache frobnicate", "cache", "cache info extra"}) {
    Cli r = cli("off", args);
    EXPECT_EQ(r.code, 2) << args;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << ": " << r.out;
  }
}

}  // namespace
}  // namespace lt
