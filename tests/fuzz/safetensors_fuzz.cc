// libFuzzer target for the safetensors reader (nn/safetensors.h, format layer only): any byte
// string must either parse into a layout that really fits the bytes, or throw lt::Error. Anything
// else (a crash, a sanitizer report, another exception type, a layout that breaks the format's
// rules, or one that does not survive being written and read again) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ir/error.h"
#include "nn/safetensors.h"

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lt::safetensors;
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Header h;
  try {
    h = parse(bytes, "fuzz");
  } catch (const lt::Error&) {
    return 0;
  }
  // Accepted: the entries must tile the data section exactly, each as large as its shape says.
  check(h.data_start >= 8 && h.data_start <= size);
  const uint64_t data_bytes = size - h.data_start;
  uint64_t total = 0;
  for (const Entry& e : h.entries) {
    check(e.begin <= e.end && e.end <= data_bytes);
    check(static_cast<uint64_t>(lt::numel(e.shape)) * lt::dtype_size(e.dtype) == e.end - e.begin);
    total += e.end - e.begin;
  }
  check(total == data_bytes);
  // Written again (our own header for the same layout) it must read back the same.
  std::string again = encode_header(h.entries, h.metadata);
  check(again.size() % 8 == 0);
  again.append(bytes.substr(h.data_start));
  Header h2 = parse(again, "fuzz (rewritten)");  // an lt::Error here escapes: a bug
  check(h2.entries.size() == h.entries.size() && h2.metadata == h.metadata);
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const Entry &a = h.entries[i], &b = h2.entries[i];
    check(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.begin == b.begin &&
          a.end == b.end);
  }
  return 0;
}
