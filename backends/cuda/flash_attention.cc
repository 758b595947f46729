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

bool flash_attention_supports(DType t, int64_t e, int64_t ev) {
  return t == DType::Float32 && e == kFlashTile && ev == kFlashTile;
}

namespace {

// In module order: forward, dK/dV/dQ, zero.
const char* const kKernelNames[3] = {kFlashForwardKernel, kFlashGradKVKernel, kFlashZeroKernel};

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
    for (const char* k : kKernelNames)
      if (!p.kernel.count(k)) fail(ErrorKind::Runtime, "flash_attention.cu has no section for ", k);
    return p;
  }();
  return parts;
}

}  // namespace

std::string flash_attention_program_source(int kernel) {
  const SourceParts& p = source_parts();
  return p.common + p.kernel.at(kKernelNames[kernel]);
}

const std::string& flash_attention_source() {
  static const std::string src = flash_attention_cu_text();
  return src;
}

std::vector<std::vector<char>> compile_flash_attention(const std::string& target, bool cubin) {
  // One NVRTC program per kernel, compiled on threads of their own: ~0.35-0.4 s of CPU each
  // (about 1.2 s together, the longest path of a cold GPT compile when they were one program).
  std::vector<std::vector<char>> out(3);
  // Each in a worker process where one runs (nvrtc_worker.h).
  const bool workers = !nvrtc_worker_path().empty();
  run_in_parallel(3, [&](size_t k) {
    out[k] = compile_module_image(flash_attention_program_source(static_cast<int>(k)), target,
                                  kKernelNames[k], NvrtcEffort::Full, cubin, workers);
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

size_t flash_attention_launches(const Plan& plan) { return plan.attentions.empty() ? 0 : 3; }

void append_flash_attention(CudaModuleImage& m, const std::vector<std::vector<char>>& images) {
  if (images.size() != 1 && images.size() != 3)
    fail(ErrorKind::Runtime, "flash attention: ", images.size(), " images (1 or 3 expected)");
  const auto first = static_cast<uint32_t>(m.images.size());
  for (size_t k = 0; k < 3; ++k) {
    m.launches.push_back({kKernelNames[k], CudaKernelMode::Block, kFlashThreads, 0, false});
    m.program_of.push_back(first + static_cast<uint32_t>(images.size() == 1 ? 0 : k));
  }
  m.images.insert(m.images.end(), images.begin(), images.end());
  m.source += "// ---- flash attention (backends/cuda/flash_attention.cu) ----\n";
  m.source += flash_attention_source();
}

}  // namespace lt
