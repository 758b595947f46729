#include "ir/size_expr.h"

#include <algorithm>

#include "ir/error.h"
#include "ir/shape.h"

namespace lt {
namespace {

constexpr std::string_view kWhat = "size expression";

bool monomial_less(const std::vector<SymId>& a, const std::vector<SymId>& b) {
  return a.size() != b.size() ? a.size() < b.size() : a < b;
}

// Whether monomial d divides m (as multisets); the quotient in *q.
bool monomial_divides(const std::vector<SymId>& d, const std::vector<SymId>& m,
                      std::vector<SymId>* q) {
  q->clear();
  size_t i = 0;
  for (SymId s : m) {
    if (i < d.size() && d[i] == s)
      ++i;
    else
      q->push_back(s);
  }
  return i == d.size();
}

}  // namespace

SizeExpr::SizeExpr(int64_t c) : c_(c) {}

SizeExpr SizeExpr::symbol(SymId s) {
  SizeExpr e;
  e.terms_.push_back({{s}, 1});
  return e;
}

SizeExpr SizeExpr::from_terms(int64_t c, std::vector<Term> terms) {
  std::sort(terms.begin(), terms.end(),
            [](const Term& a, const Term& b) { return monomial_less(a.syms, b.syms); });
  SizeExpr e(c);
  for (auto& t : terms) {
    if (!e.terms_.empty() && e.terms_.back().syms == t.syms)
      e.terms_.back().coeff = size_add(e.terms_.back().coeff, t.coeff, kWhat);
    else
      e.terms_.push_back(std::move(t));
  }
  std::erase_if(e.terms_, [](const Term& t) { return t.coeff == 0; });
  return e;
}

int SizeExpr::leading_sign() const {
  const int64_t c = terms_.empty() ? c_ : terms_[0].coeff;
  return c > 0 ? 1 : c < 0 ? -1 : 0;
}

bool SizeExpr::uses(SymId s) const {
  for (const auto& t : terms_)
    if (std::binary_search(t.syms.begin(), t.syms.end(), s)) return true;
  return false;
}

std::vector<SymId> SizeExpr::symbols() const {
  std::vector<SymId> out;
  for (const auto& t : terms_) out.insert(out.end(), t.syms.begin(), t.syms.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

SizeExpr operator+(const SizeExpr& a, const SizeExpr& b) {
  if (b.terms_.empty()) {
    SizeExpr r = a;
    r.c_ = size_add(a.c_, b.c_, kWhat);
    return r;
  }
  std::vector<SizeExpr::Term> t = a.terms_;
  t.insert(t.end(), b.terms_.begin(), b.terms_.end());
  return SizeExpr::from_terms(size_add(a.c_, b.c_, kWhat), std::move(t));
}

SizeExpr SizeExpr::operator-() const {
  SizeExpr r = *this;
  r.c_ = size_mul(c_, -1, kWhat);
  for (auto& t : r.terms_) t.coeff = size_mul(t.coeff, -1, kWhat);
  return r;
}

SizeExpr operator-(const SizeExpr& a, const SizeExpr& b) { return a + (-b); }

SizeExpr operator*(const SizeExpr& a, const SizeExpr& b) {
  if (a.is_const() && b.is_const()) return SizeExpr(size_mul(a.c_, b.c_, kWhat));
  std::vector<SizeExpr::Term> t;
  auto scaled = [&](const SizeExpr& e, int64_t k) {
    if (k == 0) return;
    for (const auto& x : e.terms_) t.push_back({x.syms, size_mul(x.coeff, k, kWhat)});
  };
  scaled(a, b.c_);
  scaled(b, a.c_);
  for (const auto& x : a.terms_)
    for (const auto& y : b.terms_) {
      std::vector<SymId> m;
      std::merge(x.syms.begin(), x.syms.end(), y.syms.begin(), y.syms.end(), std::back_inserter(m));
      t.push_back({std::move(m), size_mul(x.coeff, y.coeff, kWhat)});
    }
  return SizeExpr::from_terms(size_mul(a.c_, b.c_, kWhat), std::move(t));
}

std::optional<SizeExpr> SizeExpr::div_exact(int64_t d) const {
  if (d == 0 || c_ % d != 0) return std::nullopt;
  for (const auto& t : terms_)
    if (t.coeff % d != 0) return std::nullopt;
  SizeExpr r = *this;
  r.c_ = c_ / d;
  for (auto& t : r.terms_) t.coeff /= d;
  return r;
}

std::optional<SizeExpr> SizeExpr::div_exact(const SizeExpr& b) const {
  if (b.is_const()) return div_exact(b.c_);
  if (b.c_ != 0 || b.terms_.size() != 1 || c_ != 0) return std::nullopt;  // only by a monomial
  const Term& d = b.terms_[0];
  std::vector<Term> q;
  std::vector<SymId> rest;
  for (const auto& t : terms_) {
    if (t.coeff % d.coeff != 0 || !monomial_divides(d.syms, t.syms, &rest)) return std::nullopt;
    q.push_back({rest, t.coeff / d.coeff});
  }
  // A term whose monomial equals the divisor's becomes the quotient's constant.
  int64_t c = 0;
  std::erase_if(q, [&](const Term& t) {
    if (!t.syms.empty()) return false;
    c = t.coeff;
    return true;
  });
  return from_terms(c, std::move(q));
}

SizeExpr SizeExpr::substitute(SymId s, const SizeExpr& by) const {
  if (!uses(s)) return *this;
  SizeExpr r(c_);
  for (const auto& t : terms_) {
    SizeExpr p(t.coeff);
    std::vector<SymId> rest;
    for (SymId x : t.syms) {
      if (x == s)
        p = p * by;
      else
        rest.push_back(x);
    }
    if (!rest.empty()) {
      SizeExpr m;
      m.terms_.push_back({std::move(rest), 1});
      p = p * m;
    }
    r = r + p;
  }
  return r;
}

int64_t SizeExpr::eval(std::span<const int64_t> values) const {
  int64_t r = c_;
  for (const auto& t : terms_) {
    int64_t p = t.coeff;
    for (SymId s : t.syms) {
      if (s >= values.size())
        fail(ErrorKind::Runtime, "size expression ", str(), ": no value for symbol s", s);
      p = size_mul(p, values[s], kWhat);
    }
    r = size_add(r, p, kWhat);
  }
  return r;
}

std::optional<int> SizeExpr::sign(int64_t min_value) const {
  if (terms_.empty()) return c_ > 0 ? 1 : c_ < 0 ? -1 : 0;
  // With every symbol >= min_value >= 0, each monomial is >= min_value^degree and grows without
  // bound, so when all coefficients share a sign the sum is bounded on that side by its value at
  // the minimum.
  bool all_pos = true, all_neg = true;
  for (const auto& t : terms_) {
    all_pos = all_pos && t.coeff > 0;
    all_neg = all_neg && t.coeff < 0;
  }
  if (!all_pos && !all_neg) return std::nullopt;
  const std::vector<SymId> syms = symbols();  // not empty: terms_ is not
  std::vector<int64_t> at_min(syms.back() + 1, min_value);
  const int64_t lowest = eval(at_min);  // the extreme value on the coefficients' side
  if (all_pos) return lowest > 0 ? std::optional<int>(1) : std::nullopt;
  return lowest < 0 ? std::optional<int>(-1) : std::nullopt;
}

std::string SizeExpr::str() const {
  std::string s;
  for (const auto& t : terms_) {
    int64_t c = t.coeff;
    if (!s.empty()) {
      s += c < 0 ? " - " : " + ";
      c = c < 0 ? -c : c;
    } else if (c < 0) {
      s += "-";
      c = -c;
    }
    if (c != 1) s += std::to_string(c) + "*";
    for (size_t i = 0; i < t.syms.size(); ++i) s += (i ? "*s" : "s") + std::to_string(t.syms[i]);
  }
  if (s.empty()) return std::to_string(c_);
  if (c_ != 0) s += (c_ < 0 ? " - " : " + ") + std::to_string(c_ < 0 ? -c_ : c_);
  return s;
}

void SizeExpr::hash_into(Hasher& h) const {
  h.add(static_cast<uint64_t>(c_)).add(terms_.size());
  for (const auto& t : terms_) {
    h.add(static_cast<uint64_t>(t.coeff)).add(t.syms.size());
    for (SymId s : t.syms) h.add(s);
  }
}

SymId ShapeEnv::add_symbol(int64_t hint) {
  if (hint < kMinSymbolValue)
    fail(ErrorKind::Runtime, "size symbol s", hints_.size(), ": value ", hint,
         " below the least symbolic size ", kMinSymbolValue,
         " (sizes 0 and 1 stay static, as in torch)");
  hints_.push_back(hint);
  return static_cast<SymId>(hints_.size() - 1);
}

void ShapeEnv::guard(SizeExpr e, Guard::Rel rel) {
  // e == 0 and -e == 0 are one guard: equalities are kept with a positive leading coefficient.
  if ((rel == Guard::Rel::Zero || rel == Guard::Rel::NonZero) && e.leading_sign() < 0) e = -e;
  Guard g{std::move(e), rel};
  for (const auto& old : guards_)
    if (old.expr == g.expr && old.rel == g.rel) return;
  guards_.push_back(std::move(g));
}

SizeExpr ShapeEnv::simplify(const SizeExpr& e) const {
  SizeExpr r = e;
  // Later solutions may name earlier-solved symbols only through lower ones, so one pass from the
  // last solved back to the first leaves none.
  for (auto it = solved_.rbegin(); it != solved_.rend(); ++it)
    r = r.substitute(it->first, it->second);
  return r;
}

bool ShapeEnv::eq(const SizeExpr& a, const SizeExpr& b) {
  SizeExpr d = simplify(a) - simplify(b);
  if (auto s = d.sign(kMinSymbolValue)) return *s == 0;
  const bool equal = hint(d) == 0;
  if (equal) {
    // Solve d == 0 for its highest symbol when it occurs once, linearly, with coefficient +-1.
    const std::vector<SymId> syms = d.symbols();
    for (auto s = syms.rbegin(); s != syms.rend(); ++s) {
      const SizeExpr without = d.substitute(*s, 0);
      const SizeExpr with_one = d.substitute(*s, 1);
      const SizeExpr coeff = with_one - without;  // d = coeff*s + without when s is linear
      if (!coeff.is_const() || (coeff.const_term() != 1 && coeff.const_term() != -1)) continue;
      if (d != coeff * SizeExpr::symbol(*s) + without || without.uses(*s)) continue;
      bool only_lower = true;
      for (SymId o : without.symbols()) only_lower = only_lower && o < *s;
      if (!only_lower) continue;
      solved_.push_back({*s, coeff.const_term() == 1 ? -without : without});
      break;
    }
  }
  guard(std::move(d), equal ? Guard::Rel::Zero : Guard::Rel::NonZero);
  return equal;
}

bool ShapeEnv::lt(const SizeExpr& a, const SizeExpr& b) {
  SizeExpr d = simplify(a) - simplify(b);
  if (auto s = d.sign(kMinSymbolValue)) return *s < 0;
  const bool less = hint(d) < 0;
  guard(std::move(d), less ? Guard::Rel::Negative : Guard::Rel::NonNegative);
  return less;
}

bool ShapeEnv::Guard::holds(std::span<const int64_t> values) const {
  const int64_t v = expr.eval(values);
  switch (rel) {
    case Rel::Zero:
      return v == 0;
    case Rel::NonZero:
      return v != 0;
    case Rel::Negative:
      return v < 0;
    case Rel::NonNegative:
      return v >= 0;
  }
  return false;
}

std::string ShapeEnv::Guard::str() const {
  static constexpr const char* kRel[] = {" == 0", " != 0", " < 0", " >= 0"};
  return expr.str() + kRel[static_cast<int>(rel)];
}

bool ShapeEnv::guards_hold(std::span<const int64_t> values) const {
  if (values.size() != hints_.size()) return false;
  for (int64_t v : values)
    if (v < kMinSymbolValue) return false;
  for (const auto& g : guards_)
    if (!g.holds(values)) return false;
  return true;
}

}  // namespace lt
