#include "lowering/generalize.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "ir/error.h"
#include "lowering/complete_plan.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"
#include "lowering/size_choices.h"
#include "lowering/size_fields.h"

namespace lt {
namespace {

// The degree of the fitted polynomials in each symbol, and so the fitting probes per symbol.
constexpr int kFitPoints = 3;
// Free symbols generalize_plan handles: the fitting grid has kFitPoints^n probes.
constexpr size_t kMaxFreeSymbols = 2;

// Why a plan does not generalize: thrown inside this file, caught by generalize_plan.
struct NotGeneral {
  std::string why;
};

// ----- the fields of a plan, in one order --------------------------------------------------------

// Library steps' size parameters, one slot per size field (for_each_size_field's order), while a
// plan is walked; PlanSymbols keeps only the used ones (StepSizeParams).
struct StepSlots {
  std::vector<std::vector<int>> gemms, convs, attentions;
};

template <class Step>
std::vector<std::vector<int>> dense_slots(std::vector<Step>& steps,
                                          const std::vector<StepSizeParams>& sparse) {
  std::vector<std::vector<int>> out(steps.size());
  for (size_t i = 0; i < steps.size(); ++i) {
    int n = 0;
    for_each_size_field(steps[i], [&](int64_t&) { ++n; });
    out[i].assign(static_cast<size_t>(n), -1);
    if (i < sparse.size())
      for (auto [field, param] : sparse[i]) out[i].at(static_cast<size_t>(field)) = param;
  }
  return out;
}

std::vector<StepSizeParams> sparse_slots(const std::vector<std::vector<int>>& dense) {
  std::vector<StepSizeParams> out(dense.size());
  for (size_t i = 0; i < dense.size(); ++i)
    for (size_t f = 0; f < dense[i].size(); ++f)
      if (dense[i][f] >= 0) out[i].push_back({static_cast<int>(f), dense[i][f]});
  return out;
}

// Gives every loop IR parameter list its full length (-1 entries), so a walk can point at a slot
// for every field; strip_params undoes it where nothing is symbolic.
void expand_params(Plan& p) {
  auto index = [](loop::Index& ix) { ix.stride_params.resize(ix.strides.size(), -1); };
  for (auto& k : p.kernels) {
    k.outer_params.resize(k.outer.size(), -1);
    k.inner_params.resize(k.inner.size(), -1);
    for (auto& st : k.stages) {
      for (auto& in : st.body) index(in.index);
      for (auto& s : st.stores) index(s.index);
    }
  }
  p.sym.output_dims.resize(p.output_shapes.size());
  for (size_t r = 0; r < p.output_shapes.size(); ++r)
    p.sym.output_dims[r].resize(p.output_shapes[r].size(), -1);
}

void strip_params(Plan& p) {
  auto strip = [](std::vector<int>& v) {
    if (std::all_of(v.begin(), v.end(), [](int x) { return x < 0; })) v.clear();
  };
  for (auto& k : p.kernels) {
    strip(k.outer_params);
    strip(k.inner_params);
    for (auto& st : k.stages) {
      for (auto& in : st.body) strip(in.index.stride_params);
      for (auto& s : st.stores) strip(s.index.stride_params);
    }
  }
}

uint64_t str_token(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : s) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h;
}

// Walks every field of a plan (expand_params applied) in one fixed order. V has
//   size(int64_t& value, int* param, const char* what)  a number; param: where a size parameter
//                                                        for it goes, null where none can
//   real(double& value, int* param, bool* reciprocal)   a floating constant (param may be null)
//   token(uint64_t)                                     structure: must be equal between probes
template <class V>
class Walk {
 public:
  Walk(Plan& p, StepSlots& slots, V& v) : p_(p), slots_(slots), v_(v) {}

  void run() {
    tok(p_.buffers.size());
    for (auto& b : p_.buffers) {
      tok(static_cast<uint64_t>(b.kind), static_cast<uint64_t>(b.dtype), b.input, b.alias);
      v_.size(b.numel, &b.numel_param, "a buffer size");
      // The same at every size: the executables place an operand at a fixed offset of its concat.
      v_.size(b.alias_offset, nullptr, "a concat operand's offset");
    }
    tok(p_.kernels.size());
    for (auto& k : p_.kernels) kernel(k);
    tok(p_.gemms.size());
    for (size_t i = 0; i < p_.gemms.size(); ++i) {
      Gemm& g = p_.gemms[i];
      tok(str_token(g.name), static_cast<uint64_t>(g.dtype), g.a, g.b, g.out);
      tok(g.batch.size(), g.a_batch_stride.size(), g.b_batch_stride.size());
      fields(g, slots_.gemms[i], "a matrix product's size");
    }
    tok(p_.convs.size());
    for (size_t i = 0; i < p_.convs.size(); ++i) {
      ConvStep& c = p_.convs[i];
      tok(str_token(c.name), static_cast<uint64_t>(c.kind), static_cast<uint64_t>(c.dtype), c.a,
          c.b, c.bias, c.out, c.relu);
      tok(c.x.size(), c.w.size(), c.y.size());
      for (int64_t v : c.params.ints()) tok(static_cast<uint64_t>(v));
      fields(c, slots_.convs[i], "a convolution's size");
    }
    tok(p_.attentions.size());
    for (size_t i = 0; i < p_.attentions.size(); ++i) {
      AttentionStep& a = p_.attentions[i];
      tok(str_token(a.name), static_cast<uint64_t>(a.kind), static_cast<uint64_t>(a.dtype),
          a.causal);
      for (int b : {a.q, a.k, a.v, a.out, a.lse, a.dout, a.dsum, a.dq, a.dk, a.dv}) tok(b);
      v_.real(a.scale, nullptr, nullptr);
      fields(a, slots_.attentions[i], "an attention's size");
    }
    tok(p_.steps.size());
    for (const auto& st : p_.steps) tok(static_cast<uint64_t>(st.kind), st.index);
    tok(p_.output_buffers.size());
    for (int b : p_.output_buffers) tok(b);
    tok(p_.output_shapes.size());
    for (size_t r = 0; r < p_.output_shapes.size(); ++r) {
      tok(p_.output_shapes[r].size());
      for (size_t d = 0; d < p_.output_shapes[r].size(); ++d)
        v_.size(p_.output_shapes[r][d], &p_.sym.output_dims[r][d], "an output's size");
    }
    tok(p_.donations.size());
    for (const auto& d : p_.donations) tok(d.output, d.input);
  }

 private:
  template <class... T>
  void tok(T... t) {
    (v_.token(static_cast<uint64_t>(t)), ...);
  }

  template <class Step>
  void fields(Step& s, std::vector<int>& slots, const char* what) {
    size_t f = 0;
    for_each_size_field(s, [&](int64_t& v) { v_.size(v, &slots.at(f++), what); });
  }

  void index(loop::Index& ix) {
    v_.size(ix.offset, &ix.offset_param, "an index offset");
    tok(ix.strides.size(), ix.general);
    for (size_t i = 0; i < ix.strides.size(); ++i)
      v_.size(ix.strides[i], &ix.stride_params[i], "an index stride");
  }

  void kernel(loop::Kernel& k) {
    tok(str_token(k.name), k.outer.size(), k.inner.size());
    for (size_t d = 0; d < k.outer.size(); ++d)
      v_.size(k.outer[d], &k.outer_params[d], "an extent");
    for (size_t d = 0; d < k.inner.size(); ++d)
      v_.size(k.inner[d], &k.inner_params[d], "an extent");
    tok(k.args.size());
    for (auto& a : k.args) {
      tok(a.buffer, static_cast<uint64_t>(a.dtype), a.scalar, a.output);
      v_.size(a.numel, &a.numel_param, "an argument's size");
    }
    tok(k.iexprs.size());
    for (auto& e : k.iexprs) {
      using K = loop::IExpr::Kind;
      tok(static_cast<uint64_t>(e.kind), e.a, e.b);
      if (e.kind == K::Const)
        v_.size(e.value, &e.param, "an index constant");
      else
        tok(static_cast<uint64_t>(e.value));
      if (e.kind == K::Value)
        v_.size(e.hi, &e.param, "an index bound");
      else
        tok(static_cast<uint64_t>(e.hi));
    }
    tok(k.stages.size());
    for (auto& st : k.stages) {
      tok(static_cast<uint64_t>(st.kind), static_cast<uint64_t>(st.reduce_op), st.reduce_value,
          static_cast<uint64_t>(st.acc_dtype));
      tok(st.body.size());
      for (auto& in : st.body) {
        tok(static_cast<uint64_t>(in.kind), static_cast<uint64_t>(in.op),
            static_cast<uint64_t>(in.dtype), in.a, in.b, in.c, in.arg);
        index(in.index);
        if (in.kind == loop::IKind::Const)
          v_.real(in.value, &in.param, &in.param_reciprocal);
        else
          v_.real(in.value, nullptr, nullptr);
        v_.size(in.stream, nullptr, "a random stream");
      }
      tok(st.stores.size());
      for (auto& s : st.stores) {
        tok(s.arg, s.value, s.accumulate);
        index(s.index);
      }
    }
    tok(k.inplace.size());
    for (auto [a, b] : k.inplace) tok(a, b);
  }

  Plan& p_;
  StepSlots& slots_;
  V& v_;
};

template <class V>
void walk(Plan& p, StepSlots& slots, V& v) {
  Walk<V>(p, slots, v).run();
}

StepSlots slots_for(Plan& p) {
  return {dense_slots(p.gemms, p.sym.gemms), dense_slots(p.convs, p.sym.convs),
          dense_slots(p.attentions, p.sym.attentions)};
}

// What a walk of one probe's plan sees.
struct Observed {
  std::vector<int64_t> sizes;
  std::vector<const char*> size_what;
  std::vector<bool> size_slot;
  std::vector<double> reals;
  std::vector<bool> real_slot;
  std::vector<uint64_t> tokens;
  void size(int64_t& v, int* param, const char* what) {
    sizes.push_back(v);
    size_what.push_back(what);
    size_slot.push_back(param != nullptr);
  }
  void real(double& v, int* param, bool*) {
    reals.push_back(v);
    real_slot.push_back(param != nullptr);
  }
  void token(uint64_t t) { tokens.push_back(t); }
};

// ----- polynomial fitting
// -------------------------------------------------------------------------

// Integer p(x) = c0 + c1*x + c2*x^2 through three points, by divided differences: for an integer
// polynomial every divided difference is an integer, so an inexact division means none fits.
std::optional<std::vector<__int128>> fit_quadratic(const int64_t* x, const __int128* y) {
  auto div = [](__int128 a, __int128 b) -> std::optional<__int128> {
    if (b == 0 || a % b != 0) return std::nullopt;
    return a / b;
  };
  auto d01 = div(y[1] - y[0], x[1] - x[0]), d12 = div(y[2] - y[1], x[2] - x[1]);
  if (!d01 || !d12) return std::nullopt;
  auto a2 = div(*d12 - *d01, x[2] - x[0]);
  if (!a2) return std::nullopt;
  // y0 + d01*(s - x0) + a2*(s - x0)*(s - x1) in powers of s.
  const __int128 x0 = x[0], x1 = x[1];
  return std::vector<__int128>{y[0] - *d01 * x0 + *a2 * x0 * x1, *d01 - *a2 * (x0 + x1), *a2};
}

// The probes: a grid of kFitPoints values per free symbol (the fit), then checking points.
struct Probes {
  std::vector<SymId> free;                 // the free symbols, ascending
  std::vector<std::vector<int64_t>> axis;  // per free symbol: its kFitPoints grid values
  std::vector<std::vector<int64_t>> at;    // per probe: every symbol's value (all_symbol_values)
  size_t grid = 0;                         // probes [0, grid) are the grid, row-major over free
  std::vector<std::pair<int64_t, int64_t>> ranges;  // per symbol
};

bool is_prime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}
int64_t prime_at_most(int64_t n) {
  while (n > 2 && !is_prime(n)) --n;
  return std::max<int64_t>(n, 2);
}
int64_t prime_at_least(int64_t n) {
  while (!is_prime(n)) ++n;
  return n;
}

// Every symbol's value with the free ones at `free_values` and the rest at the hints, solved
// symbols following; throws NotGeneral when they break a guard of the symbolic shapes.
std::vector<int64_t> binding(const SymbolicGraph& sg, const std::vector<SymId>& free,
                             const std::vector<int64_t>& free_values) {
  std::vector<int64_t> v(sg.env.hints().begin(), sg.env.hints().end());
  for (size_t i = 0; i < free.size(); ++i) v[free[i]] = free_values[i];
  v = all_symbol_values(sg, v);
  if (!sg.env.guards_hold(v)) throw NotGeneral{"a probe breaks a guard of the symbolic shapes"};
  return v;
}

// Per free symbol, in its range [lo, hi] (primes): fit points lo < mid < hi and a checking point
// on each side of mid.
Probes choose_probes(const SymbolicGraph& sg, const std::vector<SymId>& free,
                     const std::vector<std::pair<int64_t, int64_t>>& range) {
  Probes p;
  p.free = free;
  const size_t n = sg.env.num_symbols();
  std::vector<std::vector<int64_t>> checks;  // per free symbol: two checking values
  for (size_t i = 0; i < free.size(); ++i) {
    const auto [lo, hi] = range[i];
    const int64_t mid = prime_at_least(
        std::max<int64_t>(lo + 1, static_cast<int64_t>(std::sqrt(double(lo) * double(hi)))));
    const int64_t c1 = prime_at_least(lo + (mid - lo) / 2 + 1);
    const int64_t c2 = prime_at_least(mid + (hi - mid) / 2 + 1);
    if (!(mid < hi && c1 < mid && c2 < hi))
      throw NotGeneral{"the range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                       "] is too narrow for the probes"};
    p.axis.push_back({lo, mid, hi});
    checks.push_back({c1, c2});
  }
  auto add = [&](const std::vector<int64_t>& free_values) {
    p.at.push_back(binding(sg, free, free_values));
  };
  // The grid, row-major (the last free symbol fastest).
  std::vector<size_t> ix(free.size(), 0);
  for (;;) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < free.size(); ++i) v.push_back(p.axis[i][ix[i]]);
    add(v);
    size_t d = free.size();
    while (d > 0 && ++ix[d - 1] == static_cast<size_t>(kFitPoints)) ix[--d] = 0;
    if (d == 0) break;
  }
  p.grid = p.at.size();
  // Checking points off the grid: each uses every symbol's checking values, in turn.
  for (size_t c = 0; c < 2; ++c) {
    std::vector<int64_t> v;
    for (size_t i = 0; i < free.size(); ++i) v.push_back(checks[i][(c + i) % 2]);
    add(v);
  }
  p.ranges.assign(n, {ShapeEnv::kMinSymbolValue, INT64_MAX});
  for (size_t i = 0; i < free.size(); ++i) p.ranges[free[i]] = {p.axis[i][0], p.axis[i].back()};
  return p;
}

// The polynomial over the free symbols whose values at the grid probes are y (row-major), with
// integer coefficients of degree < kFitPoints in each symbol; nullopt when there is none.
std::optional<SizeExpr> fit(const Probes& p, const std::vector<__int128>& y) {
  // Fit along the last free symbol for every point of the others, then along the one before, ...:
  // coeffs[j] holds, per grid point of the symbols not yet fitted, the polynomial's part
  // multiplying the monomial j of the fitted ones.
  std::vector<std::vector<__int128>> coeffs{y};  // monomial index -> values over remaining grid
  std::vector<std::vector<int>> powers{{}};      // per monomial: powers of the fitted symbols
  for (size_t d = p.free.size(); d-- > 0;) {
    std::vector<std::vector<__int128>> next;
    std::vector<std::vector<int>> next_powers;
    for (size_t m = 0; m < coeffs.size(); ++m) {
      const auto& vals = coeffs[m];
      const size_t groups = vals.size() / kFitPoints;
      std::vector<std::vector<__int128>> by_power(kFitPoints, std::vector<__int128>(groups));
      for (size_t g = 0; g < groups; ++g) {
        auto c = fit_quadratic(p.axis[d].data(), &vals[g * kFitPoints]);
        if (!c) return std::nullopt;
        for (int k = 0; k < kFitPoints; ++k) by_power[k][g] = (*c)[k];
      }
      for (int k = 0; k < kFitPoints; ++k) {
        next.push_back(std::move(by_power[k]));
        std::vector<int> pw = powers[m];
        pw.insert(pw.begin(), k);
        next_powers.push_back(std::move(pw));
      }
    }
    coeffs = std::move(next);
    powers = std::move(next_powers);
  }
  SizeExpr e = 0;
  for (size_t m = 0; m < coeffs.size(); ++m) {
    const __int128 c = coeffs[m].at(0);
    if (c == 0) continue;
    if (c > INT64_MAX || c < INT64_MIN) return std::nullopt;
    SizeExpr term = static_cast<int64_t>(c);
    for (size_t i = 0; i < p.free.size(); ++i)
      for (int k = 0; k < powers[m][i]; ++k) term = term * SizeExpr::symbol(p.free[i]);
    e = e + term;
  }
  return e;
}

// A fitted size at every probe, checking points included: whether the expression gives them.
bool holds(const SizeExpr& e, const Probes& p, const std::vector<__int128>& y) {
  for (size_t k = 0; k < p.at.size(); ++k)
    if (static_cast<__int128>(e.eval(p.at[k])) != y[k]) return false;
  return true;
}

// ----- generalizing
// -------------------------------------------------------------------------------

struct Assigned {
  std::vector<int> size_param;  // per size field: its parameter, or -1 (the same at every probe)
  std::vector<int> real_param;
  std::vector<bool> real_reciprocal;
  std::vector<SizeExpr> params;
};

std::string probe_str(const Probes& p, size_t k) {
  std::string s;
  for (size_t i = 0; i < p.free.size(); ++i)
    s += (i ? ", s" : "s") + std::to_string(p.free[i]) + "=" + std::to_string(p.at[k][p.free[i]]);
  return s;
}

Assigned assign_params(const std::vector<Observed>& obs, const Probes& p) {
  Assigned a;
  std::map<std::string, int> interned;  // canonical text -> param
  auto intern = [&](const SizeExpr& e) {
    auto [it, fresh] = interned.emplace(e.str(), static_cast<int>(a.params.size()));
    if (fresh) a.params.push_back(e);
    return it->second;
  };
  const Observed& base = obs[0];
  for (size_t k = 1; k < obs.size(); ++k)
    if (obs[k].tokens != base.tokens || obs[k].sizes.size() != base.sizes.size() ||
        obs[k].reals.size() != base.reals.size())
      throw NotGeneral{"the plans at " + probe_str(p, 0) + " and " + probe_str(p, k) +
                       " differ in structure"};
  std::vector<__int128> y(obs.size());
  a.size_param.assign(base.sizes.size(), -1);
  for (size_t j = 0; j < base.sizes.size(); ++j) {
    bool same = true;
    for (size_t k = 0; k < obs.size(); ++k) {
      y[k] = obs[k].sizes[j];
      same = same && obs[k].sizes[j] == base.sizes[j];
    }
    if (same) continue;
    const std::string what = base.size_what[j];
    if (!base.size_slot[j]) throw NotGeneral{what + " changes with the sizes"};
    auto e = fit(p, std::vector<__int128>(y.begin(), y.begin() + static_cast<long>(p.grid)));
    if (!e || !holds(*e, p, y)) throw NotGeneral{what + " is no polynomial of the sizes"};
    a.size_param[j] = intern(*e);
  }
  a.real_param.assign(base.reals.size(), -1);
  a.real_reciprocal.assign(base.reals.size(), false);
  for (size_t j = 0; j < base.reals.size(); ++j) {
    bool same = true;
    for (size_t k = 0; k < obs.size(); ++k)
      same = same &&
             std::bit_cast<uint64_t>(obs[k].reals[j]) == std::bit_cast<uint64_t>(base.reals[j]);
    if (same) continue;
    if (!base.real_slot[j]) throw NotGeneral{"a floating constant changes with the sizes"};
    // An integer (a count as a float), or the reciprocal of one (a mean's 1/n), exactly.
    for (bool reciprocal : {false, true}) {
      bool integral = true;
      for (size_t k = 0; k < obs.size() && integral; ++k) {
        const double v = obs[k].reals[j];
        const double n = reciprocal ? std::nearbyint(1.0 / v) : v;
        integral = std::isfinite(n) && n == std::nearbyint(n) && std::fabs(n) < 0x1p53 &&
                   (reciprocal ? 1.0 / n : n) == v;
        y[k] = static_cast<__int128>(n);
      }
      if (!integral) continue;
      auto e = fit(p, std::vector<__int128>(y.begin(), y.begin() + static_cast<long>(p.grid)));
      if (!e || !holds(*e, p, y)) continue;
      a.real_param[j] = intern(*e);
      a.real_reciprocal[j] = reciprocal;
      break;
    }
    if (a.real_param[j] < 0) throw NotGeneral{"a floating constant is no function of the sizes"};
  }
  return a;
}

// Sets the walked plan's parameter slots from `a` and its numbers to their values at `values`.
struct Apply {
  const Assigned& a;
  std::span<const int64_t> values;  // per parameter
  size_t si = 0, ri = 0;
  void size(int64_t& v, int* param, const char*) {
    const int pa = a.size_param[si++];
    if (pa < 0) return;
    *param = pa;
    v = values[static_cast<size_t>(pa)];
  }
  void real(double& v, int* param, bool* reciprocal) {
    const int pa = a.real_param[ri];
    const bool rc = a.real_reciprocal[ri++];
    if (pa < 0) return;
    *param = pa;
    *reciprocal = rc;
    const auto n = static_cast<double>(values[static_cast<size_t>(pa)]);
    v = rc ? 1.0 / n : n;
  }
  void token(uint64_t) {}
};

// Evaluates a symbolic plan's parameter slots at `values` and clears them.
struct Evaluate {
  std::span<const int64_t> values;
  void size(int64_t& v, int* param, const char*) {
    if (!param || *param < 0) return;
    v = values[static_cast<size_t>(*param)];
    *param = -1;
  }
  void real(double& v, int* param, bool* reciprocal) {
    if (!param || *param < 0) return;
    const auto n = static_cast<double>(values[static_cast<size_t>(*param)]);
    v = *reciprocal ? 1.0 / n : n;
    *param = -1;
    *reciprocal = false;
  }
  void token(uint64_t) {}
};

std::string plan_bytes(Plan p) {
  p.grouping.clear();
  return serialize_plan(p);
}

// The program lowered at bindings of its symbols, each once, with what a walk of the plan sees.
class Lowerings {
 public:
  // Lowers g at its own sizes first, recording the size choices every probe then replays.
  Lowerings(const Graph& g, const SymbolicGraph& sg, const LowerOptions& opts)
      : g_(g), sg_(sg), opts_(opts) {
    SizeChoiceRecording rec;
    lower(g_, opts_);
    choices_ = rec.choices();
  }
  struct At {
    Plan plan;
    Observed seen;
  };
  const At& at(const std::vector<int64_t>& symbols) {
    auto it = done_.find(symbols);
    if (it != done_.end()) return it->second;
    InstantiatedGraph ig = instantiate(g_, sg_, symbols);
    At r;
    {
      SizeChoiceReplay replay(choices_);
      r.plan = lower(ig.graph, opts_);
    }
    Plan copy = r.plan;
    expand_params(copy);
    StepSlots slots = slots_for(copy);
    walk(copy, slots, r.seen);
    return done_.emplace(symbols, std::move(r)).first->second;
  }
  int count() const { return static_cast<int>(done_.size()) + 1; }

 private:
  std::vector<bool> choices_;
  const Graph& g_;
  const SymbolicGraph& sg_;
  const LowerOptions& opts_;
  std::map<std::vector<int64_t>, At> done_;
};

GeneralizedPlan try_generalize(Lowerings& lw, const SymbolicGraph& sg,
                               const std::vector<SymId>& free,
                               const std::vector<std::pair<int64_t, int64_t>>& range) {
  const Probes probes = choose_probes(sg, free, range);
  std::vector<Plan> plans;
  std::vector<Observed> obs;
  for (const auto& at : probes.at) {
    const Lowerings::At& r = lw.at(at);
    plans.push_back(r.plan);
    obs.push_back(r.seen);
  }
  const Assigned a = assign_params(obs, probes);
  if (a.params.empty()) throw NotGeneral{"no number of the plan changes with the sizes"};

  Plan sym = plans[0];
  expand_params(sym);
  StepSlots slots = slots_for(sym);
  std::vector<int64_t> at_hints;
  const std::vector<int64_t> hints =
      all_symbol_values(sg, std::vector<int64_t>(sg.env.hints().begin(), sg.env.hints().end()));
  for (const SizeExpr& e : a.params) at_hints.push_back(e.eval(hints));
  Apply apply{a, at_hints};
  walk(sym, slots, apply);
  strip_params(sym);
  sym.sym.num_symbols = static_cast<int>(sg.env.num_symbols());
  sym.sym.params = a.params;
  sym.sym.gemms = sparse_slots(slots.gemms);
  sym.sym.convs = sparse_slots(slots.convs);
  sym.sym.attentions = sparse_slots(slots.attentions);
  bool any_output = false;
  for (auto& dims : sym.sym.output_dims)
    any_output = any_output || std::any_of(dims.begin(), dims.end(), [](int x) { return x >= 0; });
  if (!any_output) sym.sym.output_dims.clear();
  sym.sym.ranges = probes.ranges;
  sym.grouping = "symbolic plan (lowered at " + probe_str(probes, 0) + ")\n" + sym.grouping;
  complete_plan(sym);
  // The symbolic plan must be, at every probe, exactly what lowering made there: nothing that
  // changes with the sizes was left out.
  for (size_t k = 0; k < probes.at.size(); ++k)
    if (plan_bytes(instantiate_plan(sym, probes.at[k])) != plan_bytes(plans[k]))
      throw NotGeneral{"the symbolic plan at " + probe_str(probes, k) +
                       " is not the plan lowered there"};
  GeneralizedPlan out;
  out.plan = std::move(sym);
  return out;
}

}  // namespace

Plan instantiate_plan(const Plan& plan, std::span<const int64_t> symbols) {
  Plan p = plan;
  if (!plan.sym.symbolic()) return p;
  LT_CHECK(symbols.size() == static_cast<size_t>(plan.sym.num_symbols), ErrorKind::Runtime,
           "instantiate_plan: ", symbols.size(), " symbol values for ", plan.sym.num_symbols,
           " symbols");
  const std::vector<int64_t> values = plan.sym.values(symbols);
  expand_params(p);
  StepSlots slots = slots_for(p);
  Evaluate ev{values};
  walk(p, slots, ev);
  strip_params(p);
  p.sym = {};
  complete_plan(p);
  return p;
}

GeneralizedPlan generalize_plan(const Graph& g, const SymbolicGraph& sg, const LowerOptions& opts) {
  GeneralizedPlan out;
  std::vector<SymId> free;
  for (SymId s = 0; s < sg.env.num_symbols(); ++s)
    if (sg.env.simplify(SizeExpr::symbol(s)) == SizeExpr::symbol(s)) free.push_back(s);
  if (free.empty()) {
    out.why_not = "no free size symbol";
    return out;
  }
  if (free.size() > kMaxFreeSymbols) {
    out.why_not = "more than " + std::to_string(kMaxFreeSymbols) + " free size symbols";
    return out;
  }
  // A wide range (a context that grows for hundreds of tokens needs few compiles). A threshold
  // inside it (a reduction long enough to split, a table small enough to count as a broadcast
  // read) makes the plans at its ends differ: with one symbol, bisection over primes finds where,
  // and the range keeps the side of the current size; with two, a narrower range is tried.
  // Without output views (Plan::output_offsets): an offset is not among the numbers the walk
  // compares, so a symbolic plan's roots each keep a buffer of their own. Concat operands stay in
  // place: symbolic_graph pins a concat's sizes (a DDP bucket of parameter gradients), so their
  // offsets are the same at every size (the walk checks it).
  LowerOptions no_views = opts;
  no_views.output_views = false;
  Lowerings lw(g, sg, no_views);
  try {
    if (free.size() == 1) {
      const int64_t h = sg.env.hints()[free[0]];
      // Both ways: lengths drawn at random (variable-length batches) fall on either side.
      int64_t lo = prime_at_most(std::max<int64_t>(h / 16, std::min<int64_t>(h, 3)));
      int64_t hi = prime_at_least(std::max<int64_t>(16 * h, 64));
      auto tokens = [&](int64_t v) -> const std::vector<uint64_t>& {
        return lw.at(binding(sg, free, {v})).seen.tokens;
      };
      while (tokens(lo) != tokens(hi)) {
        int64_t a = lo, b = hi;  // structure at a is lo's, at b it is not
        for (;;) {
          int64_t m = prime_at_least((a + b) / 2);
          if (m >= b) m = prime_at_most((a + b) / 2);
          if (m <= a) break;
          (tokens(m) == tokens(lo) ? a : b) = m;
        }
        if (h <= a)
          hi = a;
        else if (h >= b)
          lo = b;
        else
          throw NotGeneral{"the plan changes between sizes " + std::to_string(a) + " and " +
                           std::to_string(b) + ", around this one"};
        out.narrowed = "the plans at " + std::to_string(a) + " and " + std::to_string(b) +
                       " differ in structure";
      }
      GeneralizedPlan r = try_generalize(lw, sg, free, {{lo, hi}});
      r.narrowed = out.narrowed;
      r.lowerings = lw.count();
      return r;
    }
    for (int64_t widen : {16, 4}) {
      try {
        std::vector<std::pair<int64_t, int64_t>> range;
        for (SymId s : free) {
          const int64_t h = sg.env.hints()[s];
          range.push_back({prime_at_most(h), prime_at_least(std::max<int64_t>(widen * h, 64))});
        }
        GeneralizedPlan r = try_generalize(lw, sg, free, range);
        r.lowerings = lw.count();
        r.narrowed = out.narrowed;
        return r;
      } catch (const NotGeneral& e) {
        out.narrowed = e.why;
        out.why_not = e.why;
      }
    }
  } catch (const NotGeneral& e) {
    out.why_not = e.why;
  } catch (const Error& e) {
    out.why_not = std::string("lowering at probe sizes failed: ") + e.what();
  }
  out.lowerings = lw.count();
  return out;
}

}  // namespace lt
