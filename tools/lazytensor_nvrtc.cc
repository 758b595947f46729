// lazytensor-nvrtc: the NVRTC worker (backends/cuda/nvrtc_worker.h), not meant to be run by hand.
// `--server`: the fork server the library starts, its control socket on stdin. Without arguments:
// one request on stdin, one reply on stdout.
#include <cstring>

#include "backends/cuda/nvrtc_worker.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--server") == 0) return lt::run_nvrtc_server(0);
  return lt::serve_nvrtc_request(0, 1);
}
