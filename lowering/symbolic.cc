#include "lowering/symbolic.h"

#include <algorithm>

#include "ir/error.h"

namespace lt {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

}  // namespace

SymCtx::SymCtx(IntList extents) : extents_(std::move(extents)) {}

int SymCtx::atom(Atom a) {
  auto key = std::make_pair(std::make_pair(static_cast<int>(a.kind), a.var_or_d), a.arg);
  auto it = atom_ids_.find(key);
  if (it != atom_ids_.end()) return it->second;
  int id = static_cast<int>(atoms_.size());
  atoms_.push_back(std::move(a));
  atom_ids_.emplace(std::move(key), id);
  return id;
}

Lin SymCtx::var(int v) {
  int64_t ext = extents_.at(v);
  if (ext <= 1) return constant(0);  // a size-1 (or empty) loop has only index 0
  return Lin{0, {{atom({Atom::Var, v, {}, 0, ext - 1}), 1}}};
}

Lin SymCtx::value(int stage, int instr, int64_t hi) {
  if (hi <= 0) return constant(0);
  // Keyed by stage too: instruction ids are per stage body.
  return Lin{0, {{atom({Atom::Value, instr, constant(stage), 0, hi}), 1}}};
}

bool SymCtx::depends_on(const Lin& a, int v) const {
  for (const auto& [id, k] : a.terms) {
    const Atom& at = atoms_[id];
    if (at.kind == Atom::Value) return true;  // data may vary along any loop
    if (at.kind == Atom::Var ? at.var_or_d == v : depends_on(at.arg, v)) return true;
  }
  return false;
}

std::optional<int64_t> SymCtx::var_stride(const Lin& a, int v) const {
  int64_t s = 0;
  for (const auto& [id, k] : a.terms) {
    const Atom& at = atoms_[id];
    if (at.kind == Atom::Var) {
      if (at.var_or_d == v) s += k;
    } else if (at.kind == Atom::Value || depends_on(at.arg, v)) {
      return std::nullopt;
    }
  }
  return s;
}

Lin SymCtx::add(const Lin& a, const Lin& b) const {
  Lin r{a.c + b.c, {}};
  size_t i = 0, j = 0;
  while (i < a.terms.size() || j < b.terms.size()) {
    if (j == b.terms.size() || (i < a.terms.size() && a.terms[i].first < b.terms[j].first)) {
      r.terms.push_back(a.terms[i++]);
    } else if (i == a.terms.size() || b.terms[j].first < a.terms[i].first) {
      r.terms.push_back(b.terms[j++]);
    } else {
      int64_t k = a.terms[i].second + b.terms[j].second;
      if (k) r.terms.push_back({a.terms[i].first, k});
      ++i, ++j;
    }
  }
  return fold_divmod(std::move(r));
}

// d*(x//d)*k + (x%d)*k == x*k: recombines a dimension that a reshape split and merged again.
Lin SymCtx::fold_divmod(Lin r) const {
  for (size_t t = 0; t < r.terms.size(); ++t) {
    const Atom& m = atoms_[r.terms[t].first];
    if (m.kind != Atom::Mod) continue;
    // The partner of x % d is x // d; when x is itself y // e, floordiv stored x // d as y //
    // (e*d).
    std::pair<std::pair<int, int64_t>, Lin> partner = {{static_cast<int>(Atom::Div), m.var_or_d},
                                                       m.arg};
    if (m.arg.c == 0 && m.arg.terms.size() == 1 && m.arg.terms[0].second == 1 &&
        atoms_[m.arg.terms[0].first].kind == Atom::Div) {
      const Atom& in = atoms_[m.arg.terms[0].first];
      partner = {{static_cast<int>(Atom::Div), in.var_or_d * m.var_or_d}, in.arg};
    }
    auto it = atom_ids_.find(partner);
    if (it == atom_ids_.end()) continue;
    int64_t k = r.terms[t].second;
    auto div = std::find_if(r.terms.begin(), r.terms.end(),
                            [&](auto& x) { return x.first == it->second; });
    if (div == r.terms.end() || div->second != k * m.var_or_d) continue;
    Lin arg = m.arg;
    Lin rest{r.c, {}};
    for (auto& x : r.terms)
      if (x.first != it->second && x.first != r.terms[t].first) rest.terms.push_back(x);
    return add(rest, mul(arg, k));
  }
  return r;
}

Lin SymCtx::mul(const Lin& a, int64_t k) const {
  if (k == 0) return constant(0);
  Lin r{a.c * k, a.terms};
  for (auto& t : r.terms) t.second *= k;
  return r;
}

std::pair<int64_t, int64_t> SymCtx::range(const Lin& a) const {
  int64_t lo = a.c, hi = a.c;
  for (auto [id, k] : a.terms) {
    const Atom& t = atoms_[id];
    if (k > 0)
      lo += k * t.lo, hi += k * t.hi;
    else
      lo += k * t.hi, hi += k * t.lo;
  }
  return {lo, hi};
}

std::optional<SymCtx::Split> SymCtx::split_at_coefficient(const Lin& r, int64_t d) const {
  for (auto [id, k] : r.terms) {
    const int64_t c = k < 0 ? -k : k;
    if (c <= 1 || d % c != 0) continue;
    Lin x{floor_div(r.c, c), {}}, rest{r.c - floor_div(r.c, c) * c, {}};
    for (auto t : r.terms) {
      if (t.second % c == 0)
        x.terms.push_back({t.first, t.second / c});
      else
        rest.terms.push_back(t);
    }
    auto [lo, hi] = range(rest);
    if (lo >= 0 && hi < c) return Split{x, rest, c};
  }
  return std::nullopt;
}

Lin SymCtx::floordiv(const Lin& a, int64_t d) {
  if (d <= 0) fail(ErrorKind::Runtime, "internal: floordiv by ", d);
  if (d == 1) return a;
  // floor((d*q + r) / d) = q + floor(r / d) for integer q: divide out the divisible part.
  Lin q{floor_div(a.c, d), {}}, r{a.c - floor_div(a.c, d) * d, {}};
  for (auto t : a.terms) {
    if (t.second % d == 0)
      q.terms.push_back({t.first, t.second / d});
    else
      r.terms.push_back(t);
  }
  auto [lo, hi] = range(r);
  if (floor_div(lo, d) == floor_div(hi, d)) return add(q, constant(floor_div(lo, d)));
  // floor((c*X + R) / d) == floor(X / (d/c)) when c divides d and 0 <= R < c: a merged dim split
  // at a coarser boundary ((27*i + j) // 108 with j < 27 is i // 4).
  if (auto sp = split_at_coefficient(r, d)) return add(q, floordiv(sp->x, d / sp->c));
  // x // d // e == x // (d*e): fold nested divisions.
  if (r.c == 0 && r.terms.size() == 1 && r.terms[0].second == 1 &&
      atoms_[r.terms[0].first].kind == Atom::Div) {
    const Atom& in = atoms_[r.terms[0].first];
    return add(q, floordiv(Lin(in.arg), in.var_or_d * d));
  }
  int id = atom({Atom::Div, d, r, floor_div(lo, d), floor_div(hi, d)});
  return add(q, Lin{0, {{id, 1}}});
}

Lin SymCtx::mod(const Lin& a, int64_t d) {
  if (d <= 0) fail(ErrorKind::Runtime, "internal: mod by ", d);
  if (d == 1) return constant(0);
  Lin r{((a.c % d) + d) % d, {}};
  for (auto t : a.terms) {
    int64_t k = t.second % d;
    if (k) r.terms.push_back({t.first, k});
  }
  auto [lo, hi] = range(r);
  if (lo >= 0 && hi < d) return r;
  if (floor_div(lo, d) == floor_div(hi, d)) return add(r, constant(-floor_div(lo, d) * d));
  // (c*X + R) % d == c*(X % (d/c)) + R when c divides d and 0 <= R < c.
  if (auto sp = split_at_coefficient(r, d)) return add(mul(mod(sp->x, d / sp->c), sp->c), sp->rest);
  int id = atom({Atom::Mod, d, r, 0, d - 1});
  return Lin{0, {{id, 1}}};
}

Lin SymCtx::flatten(const std::vector<Lin>& idx, const Shape& shape) const {
  Lin r = constant(0);
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1) r = add(r, mul(idx[i], stride));
    stride *= shape[i];
  }
  return r;
}

std::vector<Lin> SymCtx::unflatten(const Lin& flat, const Shape& shape) {
  std::vector<Lin> r(shape.size());
  // An empty tensor has no element to find: a loop reading it runs no iteration, and dividing by
  // its zero extents would be meaningless. Any index serves.
  if (numel(shape) == 0) {
    std::fill(r.begin(), r.end(), constant(0));
    return r;
  }
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1)
      r[i] = constant(0);
    else if (i == 0)
      r[i] = floordiv(flat, stride);
    else
      r[i] = mod(floordiv(flat, stride), shape[i]);
    stride *= shape[i];
  }
  return r;
}

int SymCtx::emit_atom(int id, std::vector<loop::IExpr>& out) const {
  const Atom& t = atoms_[id];
  using K = loop::IExpr::Kind;
  if (t.kind == Atom::Var) {
    out.push_back({K::Var, t.var_or_d});
    return static_cast<int>(out.size()) - 1;
  }
  if (t.kind == Atom::Value) {
    out.push_back({K::Value, t.var_or_d, -1, -1, t.hi});
    return static_cast<int>(out.size()) - 1;
  }
  int a = emit(t.arg, out);
  out.push_back({K::Const, t.var_or_d});
  int b = static_cast<int>(out.size()) - 1;
  out.push_back({t.kind == Atom::Div ? K::FloorDiv : K::Mod, 0, a, b});
  return static_cast<int>(out.size()) - 1;
}

int SymCtx::emit(const Lin& a, std::vector<loop::IExpr>& out) const {
  using K = loop::IExpr::Kind;
  out.push_back({K::Const, a.c});
  int acc = static_cast<int>(out.size()) - 1;
  for (auto [id, k] : a.terms) {
    int t = emit_atom(id, out);
    if (k != 1) {
      out.push_back({K::Const, k});
      out.push_back({K::Mul, 0, t, static_cast<int>(out.size()) - 1});
      t = static_cast<int>(out.size()) - 1;
    }
    out.push_back({K::Add, 0, acc, t});
    acc = static_cast<int>(out.size()) - 1;
  }
  return acc;
}

loop::Index SymCtx::to_index(const Lin& a, std::vector<loop::IExpr>& iexprs) const {
  loop::Index ix;
  ix.strides.assign(extents_.size(), 0);
  bool affine = std::all_of(a.terms.begin(), a.terms.end(),
                            [&](auto& t) { return atoms_[t.first].kind == Atom::Var; });
  if (affine) {
    ix.offset = a.c;
    for (auto [id, k] : a.terms) ix.strides[atoms_[id].var_or_d] += k;
  } else {
    ix.general = emit(a, iexprs);
  }
  return ix;
}

}  // namespace lt
