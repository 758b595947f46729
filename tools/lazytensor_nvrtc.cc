// lazytensor-nvrtc: the NVRTC worker process (backends/cuda/nvrtc_worker.h). One request on
// stdin, one reply on stdout, then it exits; not meant to be run by hand.
#include "backends/cuda/nvrtc_worker.h"

int main() { return lt::serve_nvrtc_request(0, 1); }
