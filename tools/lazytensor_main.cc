// The `lazytensor` command-line tool. Exit 0 on success and match, 1 on mismatch, 2 on bad input
// (with one line saying what is wrong).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "runtime/debug.h"
#include "runtime/disk_cache.h"

namespace {

int usage(FILE* out) {
  std::fprintf(
      out,
      "usage: lazytensor <command> [args]\n"
      "  replay FILE.json [--backend reference|cpu|cuda] [--check] [--tol 1e-5]\n"
      "  bisect FILE.json [--backend cpu|cuda] [--tol 1e-5]   first node where the backend "
      "diverges\n"
      "  show FILE.json [--format text|dot]\n"
      "  cache info|clear\n"
      "  backends                                          backends built into this binary\n");
  return out == stdout ? 0 : 2;
}

struct Args {
  std::string file, backend = "cpu", format = "text";
  bool check = false;
  double tol = 1e-5;
};

Args parse(int argc, char** argv, int from) {
  Args a;
  for (int i = from; i < argc; ++i) {
    std::string s = argv[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= argc) lt::fail(lt::ErrorKind::Value, flag, " needs a value");
      return argv[++i];
    };
    if (s == "--backend")
      a.backend = value("--backend");
    else if (s == "--format")
      a.format = value("--format");
    else if (s == "--check")
      a.check = true;
    else if (s == "--tol") {
      std::string v = value("--tol");
      char* end = nullptr;
      a.tol = std::strtod(v.c_str(), &end);
      if (!end || *end || !(a.tol >= 0))
        lt::fail(lt::ErrorKind::Value, "--tol: not a non-negative number: ", v);
    } else if (!s.empty() && s[0] == '-')
      lt::fail(lt::ErrorKind::Value, "unknown option ", s);
    else if (a.file.empty())
      a.file = s;
    else
      lt::fail(lt::ErrorKind::Value, "unexpected argument ", s);
  }
  if (a.file.empty()) lt::fail(lt::ErrorKind::Value, "missing FILE.json");
  if (a.backend != "reference" && a.backend != "cpu" && a.backend != "cuda")
    lt::fail(lt::ErrorKind::Value, "--backend must be reference, cpu or cuda, not ", a.backend);
  return a;
}

int show(const Args& a) {
  std::ifstream in(a.file, std::ios::binary);
  if (!in) lt::fail(lt::ErrorKind::Value, "cannot open ", a.file);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  struct NoData : lt::LeafData {};
  auto t =
      lt::trace_from_json(text, [](const lt::TraceInput&) { return std::make_shared<NoData>(); });
  std::vector<const lt::Node*> roots;
  for (auto& r : t.roots) roots.push_back(r.get());
  lt::Graph g = lt::collect_graph(roots);
  if (a.format == "dot")
    std::fputs(lt::graph_dot(g).c_str(), stdout);
  else if (a.format == "text")
    std::fputs(lt::graph_text(g).c_str(), stdout);
  else
    lt::fail(lt::ErrorKind::Value, "--format must be text or dot, not ", a.format);
  return 0;
}

// `cache info`: where the disk cache is and what it holds; `cache clear`: removes our entries.
int cache(int argc, char** argv) {
  std::string sub = argc > 2 ? argv[2] : "";
  if (argc > 3) lt::fail(lt::ErrorKind::Value, "unexpected argument ", argv[3]);
  if (sub == "info") {
    lt::DiskCacheInfo info = lt::cache_info();
    if (!info.enabled) {
      std::printf("disk cache: disabled (LT_CACHE_DIR=off or no HOME)\n");
      return 0;
    }
    std::printf("directory: %s\nentries: %lld\nbytes: %lld\n", info.dir.c_str(),
                static_cast<long long>(info.entries), static_cast<long long>(info.bytes));
    return 0;
  }
  if (sub == "clear") {
    std::string dir = lt::disk_cache_dir();
    if (dir.empty()) {
      std::printf("disk cache: disabled (LT_CACHE_DIR=off or no HOME); nothing to clear\n");
      return 0;
    }
    int64_t n = lt::cache_clear();
    std::printf("removed %lld entries from %s\n", static_cast<long long>(n), dir.c_str());
    return 0;
  }
  lt::fail(lt::ErrorKind::Value, sub.empty() ? std::string("missing subcommand: info or clear")
                                             : "unknown subcommand '" + sub + "': info or clear");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string cmd = argv[1];
  try {
    if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
    if (cmd == "backends") {
      for (const char* b : {"reference", "cpu", "cuda"})
        std::printf("%-10s %s\n", b, lt::backend_available(b) ? "available" : "not available");
      return 0;
    }
    if (cmd == "show") return show(parse(argc, argv, 2));
    if (cmd == "replay") {
      Args a = parse(argc, argv, 2);
      auto r = lt::debug::replay(a.file, a.backend, a.check, a.tol);
      std::printf("%s\n", r.message.c_str());
      if (a.check && !r.checked) return 2;
      return r.ok ? 0 : 1;
    }
    if (cmd == "bisect") {
      Args a = parse(argc, argv, 2);
      auto r = lt::debug::bisect(a.file, a.backend, a.tol);
      std::printf("%s\n", r.message.c_str());
      return r.diverged ? 1 : 0;
    }
    if (cmd == "cache") return cache(argc, argv);
  } catch (const std::exception& e) {
    std::string msg = e.what();
    for (auto& c : msg)
      if (c == '\n') c = ' ';
    std::fprintf(stderr, "lazytensor %s: %s\n", cmd.c_str(), msg.c_str());
    return 2;
  }
  std::fprintf(stderr, "lazytensor: unknown command '%s'\n", cmd.c_str());
  return usage(stderr);
}
