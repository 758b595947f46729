#include "lowering/attention.h"

#include "ir/attention.h"
#include "ir/error.h"

namespace lt {

std::vector<int> AttentionStep::reads() const {
  if (kind == Kind::Forward) return {q, k, v};
  return {q, k, v, dout, lse, dsum};
}

std::vector<int> AttentionStep::writes() const {
  std::vector<int> w;
  for (int b : kind == Kind::Forward ? std::vector<int>{out, lse} : std::vector<int>{dq, dk, dv})
    if (b >= 0) w.push_back(b);
  return w;
}

void validate_attention(const AttentionStep& a, const std::vector<int64_t>& buffer_numel,
                        const std::vector<DType>& buffer_dtype, const char* where) {
  auto bad = [&](const std::string& why) {
    fail(ErrorKind::Runtime, where, ": attention ", a.name, " (batch ", a.batch, ", L ", a.L,
         ", S ", a.S, ", E ", a.E, ", Ev ", a.Ev, "): ", why);
  };
  if (a.batch < 1 || a.L < 1 || a.S < 1 || a.E < 1 || a.Ev < 1) bad("empty or negative sizes");
  if (!is_floating(a.dtype)) bad("not a floating dtype");
  if (a.writes().empty()) bad("writes nothing");
  const DType st = attention_stats_dtype(a.dtype);
  auto check = [&](int b, int64_t rows, int64_t cols, DType t, const char* what) {
    if (b < 0 || b >= static_cast<int>(buffer_numel.size()))
      bad(std::string(what) + " names no buffer");
    if (buffer_numel[b] != a.batch * rows * cols || buffer_dtype[b] != t)
      bad(std::string(what) + " buffer has the wrong size or dtype");
  };
  check(a.q, a.L, a.E, a.dtype, "q");
  check(a.k, a.S, a.E, a.dtype, "k");
  check(a.v, a.S, a.Ev, a.dtype, "v");
  if (a.kind == AttentionStep::Kind::Forward) {
    if (a.dout >= 0 || a.dsum >= 0 || a.dq >= 0 || a.dk >= 0 || a.dv >= 0)
      bad("gradient buffers on a forward step");
    if (a.out >= 0) check(a.out, a.L, a.Ev, a.dtype, "out");
    if (a.lse >= 0) check(a.lse, a.L, 1, st, "lse");
    return;
  }
  if (a.out >= 0) bad("an output buffer on a backward step");
  check(a.dout, a.L, a.Ev, a.dtype, "dout");
  check(a.lse, a.L, 1, st, "lse");
  check(a.dsum, a.L, 1, st, "dsum");
  if (a.dq >= 0) check(a.dq, a.L, a.E, a.dtype, "dq");
  if (a.dk >= 0) check(a.dk, a.S, a.E, a.dtype, "dk");
  if (a.dv >= 0) check(a.dv, a.S, a.Ev, a.dtype, "dv");
}

}  // namespace lt
