#include "backends/cuda/cuda_module_image.h"

#include "ir/bytes.h"
#include "ir/error.h"

namespace lt {
namespace {

// Bumped whenever the layout below changes.
constexpr uint32_t kFormat = 2;          // 2: several programs
constexpr uint32_t kMagic = 0x4c544355;  // "UCTL"

}  // namespace

std::string encode_cuda_module(const CudaModuleImage& m) {
  ByteWriter w;
  w.u32(kMagic);
  w.u32(kFormat);
  w.bytes(m.target);
  w.u8(m.cubin ? 1 : 0);
  w.u64(m.images.size());
  for (const auto& image : m.images) w.bytes(std::string_view(image.data(), image.size()));
  w.bytes(m.source);
  w.u64(m.launches.size());
  for (const CudaKernelLaunch& l : m.launches) {
    w.bytes(l.name);
    w.u8(static_cast<uint8_t>(l.mode));
    w.u32(static_cast<uint32_t>(l.threads));
    w.i64(l.max_blocks);
    w.u8(l.vectorized ? 1 : 0);
  }
  for (size_t i = 0; i < m.launches.size(); ++i)
    w.u32(i < m.program_of.size() ? m.program_of[i] : 0);
  return w.take();
}

CudaModuleImage decode_cuda_module(std::string_view bytes, size_t kernels,
                                   const std::string& target) {
  ByteReader r(bytes, "cuda module");
  if (r.u32() != kMagic) r.bad("not a cuda module");
  const uint32_t format = r.u32();
  if (format != kFormat)
    r.bad("format " + std::to_string(format) + ", expected " + std::to_string(kFormat));
  CudaModuleImage m;
  m.target = std::string(r.bytes());
  if (m.target != target) r.bad("compiled for " + m.target + ", this device needs " + target);
  const uint8_t cubin = r.u8();
  if (cubin > 1) r.bad("bad image kind " + std::to_string(cubin));
  m.cubin = cubin == 1;
  if (m.cubin != (m.target.rfind("sm_", 0) == 0))
    r.bad("image kind does not match target " + m.target);
  m.images.resize(r.count(8));
  if (kernels > 0 && m.images.empty())
    r.bad("no image for " + std::to_string(kernels) + " kernels");
  for (auto& image : m.images) {
    std::string_view bytes_of = r.bytes();
    image.assign(bytes_of.begin(), bytes_of.end());
    // PTX is handed to the driver as a C string.
    if (!m.cubin && (image.empty() || image.back() != '\0'))
      r.bad("PTX without its terminating NUL");
    if (image.empty()) r.bad("empty image for " + std::to_string(kernels) + " kernels");
  }
  m.source = std::string(r.bytes());
  // name length (8) + mode (1) + threads (4) + max_blocks (8) + vectorized (1) per launch at least.
  const size_t n = r.count(22);
  if (n != kernels)
    r.bad(std::to_string(n) + " kernel launches, the plan has " + std::to_string(kernels));
  m.launches.resize(n);
  for (CudaKernelLaunch& l : m.launches) {
    l.name = std::string(r.bytes());
    if (l.name.empty() || l.name.find('\0') != std::string::npos) r.bad("bad kernel name");
    const uint8_t mode = r.u8();
    if (mode > static_cast<uint8_t>(CudaKernelMode::Tile))
      r.bad("bad kernel mode " + std::to_string(mode));
    l.mode = static_cast<CudaKernelMode>(mode);
    const uint32_t threads = r.u32();
    if (threads < 32 || threads > 1024 || threads % 32 != 0)
      r.bad("kernel " + l.name + " has block size " + std::to_string(threads));
    l.threads = static_cast<int>(threads);
    l.max_blocks = r.i64();
    if (l.max_blocks < 0)
      r.bad("kernel " + l.name + " has " + std::to_string(l.max_blocks) + " blocks");
    const uint8_t vec = r.u8();
    if (vec > 1) r.bad("bad vector flag");
    l.vectorized = vec == 1;
  }
  m.program_of.resize(n);
  for (uint32_t& p : m.program_of) {
    p = r.u32();
    if (p >= m.images.size())
      r.bad("a launch in program " + std::to_string(p) + " of " + std::to_string(m.images.size()));
  }
  if (!r.done()) r.bad("trailing bytes");
  return m;
}

}  // namespace lt
