// A scope in which the calling thread's OpenMP parallel regions run on one thread: oneDNN (built
// on libgomp) opens a team of every core for each product, and for a small one the fork and join
// cost more than the product. On a loaded machine it is far worse: a team member that the
// scheduler has parked holds the whole product at the join for a time slice or more (an eager
// LSTM step's 32 x 64 x 16 GEMMs stalled 5-50 ms each, the script ran 0.6-0.9 s against 0.11 s
// with OMP_NUM_THREADS=1).
#pragma once

namespace lt::cpu {

class OpenmpSerial {
 public:
  OpenmpSerial();   // this thread's OpenMP regions: one thread (a no-op without libgomp loaded)
  ~OpenmpSerial();  // back to the thread count before
  OpenmpSerial(const OpenmpSerial&) = delete;
  OpenmpSerial& operator=(const OpenmpSerial&) = delete;

 private:
  int saved_ = 0;  // the thread's omp_get_max_threads() before; 0: nothing to restore
};

}  // namespace lt::cpu
