// Size expressions: what one dimension of a symbolic shape is (issue 30, dynamic shapes). A size
// expression is a polynomial with int64 coefficients over size symbols s0, s1, ..., each symbol a
// dimension of a graph input that may change from call to call (a sequence length, a batch size).
// Kept canonical (terms sorted, no zero coefficient), so == is equality of polynomials and the hash
// is that of the polynomial: `s0*768 + 0` and `768*s0` hash alike, which the graph key relies on.
//
// Polynomials are closed under what shape rules do (broadcast picks one side, reshape multiplies,
// slice adds and subtracts, matmul keeps dims); what they cannot express (floor division of a
// conv's output size, a min/max clamp) is decided on the symbols' current values and recorded as a
// guard (ShapeEnv below), as torch's ShapeEnv does with its hints.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ir/hash.h"

namespace lt {

using SymId = uint32_t;

class SizeExpr {
 public:
  SizeExpr() = default;
  SizeExpr(int64_t c);  // NOLINT(google-explicit-constructor): a constant is a size expression
  static SizeExpr symbol(SymId s);

  bool is_const() const { return terms_.empty(); }
  // The constant term: the value of a constant expression.
  int64_t const_term() const { return c_; }
  // The sign of the first non-constant term's coefficient (of the constant when there is none):
  // e and -e differ in it unless both are 0, so it picks one of the two as canonical.
  int leading_sign() const;
  // Whether symbol s occurs.
  bool uses(SymId s) const;
  // The symbols occurring, ascending, each once.
  std::vector<SymId> symbols() const;

  friend SizeExpr operator+(const SizeExpr& a, const SizeExpr& b);
  friend SizeExpr operator-(const SizeExpr& a, const SizeExpr& b);
  friend SizeExpr operator*(const SizeExpr& a, const SizeExpr& b);
  SizeExpr operator-() const;
  bool operator==(const SizeExpr& o) const { return c_ == o.c_ && terms_ == o.terms_; }
  bool operator!=(const SizeExpr& o) const { return !(*this == o); }

  // The quotient when every coefficient is a multiple of d (d != 0), else nullopt.
  std::optional<SizeExpr> div_exact(int64_t d) const;
  // The quotient a / b when b divides a as polynomials with integer coefficients: b a nonzero
  // constant, or a monomial c*m whose m divides every term of a with c dividing its coefficient.
  std::optional<SizeExpr> div_exact(const SizeExpr& b) const;
  // The expression with symbol s replaced by `by`.
  SizeExpr substitute(SymId s, const SizeExpr& by) const;
  // The value for symbol values `values` (indexed by SymId); throws lt::Error on int64 overflow or
  // a symbol without a value.
  int64_t eval(std::span<const int64_t> values) const;
  // The sign of the expression for every assignment with each symbol >= `min_value` (>= 0), when
  // it is the same for all of them: +1, 0 or -1; nullopt when it depends on the values.
  std::optional<int> sign(int64_t min_value) const;
  // "768*s0 + 1", "s0*s1", "-s0 + 5", "0".
  std::string str() const;
  void hash_into(Hasher& h) const;

 private:
  struct Term {
    std::vector<SymId> syms;  // the monomial: symbols ascending, repeated for powers; never {}
    int64_t coeff;
    bool operator==(const Term& o) const { return coeff == o.coeff && syms == o.syms; }
  };
  // Sorts, merges equal monomials, drops zero coefficients.
  static SizeExpr from_terms(int64_t c, std::vector<Term> terms);
  // The constant apart: most dimensions of a symbolic graph are constants, which then allocate
  // nothing.
  int64_t c_ = 0;
  std::vector<Term> terms_;  // non-constant terms by (degree, monomial)
};

// The facts compile-time decisions about symbolic sizes rest on. Each symbol has a hint (its value
// in the trace being compiled) and is at least 2: sizes 0 and 1 are never made symbolic (as in
// torch, they change broadcasting and emptiness), so `s0 == 1` is decided without a guard. A
// question the polynomial alone cannot answer is answered from the hints and recorded as a guard;
// a compiled graph serves another binding only where every guard holds (guards_hold).
class ShapeEnv {
 public:
  static constexpr int64_t kMinSymbolValue = 2;

  // A new symbol with this hint (>= kMinSymbolValue).
  SymId add_symbol(int64_t hint);
  size_t num_symbols() const { return hints_.size(); }
  std::span<const int64_t> hints() const { return hints_; }
  int64_t hint(const SizeExpr& e) const { return e.eval(hints_); }

  // a == b, a < b, a <= b: decided from the polynomials when every binding agrees, otherwise from
  // the hints, with a guard recording the answer. An equality that holds is also solved for its
  // highest symbol where that symbol occurs alone and linearly (s1 - 2*s0 == 0 gives s1 := 2*s0),
  // which simplify() then applies: a loss's B*T labels and the logits' B and T rows become one
  // expression, so a reshape between them divides exactly.
  bool eq(const SizeExpr& a, const SizeExpr& b);
  bool lt(const SizeExpr& a, const SizeExpr& b);
  bool le(const SizeExpr& a, const SizeExpr& b) { return !lt(b, a); }

  struct Guard {
    SizeExpr expr;  // the difference a - b the question was about
    enum class Rel : uint8_t { Zero, NonZero, Negative, NonNegative } rel;
    bool holds(std::span<const int64_t> values) const;
    std::string str() const;  // "s0 - 2*s1 == 0"
  };
  const std::vector<Guard>& guards() const { return guards_; }
  // e with every solved symbol replaced by its solution.
  SizeExpr simplify(const SizeExpr& e) const;
  // Whether every guard holds for `values` (one per symbol, each >= kMinSymbolValue).
  bool guards_hold(std::span<const int64_t> values) const;

 private:
  void guard(SizeExpr e, Guard::Rel rel);
  std::vector<int64_t> hints_;
  std::vector<Guard> guards_;
  std::vector<std::pair<SymId, SizeExpr>> solved_;  // each in terms of lower symbols only
};

}  // namespace lt
