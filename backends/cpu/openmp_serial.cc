#include "backends/cpu/openmp_serial.h"

#include <dlfcn.h>

namespace lt::cpu {
namespace {

// libgomp as oneDNN loaded it (its soname, already in the process: RTLD_NOLOAD), so the thread
// count set is the one oneDNN's regions read. PyTorch ships its own, renamed, libgomp, whose
// settings stay its own.
struct Gomp {
  int (*get_max_threads)() = nullptr;
  void (*set_num_threads)(int) = nullptr;
  Gomp() {
    void* h = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) return;
    get_max_threads = reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
    set_num_threads = reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
    if (!get_max_threads || !set_num_threads) get_max_threads = nullptr, set_num_threads = nullptr;
  }
};

const Gomp& gomp() {
  static const Gomp g;
  return g;
}

}  // namespace

OpenmpSerial::OpenmpSerial() {
  const Gomp& g = gomp();
  if (!g.set_num_threads) return;
  saved_ = g.get_max_threads();  // the calling thread's own setting (an OpenMP ICV per thread)
  if (saved_ > 1)
    g.set_num_threads(1);
  else
    saved_ = 0;
}

OpenmpSerial::~OpenmpSerial() {
  if (saved_) gomp().set_num_threads(saved_);
}

}  // namespace lt::cpu
