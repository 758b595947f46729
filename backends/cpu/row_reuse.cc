#include "backends/cpu/row_reuse.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "ir/ops.h"

namespace lt::cpu {
namespace {

using loop::IKind;
using loop::StageKind;

// Structural keys of a stage body's instructions: equal keys compute equal values at the same
// loop point (ReduceResults name the stage; loads the argument and the affine index). Empty for an
// instruction that cannot be matched (random numbers, general indices, and what uses them).
std::vector<std::string> body_keys(const std::vector<loop::Instr>& body) {
  std::vector<std::string> key(body.size());
  auto sub = [&](int i) { return i < 0 ? std::string("-") : key[static_cast<size_t>(i)]; };
  for (size_t i = 0; i < body.size(); ++i) {
    const loop::Instr& in = body[i];
    std::string k = std::to_string(static_cast<int>(in.kind)) + ":" +
                    std::to_string(static_cast<int>(in.dtype)) + ":";
    switch (in.kind) {
      case IKind::Load:
        if (!in.index.affine()) continue;
        k += std::to_string(in.arg) + "@" + std::to_string(in.index.offset);
        for (int64_t st : in.index.strides) k += "," + std::to_string(st);
        // Symbolic sizes: equal hints are not equal sizes, so the parameters are part of the key.
        if (in.index.symbolic()) {
          k += "#" + std::to_string(in.index.offset_param);
          for (int p : in.index.stride_params) k += "," + std::to_string(p);
        }
        break;
      case IKind::LoadScalar:
      case IKind::ReduceResult:
        k += std::to_string(in.arg);
        break;
      case IKind::Const: {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%a", in.value);
        k += buf;
        if (in.param >= 0) k += "#" + std::to_string(in.param) + (in.param_reciprocal ? "r" : "");
        break;
      }
      case IKind::Op: {
        const std::string a = sub(in.a), b = sub(in.b), c = sub(in.c);
        if (a.empty() || b.empty() || c.empty()) continue;
        k += std::to_string(static_cast<int>(in.op)) + "(" + a + ";" + b + ";" + c + ")";
        break;
      }
      case IKind::RandUniform:
      case IKind::Position:
        continue;
    }
    key[i] = std::move(k);
  }
  return key;
}

// Worth a scratch row: a math-library call (ir/ops.h's Transcendental and Trig tiers). A division
// is not: storing and reloading the row costs about as much as dividing again.
bool costly(Op op) { return op_info(op).cost >= OpCost::Transcendental; }

}  // namespace

RowReuse find_row_reuse(const loop::Kernel& k, int64_t max_row, bool any_row) {
  RowReuse r;
  const int64_t row = numel(k.inner);
  if (k.stages.size() < 2 || k.stages.back().kind != StageKind::MapInner ||
      (!any_row && (row < 1 || row > max_row)))
    return r;
  const auto& body = k.stages.back().body;
  const std::vector<std::string> keys = body_keys(body);
  // Per instruction of the last stage: its subtree's size and whether it holds a costly op.
  std::vector<int> size(body.size(), 1);
  std::vector<bool> heavy(body.size(), false);
  for (size_t i = 0; i < body.size(); ++i) {
    const loop::Instr& in = body[i];
    if (in.kind != IKind::Op) continue;
    heavy[i] = costly(in.op);
    for (int o : {in.a, in.b, in.c})
      if (o >= 0)
        size[i] += size[static_cast<size_t>(o)],
            heavy[i] = heavy[i] || heavy[static_cast<size_t>(o)];
  }
  int best = 0;
  for (size_t s = 0; s + 1 < k.stages.size(); ++s) {
    if (k.stages[s].kind != StageKind::Reduce) continue;
    const std::vector<std::string> src = body_keys(k.stages[s].body);
    for (size_t i = 0; i < body.size(); ++i) {
      if (!heavy[i] || keys[i].empty() || size[i] <= best) continue;
      auto it = std::find(src.begin(), src.end(), keys[i]);
      if (it == src.end()) continue;
      r = {static_cast<int>(s), static_cast<int>(it - src.begin()), static_cast<int>(i)};
      best = size[i];
    }
  }
  return r;
}

}  // namespace lt::cpu
