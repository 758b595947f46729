#include "backends/cuda/flash_attention.h"

#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/cuda/flash_attention_embedded.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/nvrtc_worker.h"
#include "backends/parallel_work.h"
#include "ir/error.h"

namespace lt {

bool flash_attention_enabled() {
  const char* e = std::getenv("LT_FLASH_ATTENTION");
  if (!e) return true;
  const std::string v = e;
  return !(v == "0" || v == "off" || v == "OFF" || v == "false");
}

int flash_kernel_base(DType t) {
  switch (t) {
    case DType::Float32:
      return 0;
    case DType::BFloat16:
      return 3;
    case DType::Float16:
      return 6;
    default:
      return -1;
  }
}

bool flash_attention_supports(DType t, int64_t e, int64_t ev) {
  return flash_kernel_base(t) >= 0 && e == kFlashTile && ev == kFlashTile;
}

namespace {

// The helpers (the text before the first "// @kernel" line) and each kernel's section.
struct SourceParts {
  std::string common;
  std::map<std::string, std::string> kernel;  // by name
};

const SourceParts& source_parts() {
  static const SourceParts parts = [] {
    SourceParts p;
    const std::string text = flash_attention_cu_text();
    const std::string marker = "// @kernel ";
    size_t at = text.find("\n" + marker);
    p.common = text.substr(0, at == std::string::npos ? text.size() : at + 1);
    while (at != std::string::npos) {
      const size_t name_at = at + 1 + marker.size();
      const size_t eol = text.find('\n', name_at);
      const std::string name = text.substr(name_at, eol - name_at);
      const size_t next = text.find("\n" + marker, eol);
      p.kernel[name] =
          text.substr(at + 1, next == std::string::npos ? std::string::npos : next - at);
      at = next;
    }
    for (const FlashKernel& k : kFlashKernels)
      if (!p.kernel.count(k.name))
        fail(ErrorKind::Runtime, "flash_attention.cu has no section for ", k.name);
    return p;
  }();
  return parts;
}

}  // namespace

std::string flash_attention_program_source(int kernel) {
  const SourceParts& p = source_parts();
  return p.common + p.kernel.at(kFlashKernels[kernel].name);
}

const std::string& flash_attention_source() {
  static const std::string src = flash_attention_cu_text();
  return src;
}

std::vector<std::vector<char>> compile_flash_attention(const std::string& target, bool cubin) {
  // One NVRTC program per kernel, compiled on threads of their own: ~0.35-0.4 s of CPU each
  // (the three float32 kernels as one program were the longest path of a cold GPT compile).
  std::vector<std::vector<char>> out(kFlashKernelCount);
  // Each in a worker process where one runs (nvrtc_worker.h).
  const bool workers = !nvrtc_worker_path().empty();
  run_in_parallel(kFlashKernelCount, [&](size_t k) {
    out[k] = compile_module_image(flash_attention_program_source(static_cast<int>(k)), target,
                                  kFlashKernels[k].name, NvrtcEffort::Full, cubin, workers);
  });
  return out;
}

std::vector<char> embedded_flash_attention(const std::string& target) {
  for (size_t i = 0; i < kFlashAttentionCubinCount; ++i) {
    const EmbeddedCubin& c = kFlashAttentionCubins[i];
    const auto* bytes = reinterpret_cast<const char*>(c.data);
    if (target == c.arch) return std::vector<char>(bytes, bytes + c.size);
  }
  return {};
}

const std::vector<std::vector<char>>& flash_attention_images(const std::string& target,
                                                             bool cubin) {
  static std::mutex mu;
  static std::map<std::string, std::vector<std::vector<char>>> images;  // by target
  std::lock_guard<std::mutex> lock(mu);
  auto it = images.find(target);
  if (it != images.end()) return it->second;
  std::vector<std::vector<char>> out;
  std::vector<char> built = cubin ? embedded_flash_attention(target) : std::vector<char>();
  if (!built.empty())
    out.push_back(std::move(built));
  else
    out = compile_flash_attention(target, cubin);
  return images.emplace(target, std::move(out)).first->second;
}

size_t flash_attention_launches(const Plan& plan) {
  return plan.attentions.empty() ? 0 : kFlashKernelCount;
}

void append_flash_attention(CudaModuleImage& m, const std::vector<std::vector<char>>& images) {
  if (images.size() != 1 && images.size() != kFlashKernelCount)
    fail(ErrorKind::Runtime, "flash attention: ", images.size(), " images (1 or ",
         kFlashKernelCount, " expected)");
  const auto first = static_cast<uint32_t>(m.images.size());
  for (size_t k = 0; k < kFlashKernelCount; ++k) {
    m.launches.push_back({kFlashKernels[k].name, CudaKernelMode::Block,
                          static_cast<int>(kFlashKernels[k].threads), 0, false});
    m.program_of.push_back(first + static_cast<uint32_t>(images.size() == 1 ? 0 : k));
  }
  m.images.insert(m.images.end(), images.begin(), images.end());
  m.source += "// ---- flash attention (backends/cuda/flash_attention.cu) ----\n";
  m.source += flash_attention_source();
}

}  // namespace lt
