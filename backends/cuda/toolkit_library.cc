#include "backends/cuda/toolkit_library.h"

#include <cuda.h>  // CUDA_VERSION: the toolkit whose major version we load
#include <dlfcn.h>

#include <filesystem>
#include <vector>

namespace lt {
namespace {

// NVRTC opens its builtins library (libnvrtc-builtins.so.<major>.<minor>) by name at its first
// compile. A toolkit on the loader's path has it there; pip's nvidia-cuda-nvrtc wheel keeps both
// in one directory without an rpath, so the name would not resolve. Loading the companion from
// the directory NVRTC came from first makes that later lookup find it (glibc matches an already
// loaded library by its soname). The handle is kept for the process's life, as NVRTC's is.
void preload_companions(const std::filesystem::path& library) {
  std::error_code ec;
  const std::string prefix = library.filename().string();
  const std::string stem = prefix.substr(0, prefix.find(".so"));
  for (const auto& e : std::filesystem::directory_iterator(library.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(stem + "-builtins.so.", 0) == 0) dlopen(e.path().c_str(), RTLD_NOW | RTLD_LOCAL);
  }
}

}  // namespace

void* open_toolkit_library(const std::string& stem, std::string* tried) {
  const std::string major = std::to_string(CUDA_VERSION / 1000);
  std::vector<std::string> names = {stem + ".so." + major, stem + ".so"};
#ifdef LT_NVRTC_DIR
  names.push_back(std::string(LT_NVRTC_DIR) + "/" + stem + ".so." + major);
#endif
  names.push_back("/usr/local/cuda/lib64/" + stem + ".so." + major);
  tried->clear();
  for (const auto& name : names) {
    if (name.front() == '/' && std::filesystem::exists(name)) preload_companions(name);
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    *tried += (tried->empty() ? "" : ", ") + name;
  }
  return nullptr;
}

}  // namespace lt
