#include "backends/cuda/toolkit_library.h"

#include <cuda.h>  // CUDA_VERSION: the toolkit whose major version we load
#include <dlfcn.h>

#include <vector>

namespace lt {

void* open_toolkit_library(const std::string& stem, std::string* tried) {
  const std::string major = std::to_string(CUDA_VERSION / 1000);
  std::vector<std::string> names = {stem + ".so." + major, stem + ".so"};
#ifdef LT_NVRTC_DIR
  names.push_back(std::string(LT_NVRTC_DIR) + "/" + stem + ".so." + major);
#endif
  names.push_back("/usr/local/cuda/lib64/" + stem + ".so." + major);
  tried->clear();
  for (const auto& name : names) {
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + name;
  }
  return nullptr;
}

}  // namespace lt
