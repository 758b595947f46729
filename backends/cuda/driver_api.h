// The CUDA driver API, loaded at run time with dlopen("libcuda.so.1"), so the library builds
// with only the toolkit's headers and loads on machines without a GPU or a driver. Every entry
// point the backend uses is resolved once with dlsym; cuda_device_available() says whether a usable
// device exists and never throws.
#pragma once
#include <cuda.h>

#include <string>

namespace lt {

struct CudaDriver {
  bool ok = false;       // libcuda loaded, every symbol resolved, cuInit succeeded
  std::string error;     // why not, when !ok
  int device_count = 0;  // devices cuInit found (0 when !ok)
  int version = 0;       // cuDriverGetVersion, e.g. 13000

  // Every entry point of driver_functions.def; optional ones stay null when the driver lacks them.
#define LT_CUDA_DRIVER_FN(name) decltype(&::name) name = nullptr;
#define LT_CUDA_DRIVER_OPTIONAL_FN(name) LT_CUDA_DRIVER_FN(name)
#include "backends/cuda/driver_functions.def"
#undef LT_CUDA_DRIVER_OPTIONAL_FN
#undef LT_CUDA_DRIVER_FN
  bool graphs = false;  // every CUDA graph entry point resolved (cuda_graph.h)

  // Throws lt::Error("CUDA error <NAME> in <call>: <description>") unless r is CUDA_SUCCESS.
  void check(CUresult r, const char* call) const;
  // The error's name ("CUDA_ERROR_OUT_OF_MEMORY"), or its number when the driver has none.
  std::string error_name(CUresult r) const;
};

// Loads `library` and initializes the driver. Never throws: failures are reported in `error`.
// Each call opens the library anew (tests use it with a library that does not exist); the
// backend uses cuda_driver().
CudaDriver load_cuda_driver(const char* library = "libcuda.so.1");

// The process's driver, loaded on first use (thread-safe). Never throws.
const CudaDriver& cuda_driver();

// True when libcuda loads and reports at least one device. Never throws, never crashes.
bool cuda_device_available();

}  // namespace lt
