// CUDA C -> cubin with NVRTC. Needs no GPU (CI compiles every generated kernel with it), links
// libnvrtc from the CUDA toolkit.
#pragma once
#include <string>
#include <vector>

namespace lt {

// How hard NVRTC optimizes. FastCompile, for the generated kernels, adds --Ofast-compile=min
// (NVRTC >= 12.8) only when LT_CUDA_FAST_COMPILE=1: it cuts their NVRTC CPU by ~40% (dev machine;
// on an H200 host a GPT step's first call 0.55 -> 0.50 s) but slows row kernels (H200:
// layer_norm+gelu 0.121 -> 0.144 ms, softmax 0.041 -> 0.061 ms, the GPT step 19.8 -> 20.6 ms), so
// it is off by default. The flash kernels are always Full.
enum class NvrtcEffort { Full, FastCompile };

// Whether FastCompile adds --Ofast-compile=min in this process (LT_CUDA_FAST_COMPILE=1 and an
// NVRTC that has it); part of the disk cache's key.
bool nvrtc_fast_compile();

// Compiles `source` for `arch` ("sm_90") to a cubin (nvrtcGetCUBIN) with -std=c++17,
// -default-device, --fmad=false and no fast-math. Throws lt::Error carrying NVRTC's log (and the
// source lines it names) when compilation fails.
std::vector<char> nvrtc_compile_cubin(const std::string& source, const std::string& arch = "sm_90",
                                      const std::string& name = "lazytensor_kernels.cu",
                                      NvrtcEffort effort = NvrtcEffort::Full);

// The same to PTX for a virtual architecture ("compute_90"); the driver JIT-compiles it. Used when
// the GPU is newer than every architecture this NVRTC knows.
std::string nvrtc_compile_ptx(const std::string& source, const std::string& arch = "compute_90",
                              const std::string& name = "lazytensor_kernels.cu",
                              NvrtcEffort effort = NvrtcEffort::Full);

// The SM versions this NVRTC compiles for (75, 80, ..., 90, ...), ascending.
std::vector<int> nvrtc_supported_archs();
// "13.0".
std::string nvrtc_version();

// What to compile for a device of compute capability major.minor: "sm_XY" with *cubin = true when
// NVRTC supports it; else "compute_NN" (PTX, *cubin = false) for the newest architecture it knows
// when the device is newer still. Throws lt::Error for devices older than NVRTC supports.
std::string nvrtc_target_for(int major, int minor, bool* cubin);

}  // namespace lt
