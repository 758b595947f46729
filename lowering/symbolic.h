// Symbolic index arithmetic for fusion. An index is a linear form c + sum(k_i * atom_i) whose atoms
// are loop variables or floor-div/mod of another linear form by a constant. Atoms are hash-consed,
// so equal expressions compare equal, and div/mod are simplified with the variables' ranges: the
// reshape of a merged or split contiguous dimension folds back into plain strides, which is what
// keeps movement ops free (index arithmetic, no copies) and inner loops vectorizable.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "lowering/loop_ir.h"

namespace lt {

struct Lin {
  int64_t c = 0;
  std::vector<std::pair<int, int64_t>> terms;  // (atom id, coefficient), sorted by id, nonzero
  bool operator==(const Lin& o) const { return c == o.c && terms == o.terms; }
  bool operator<(const Lin& o) const { return c != o.c ? c < o.c : terms < o.terms; }
};

class SymCtx {
 public:
  explicit SymCtx(IntList extents);  // one extent per loop variable
  Lin var(int v);
  // The data-dependent index held by instruction `instr` of stage `stage`, known to be in [0, hi]
  // (gather/scatter_add clamp it first). Emitted as IExpr::Value; never folded into strides.
  Lin value(int stage, int instr, int64_t hi);
  static Lin constant(int64_t c) { return Lin{c, {}}; }
  Lin add(const Lin& a, const Lin& b) const;
  Lin mul(const Lin& a, int64_t k) const;
  Lin floordiv(const Lin& a, int64_t d);
  Lin mod(const Lin& a, int64_t d);
  std::pair<int64_t, int64_t> range(const Lin& a) const;  // inclusive bounds

  // Flat offset of a multi-index into a contiguous row-major tensor of `shape`.
  Lin flatten(const std::vector<Lin>& idx, const Shape& shape) const;
  // Multi-index of the element at flat offset `flat` of a contiguous tensor of `shape`.
  std::vector<Lin> unflatten(const Lin& flat, const Shape& shape);

  // Emits `a` as a loop::Index (affine strides when possible, else an IExpr tree in `iexprs`).
  loop::Index to_index(const Lin& a, std::vector<loop::IExpr>& iexprs) const;
  size_t num_vars() const { return extents_.size(); }
  // Whether `a` changes with loop variable v (directly or inside a div/mod).
  bool depends_on(const Lin& a, int v) const;
  // a's coefficient of v when v appears only as a plain term (0 when absent); nullopt when v is
  // inside a div/mod (the step between consecutive v is not constant).
  std::optional<int64_t> var_stride(const Lin& a, int v) const;

 private:
  struct Atom {
    enum Kind { Var, Div, Mod, Value } kind;
    int64_t var_or_d;  // Var: variable number; Div/Mod: the divisor; Value: instruction id
    Lin arg;
    int64_t lo, hi;
  };
  int atom(Atom a);
  Lin fold_divmod(Lin r) const;
  // r as c*x + rest with c dividing d and rest in [0, c) (c one of r's coefficients).
  struct Split {
    Lin x, rest;
    int64_t c;
  };
  std::optional<Split> split_at_coefficient(const Lin& r, int64_t d) const;
  int emit(const Lin& a, std::vector<loop::IExpr>& out) const;
  int emit_atom(int id, std::vector<loop::IExpr>& out) const;
  IntList extents_;
  std::vector<Atom> atoms_;
  std::map<std::pair<std::pair<int, int64_t>, Lin>, int> atom_ids_;
};

}  // namespace lt
