#include "backends/cpu/trig_bounds.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/cpu/llvm_ops.h"
#include "ir/ops.h"

namespace lt::cpu {
namespace {

constexpr double kUnbounded = std::numeric_limits<double>::infinity();
// Each result may round up by half an ulp of its dtype; twice that is allowed for.
double rounding_margin(DType t) {
  switch (t) {
    case DType::Float16:
      return 1.0 + 0x1.0p-10;
    case DType::BFloat16:
      return 1.0 + 0x1.0p-7;
    case DType::Float32:
      return 1.0 + 0x1.0p-23;
    default:
      return 1.0 + 0x1.0p-52;
  }
}

// Loads whose values the fast body can fold into its float32 slot.
bool trackable(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16;
}

double max_finite(DType t) {
  switch (t) {
    case DType::Float16:
      return 65504.0;
    case DType::BFloat16:
      return 3.3895313892515355e38;
    case DType::Float32:
      return FLT_MAX;
    default:
      return DBL_MAX;
  }
}

double op_bound(const loop::Stage& st, const loop::Instr& in, const std::vector<double>& r) {
  auto at = [&](int i) { return i >= 0 ? r[static_cast<size_t>(i)] : kUnbounded; };
  if (!is_floating(in.dtype)) return kUnbounded;  // bools and integers are not tracked
  switch (in.op) {
    case Op::Add:
    case Op::Sub:
      return at(in.a) + at(in.b);
    case Op::Mul: {
      const double a = at(in.a), b = at(in.b);
      return std::isinf(a) || std::isinf(b) ? kUnbounded : a * b;
    }
    case Op::Maximum:
    case Op::Minimum:
      return std::max(at(in.a), at(in.b));
    case Op::Neg:
    case Op::Abs:
      return at(in.a);
    case Op::Sin:
    case Op::Cos:
    case Op::Tanh:
    case Op::Erf:  // at most 1 in magnitude, unless the argument was NaN
      return std::isinf(at(in.a)) ? kUnbounded : 1.0;
    case Op::Where:
      return std::max(at(in.b), at(in.c));
    case Op::Cast:  // between floating dtypes; narrowing overflow is caught by max_finite
      return in.a >= 0 && is_floating(st.body[static_cast<size_t>(in.a)].dtype) ? at(in.a)
                                                                                : kUnbounded;
    default:
      return kUnbounded;
  }
}

// Bounds on |value| of a stage's instructions when every trackable load is at most m.
std::vector<double> stage_bounds(const loop::Stage& st, double m) {
  std::vector<double> r(st.body.size(), kUnbounded);
  for (size_t i = 0; i < st.body.size(); ++i) {
    const loop::Instr& in = st.body[i];
    double v = kUnbounded;
    switch (in.kind) {
      case loop::IKind::Load:
      case loop::IKind::LoadScalar:
        if (trackable(in.dtype)) v = m;
        break;
      case loop::IKind::Const:
        // A size parameter's value is known at run time only (its hint bounds nothing).
        if (in.param < 0) v = std::fabs(in.value);
        break;
      case loop::IKind::RandUniform:
        v = 1.0;
        break;
      case loop::IKind::Op:
        v = op_bound(st, in, r);
        break;
      case loop::IKind::ReduceResult:
      case loop::IKind::Position:
        break;
    }
    v *= rounding_margin(in.dtype);
    r[i] = v <= max_finite(in.dtype) ? v : kUnbounded;  // also NaN (an inf * 0 never gets here)
  }
  return r;
}

bool is_fast_trig(const loop::Instr& in) {
  return in.kind == loop::IKind::Op && in.a >= 0 && has_fast_trig(in.op, in.dtype);
}

// The largest bound of any sin/cos argument of the kernel when its loads are at most m.
double largest_argument(const loop::Kernel& k, double m) {
  double worst = 0;
  for (const auto& st : k.stages) {
    const std::vector<double> r = stage_bounds(st, m);
    for (const auto& in : st.body)
      if (is_fast_trig(in)) worst = std::max(worst, r[static_cast<size_t>(in.a)]);
  }
  return worst;
}

float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

TrigLoadBound trig_load_bound(const loop::Kernel& k) {
  TrigLoadBound out;
  const double limit = kInlineTrigLimit;
  if (!(largest_argument(k, 0.0) < limit)) return out;
  // Bounds grow with m, and non-negative floats order like their bits: bisect on the bits for
  // the largest m whose arguments all stay below the limit.
  uint32_t lo = 0, hi = 0x7f800000u;  // f(lo) < limit <= f(hi) = f(inf)
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if (largest_argument(k, from_bits(mid)) < limit)
      lo = mid;
    else
      hi = mid;
  }
  out.usable = true;
  out.max_load = from_bits(lo);
  // Tracked: the loads some sin/cos argument depends on (operands come before their users).
  out.tracked.resize(k.stages.size());
  for (size_t s = 0; s < k.stages.size(); ++s) {
    const auto& body = k.stages[s].body;
    std::vector<bool> needed(body.size(), false);
    for (const auto& in : body)
      if (is_fast_trig(in)) needed[static_cast<size_t>(in.a)] = true;
    for (size_t i = body.size(); i-- > 0;) {
      if (!needed[i] || body[i].kind != loop::IKind::Op) continue;
      // A where's condition picks between its operands: it does not bound them.
      const bool where = body[i].op == Op::Where;
      for (int o : {where ? -1 : body[i].a, body[i].b, body[i].c})
        if (o >= 0) needed[static_cast<size_t>(o)] = true;
    }
    out.tracked[s].assign(body.size(), false);
    for (size_t i = 0; i < body.size(); ++i)
      // (A needed load of another dtype is unbounded, which made `usable` false above.)
      out.tracked[s][i] =
          needed[i] && trackable(body[i].dtype) &&
          (body[i].kind == loop::IKind::Load || body[i].kind == loop::IKind::LoadScalar);
  }
  return out;
}

}  // namespace lt::cpu
