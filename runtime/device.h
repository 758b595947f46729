// Devices: "cpu" (eager), "cuda[:N]" (eager GPU N), "lazy[:N]" / "lazy:cpu" / "lazy:cuda[:N]" /
// "lazy:reference" (traced, compiled at sync points by the named or default backend). Each GPU is
// its own backend, named "cuda" for device 0 and "cuda:N" for device N > 0 (issue 31): its own
// context, stream, allocator and compiled executables.
#pragma once
#include <string>

namespace lt {

struct Device {
  enum class Type { CPU, CUDA, Lazy };
  Type type = Type::CPU;
  int index = 0;
  std::string backend;  // Lazy only: "cpu", "cuda", "reference", or "" for the default
                        // (the GPU of a lazy CUDA device is `index`)

  static Device parse(const std::string& s);  // throws lt::Error (RuntimeError) on unknown strings
  static Device cuda(int i = 0) { return {Type::CUDA, i, ""}; }
  std::string str() const;
  bool is_lazy() const { return type == Type::Lazy; }
  // The backend that executes this device's graphs.
  std::string backend_name() const;
  bool operator==(const Device& o) const;
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline const Device kCPU{Device::Type::CPU, 0, ""};
inline const Device kLazy{Device::Type::Lazy, 0, ""};

// The name of the backend of GPU `ordinal`: "cuda" for 0, "cuda:N" otherwise.
std::string cuda_backend_name(int ordinal);
// The GPU ordinal of a backend name ("cuda" 0, "cuda:N" N), or -1 for a name of no CUDA backend.
int cuda_ordinal(const std::string& backend);

// The default backend of plain "lazy": LT_LAZY_BACKEND, else set_lazy_backend(), else cuda when a
// GPU is usable, else cpu.
std::string default_lazy_backend();
void set_lazy_backend(const std::string& name);

}  // namespace lt
