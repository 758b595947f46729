// lazytensor-nvrtc: the NVRTC fork server (backends/cuda/nvrtc_worker.h) that the library starts
// as `lazytensor-nvrtc --server`, its control socket on stdin; not meant to be run by hand.
#include <cstdio>
#include <cstring>

#include "backends/cuda/nvrtc_worker.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--server") == 0) return lt::run_nvrtc_server(0);
  std::fprintf(stderr, "lazytensor-nvrtc: started by the lazytensor library as `%s --server`\n",
               argv[0]);
  return 2;
}
