// libFuzzer target for the trace-file loader (CONTRACT.md "Trace file"): any byte string must
// either load into a valid graph or throw lt::Error; anything else (a crash, a sanitizer report,
// another exception type) is a bug. Param inputs get an empty data handle, as the CLI's `show`
// does.
#include <cstddef>
#include <cstdint>
#include <string>

#include "ir/error.h"
#include "ir/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    lt::LoadedTrace t = lt::trace_from_json(text, [](const lt::TraceInput&) { return nullptr; });
    // A trace that loads must be self-consistent: every root was rebuilt through inference.
    for (const auto& r : t.roots)
      if (!r) __builtin_trap();
  } catch (const lt::Error&) {
  }
  return 0;
}
