// The `lazytensor` command-line tool. Exit 0 on success, 1 on mismatch, 2 on bad input.
#include <cstdio>
#include <cstring>
#include <string>

#include "backends/backend.h"

namespace {

int usage(FILE* out) {
  std::fprintf(out,
               "usage: lazytensor <command> [args]\n"
               "  replay FILE.json [--backend reference|cpu|cuda] [--check] [--tol 1e-5]\n"
               "  bisect FILE.json [--backend cpu|cuda]\n"
               "  show FILE.json [--format text|dot]\n"
               "  cache info|clear\n"
               "  backends            list the backends built into this binary\n");
  return out == stdout ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(stderr);
  std::string cmd = argv[1];
  if (cmd == "-h" || cmd == "--help" || cmd == "help") return usage(stdout);
  if (cmd == "backends") {
    for (const char* b : {"reference", "cpu", "cuda"})
      std::printf("%-10s %s\n", b, lt::backend_available(b) ? "available" : "not built");
    return 0;
  }
  if (cmd == "replay" || cmd == "bisect" || cmd == "show" || cmd == "cache") {
    // The trace file format and the disk cache land with issue 7 / issue 5.
    std::fprintf(stderr, "lazytensor %s: not implemented yet in this build\n", cmd.c_str());
    return 2;
  }
  std::fprintf(stderr, "lazytensor: unknown command '%s'\n", cmd.c_str());
  return usage(stderr);
}
