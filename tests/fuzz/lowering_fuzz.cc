// libFuzzer target for what a cache miss does with a graph that came from a file: a trace that
// loads (CONTRACT.md "Trace file"; `lazytensor replay` lowers exactly such graphs) is lowered
// (decompose, simplify, fuse, memory plan, donation), its plan serialized for the disk cache and
// read back; the same bytes are also read as a plan file (a damaged disk-cache entry). Every step
// must succeed or throw lt::Error; a crash, a sanitizer report or another exception is a bug, and
// a plan that reads back must serialize to the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/serialize.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    lt::Plan p = lt::deserialize_plan(text);
    if (lt::serialize_plan(p) != text) __builtin_trap();  // a plan that reads back is whole
  } catch (const lt::Error&) {
  }
  try {
    lt::LoadedTrace t = lt::trace_from_json(text, [](const lt::TraceInput&) { return nullptr; });
    std::vector<const lt::Node*> roots;
    for (const auto& r : t.roots) roots.push_back(r.get());
    const lt::Plan plan = lt::lower(lt::collect_graph(roots));
    const std::string bytes = lt::serialize_plan(plan);
    if (lt::serialize_plan(lt::deserialize_plan(bytes)) != bytes) __builtin_trap();
  } catch (const lt::Error&) {
  }
  return 0;
}
