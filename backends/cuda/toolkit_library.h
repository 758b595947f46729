// Opens a CUDA toolkit library (NVRTC, cuBLAS) privately with dlopen(RTLD_LOCAL): its symbols stay
// out of our lookup scope (libnvrtc carries its own copy of parts of libstdc++, which would
// otherwise interpose ours when Python loads us late), and a missing library only disables what
// needs it. Tries the toolkit's major version, the unversioned name, the build's toolkit
// directory and /usr/local/cuda/lib64, in that order.
#pragma once
#include <string>

namespace lt {

// `stem` is e.g. "libnvrtc". Returns the handle, or nullptr with *tried naming every path tried.
void* open_toolkit_library(const std::string& stem, std::string* tried);

}  // namespace lt
