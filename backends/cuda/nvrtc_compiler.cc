#include "backends/cuda/nvrtc_compiler.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <sstream>

#include "backends/cuda/toolkit_library.h"
#include "ir/error.h"

namespace lt {
namespace {

// NVRTC is loaded privately, not linked (backends/cuda/toolkit_library.h says why).
//
// Every NVRTC entry point we use, once: declared as members and resolved with dlsym from it.
// Hand-laid (clang-format cannot settle on a layout for this list).
// clang-format off
#define LT_NVRTC_FUNCTIONS(X)                                                        \
  X(nvrtcGetErrorString) X(nvrtcCreateProgram) X(nvrtcDestroyProgram)               \
  X(nvrtcCompileProgram) X(nvrtcGetProgramLogSize) X(nvrtcGetProgramLog)             \
  X(nvrtcGetCUBINSize) X(nvrtcGetCUBIN) X(nvrtcGetPTXSize) X(nvrtcGetPTX)            \
  X(nvrtcGetNumSupportedArchs) X(nvrtcGetSupportedArchs) X(nvrtcVersion)
// clang-format on

struct Nvrtc {
  std::string error;
#define LT_NVRTC_MEMBER(name) decltype(&::name) name = nullptr;
  LT_NVRTC_FUNCTIONS(LT_NVRTC_MEMBER)
#undef LT_NVRTC_MEMBER
};

const Nvrtc& load_nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* h = open_toolkit_library("libnvrtc", &tried);
    if (!h) {
      n.error = "cannot load NVRTC (tried " + tried + ")";
      return;
    }
    std::string missing;
#define LT_NVRTC_RESOLVE(name)                                  \
  n.name = reinterpret_cast<decltype(n.name)>(dlsym(h, #name)); \
  if (!n.name) missing += (missing.empty() ? "" : ", ") + std::string(#name);
    LT_NVRTC_FUNCTIONS(LT_NVRTC_RESOLVE)
#undef LT_NVRTC_RESOLVE
    if (!missing.empty()) n.error = "NVRTC lacks " + missing;
  });
  return n;
}

const Nvrtc& nv() {
  const Nvrtc& n = load_nvrtc();
  if (!n.error.empty())
    fail(ErrorKind::Runtime, "not available: CUDA code generation needs NVRTC: ", n.error);
  return n;
}

void check(nvrtcResult r, const char* call) {
  if (r != NVRTC_SUCCESS)
    fail(ErrorKind::Runtime, "NVRTC error ", nv().nvrtcGetErrorString(r), " in ", call);
}

struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nv().nvrtcDestroyProgram(&p);
  }
};

// NVRTC's log plus the source lines it refers to ("name(LINE): error ..."), so an error in a
// generated kernel can be read without a dump.
std::string annotate(const std::string& log, const std::string& source, const std::string& name) {
  std::vector<std::string> lines;
  std::istringstream ss(source);
  for (std::string l; std::getline(ss, l);) lines.push_back(l);
  std::ostringstream out;
  out << log;
  std::string key = name + "(";
  int shown = 0;
  for (size_t pos = log.find(key); pos != std::string::npos && shown < 8;
       pos = log.find(key, pos + 1)) {
    size_t end = log.find(')', pos);
    if (end == std::string::npos) break;
    long n = std::strtol(log.substr(pos + key.size(), end - pos - key.size()).c_str(), nullptr, 10);
    if (n >= 1 && n <= static_cast<long>(lines.size())) {
      out << "\n  line " << n << ": " << lines[static_cast<size_t>(n - 1)];
      ++shown;
    }
  }
  return out.str();
}

int nvrtc_version_number() {
  static const int v = [] {
    int major = 0, minor = 0;
    return nv().nvrtcVersion(&major, &minor) == NVRTC_SUCCESS ? major * 100 + minor : 0;
  }();
  return v;
}

// Compiles `prog`; throws with the log on failure.
void compile(Program& prog, const std::string& source, const std::string& arch,
             const std::string& name, NvrtcEffort effort) {
  check(nv().nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), 0, nullptr, nullptr),
        "nvrtcCreateProgram");
  std::string arch_opt = "--gpu-architecture=" + arch;
  // --fmad=false: no contraction of a*b+c into one FMA, so a fused kernel rounds exactly like the
  // same ops run one per kernel (eager mode, PyTorch) and like the CPU backend. The kernels are
  // memory-bound; the lost FMAs cost nothing measurable.
  std::vector<const char*> opts = {arch_opt.c_str(), "-std=c++17", "-default-device",
                                   "--fmad=false"};
  // -minimal (NVRTC >= 12.4): leave out the texture, device-runtime and driver-type
  // declarations our kernels never use; a program's fixed cost drops from 57 to 37 ms of CPU.
  if (nvrtc_version_number() >= 1204) opts.push_back("-minimal");
  if (effort == NvrtcEffort::FastCompile && nvrtc_fast_compile())
    opts.push_back("--Ofast-compile=min");
  nvrtcResult r = nv().nvrtcCompileProgram(prog.p, static_cast<int>(opts.size()), opts.data());
  if (r == NVRTC_ERROR_INVALID_OPTION && opts.size() > 4) {
    // An NVRTC whose version says it has -minimal/--Ofast-compile but that rejects them: the
    // plain options, on a fresh program.
    nv().nvrtcDestroyProgram(&prog.p);
    check(nv().nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), 0, nullptr, nullptr),
          "nvrtcCreateProgram");
    r = nv().nvrtcCompileProgram(prog.p, 4, opts.data());
  }
  if (r == NVRTC_SUCCESS) return;
  size_t size = 0;
  std::string log;
  if (nv().nvrtcGetProgramLogSize(prog.p, &size) == NVRTC_SUCCESS && size > 1) {
    log.resize(size);
    nv().nvrtcGetProgramLog(prog.p, log.data());
    log.resize(size - 1);
  }
  fail(ErrorKind::Runtime, "NVRTC failed to compile ", name, " for ", arch, " (",
       nv().nvrtcGetErrorString(r), "):\n", annotate(log, source, name));
}

}  // namespace

std::vector<char> nvrtc_compile_cubin(const std::string& source, const std::string& arch,
                                      const std::string& name, NvrtcEffort effort) {
  Program prog;
  compile(prog, source, arch, name, effort);
  size_t size = 0;
  check(nv().nvrtcGetCUBINSize(prog.p, &size), "nvrtcGetCUBINSize");
  std::vector<char> cubin(size);
  if (size) check(nv().nvrtcGetCUBIN(prog.p, cubin.data()), "nvrtcGetCUBIN");
  if (cubin.empty())
    fail(ErrorKind::Runtime, "NVRTC produced no cubin for ", arch,
         " (is it a real sm_XY architecture?)");
  return cubin;
}

std::string nvrtc_compile_ptx(const std::string& source, const std::string& arch,
                              const std::string& name, NvrtcEffort effort) {
  Program prog;
  compile(prog, source, arch, name, effort);
  size_t size = 0;
  check(nv().nvrtcGetPTXSize(prog.p, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  if (size) check(nv().nvrtcGetPTX(prog.p, ptx.data()), "nvrtcGetPTX");
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

std::vector<int> nvrtc_supported_archs() {
  int n = 0;
  check(nv().nvrtcGetNumSupportedArchs(&n), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<size_t>(n));
  if (n) check(nv().nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  std::sort(archs.begin(), archs.end());
  return archs;
}

bool nvrtc_fast_compile() {
  // LT_CUDA_FAST_COMPILE=1 (nvrtc_compiler.h says why it is not the default).
  static const bool on = [] {
    const char* e = std::getenv("LT_CUDA_FAST_COMPILE");
    return e && (std::string(e) == "1" || std::string(e) == "on") && nvrtc_version_number() >= 1208;
  }();
  return on;
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  check(nv().nvrtcVersion(&major, &minor), "nvrtcVersion");
  return std::to_string(major) + "." + std::to_string(minor);
}

std::string nvrtc_target_for(int major, int minor, bool* cubin) {
  const int want = major * 10 + minor;
  std::vector<int> archs = nvrtc_supported_archs();
  if (std::find(archs.begin(), archs.end(), want) != archs.end()) {
    *cubin = true;
    return "sm_" + std::to_string(want);
  }
  // A cubin for sm_XY runs on sm_XZ with Z >= Y: the newest supported one of the same major.
  for (auto it = archs.rbegin(); it != archs.rend(); ++it)
    if (*it / 10 == major && *it < want) {
      *cubin = true;
      return "sm_" + std::to_string(*it);
    }
  if (!archs.empty() && want > archs.back()) {
    *cubin = false;
    return "compute_" + std::to_string(archs.back());
  }
  fail(ErrorKind::Runtime, "the GPU's compute capability ", major, ".", minor,
       " is not supported by NVRTC ", nvrtc_version(), " (oldest supported: sm_",
       archs.empty() ? 0 : archs.front(), ")");
}

}  // namespace lt
