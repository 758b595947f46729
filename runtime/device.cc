#include "runtime/device.h"

#include <cstdlib>
#include <mutex>

#include "backends/backend.h"
#include "ir/error.h"

namespace lt {
namespace {
std::mutex g_devices_mu;
std::string g_lazy_backend;  // set_lazy_backend()

// A device index: 1 to 4 decimal digits, or -1.
int index_of(const std::string& s) {
  if (s.empty() || s.size() > 4 || s.find_first_not_of("0123456789") != std::string::npos)
    return -1;
  return std::stoi(s);
}

int parse_index(const std::string& s, const std::string& whole) {
  const int i = index_of(s);
  if (i < 0) fail(ErrorKind::Runtime, "Invalid device string: '", whole, "'");
  return i;
}
}  // namespace

Device Device::parse(const std::string& s) {
  std::string head = s, tail;
  auto colon = s.find(':');
  if (colon != std::string::npos) head = s.substr(0, colon), tail = s.substr(colon + 1);
  if (head == "cpu") {
    if (colon != std::string::npos && tail != "0")
      fail(ErrorKind::Runtime, "Invalid device string: '", s, "'");
    return kCPU;
  }
  if (head == "cuda") return cuda(colon == std::string::npos ? 0 : parse_index(tail, s));
  if (head == "lazy") {
    if (colon == std::string::npos) return kLazy;
    if (tail == "cpu" || tail == "cuda" || tail == "reference") return {Type::Lazy, 0, tail};
    if (tail.rfind("cuda:", 0) == 0) return {Type::Lazy, parse_index(tail.substr(5), s), "cuda"};
    return {Type::Lazy, parse_index(tail, s), ""};
  }
  fail(ErrorKind::Runtime,
       "Expected one of cpu, cuda, lazy, lazy:cpu, lazy:cuda, lazy:reference device type at start "
       "of device string: ",
       s);
}

std::string Device::str() const {
  switch (type) {
    case Type::CPU:
      return "cpu";
    case Type::CUDA:
      return "cuda:" + std::to_string(index);
    case Type::Lazy:
      if (backend.empty()) return "lazy:" + std::to_string(index);
      return backend == "cuda" && index > 0 ? "lazy:cuda:" + std::to_string(index)
                                            : "lazy:" + backend;
  }
  return "?";
}

std::string Device::backend_name() const {
  switch (type) {
    case Type::CPU:
      return "cpu";
    case Type::CUDA:
      return cuda_backend_name(index);
    case Type::Lazy: {
      // Only GPUs are numbered: "lazy:1" on a machine whose default backend is cpu is lazy:cpu.
      const std::string name = backend.empty() ? default_lazy_backend() : backend;
      return name == "cuda" ? cuda_backend_name(index) : name;
    }
  }
  return "cpu";
}

std::string cuda_backend_name(int ordinal) {
  return ordinal == 0 ? std::string("cuda") : "cuda:" + std::to_string(ordinal);
}

int cuda_ordinal(const std::string& backend) {
  if (backend == "cuda") return 0;
  return backend.rfind("cuda:", 0) == 0 ? index_of(backend.substr(5)) : -1;
}

bool Device::operator==(const Device& o) const {
  if (type != o.type) return false;
  if (type == Type::Lazy) return backend_name() == o.backend_name() && index == o.index;
  return type == Type::CPU || index == o.index;
}

std::string default_lazy_backend() {
  if (const char* e = std::getenv("LT_LAZY_BACKEND"); e && *e) return e;
  std::lock_guard<std::mutex> g(g_devices_mu);
  if (!g_lazy_backend.empty()) return g_lazy_backend;
  return backend_available("cuda") ? "cuda" : "cpu";
}

void set_lazy_backend(const std::string& name) {
  if (name != "cpu" && name != "cuda" && name != "reference")
    fail(ErrorKind::Value, "set_lazy_backend: unknown backend '", name,
         "' (expected cpu, cuda or reference)");
  std::lock_guard<std::mutex> g(g_devices_mu);
  g_lazy_backend = name;
}

}  // namespace lt
