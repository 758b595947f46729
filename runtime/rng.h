// The generator's state as lt.compile's replay needs it (capture/capture.cc): a replayed step
// draws from the same counter stream that re-running the Python code would have drawn from.
// Defined beside the generator in runtime/creation.cc.
#pragma once
#include <cstdint>

namespace lt {

struct RngState {
  uint64_t seed;   // as manual_seed set it
  int64_t offset;  // the next free counter
};
RngState rng_state();
// Reserves `counters` counters, as the draws of a replayed step would have.
void rng_advance(int64_t counters);

}  // namespace lt
