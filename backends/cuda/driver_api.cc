#include "backends/cuda/driver_api.h"

#include <dlfcn.h>

#include <mutex>

#include "ir/error.h"

namespace lt {

std::string CudaDriver::error_name(CUresult r) const {
  const char* name = nullptr;
  if (cuGetErrorName && cuGetErrorName(r, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(r));
}

void CudaDriver::check(CUresult r, const char* call) const {
  if (r == CUDA_SUCCESS) return;
  const char* desc = nullptr;
  if (cuGetErrorString) cuGetErrorString(r, &desc);
  fail(ErrorKind::Runtime, "CUDA error ", error_name(r), " in ", call,
       desc ? std::string(": ") + desc : "");
}

CudaDriver load_cuda_driver(const char* library) {
  CudaDriver d;
  // The handle stays open for the life of the process: function pointers into it are kept.
  void* h = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    d.error = std::string("cannot load ") + library + (why ? std::string(": ") + why : "");
    return d;
  }
  std::string missing;
#define LT_CUDA_DRIVER_FN(name)                                 \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(h, #name)); \
  if (!d.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
  bool graphs = true;
#define LT_CUDA_DRIVER_OPTIONAL_FN(name)                        \
  d.name = reinterpret_cast<decltype(d.name)>(dlsym(h, #name)); \
  graphs = graphs && d.name;
#include "backends/cuda/driver_functions.def"
#undef LT_CUDA_DRIVER_OPTIONAL_FN
#undef LT_CUDA_DRIVER_FN
  d.graphs = graphs;
  if (!missing.empty()) {
    d.error = std::string(library) + " lacks " + missing + " (driver too old?)";
    return d;
  }
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    d.error = "cuInit failed: " + d.error_name(r);
    return d;
  }
  int count = 0;
  r = d.cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS) {
    d.error = "cuDeviceGetCount failed: " + d.error_name(r);
    return d;
  }
  d.cuDriverGetVersion(&d.version);
  d.device_count = count;
  d.ok = true;
  if (count == 0) d.error = "the CUDA driver reports no device";
  return d;
}

const CudaDriver& cuda_driver() {
  static const CudaDriver driver = [] {
    try {
      return load_cuda_driver();
    } catch (...) {
      CudaDriver d;
      d.error = "loading the CUDA driver failed";
      return d;
    }
  }();
  return driver;
}

bool cuda_device_available() {
  try {
    const CudaDriver& d = cuda_driver();
    return d.ok && d.device_count > 0;
  } catch (...) {
    return false;
  }
}

}  // namespace lt
