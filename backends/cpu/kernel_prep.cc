#include "backends/cpu/kernel_prep.h"

#include <optional>
#include <string>

#include "ir/error.h"

namespace lt::cpu {
namespace {

using loop::IKind;
using loop::Index;
using loop::StageKind;

template <typename F>
void for_each_index(loop::Kernel& k, F f) {
  for (auto& st : k.stages) {
    for (auto& in : st.body)
      if (loop::has_index(in)) f(in.index);
    for (auto& s : st.stores) f(s.index);
  }
}

// `before`: the instructions an IExpr::Value in the index may name (those computed earlier).
void check_index(const loop::Kernel& k, const Index& ix, int nvars, const std::string& where,
                 int before) {
  if (!ix.affine()) {
    LT_CHECK(ix.general < static_cast<int>(k.iexprs.size()), ErrorKind::Runtime,
             "internal: ", where, " of kernel ", k.name, " names iexpr ", ix.general, " of ",
             k.iexprs.size());
    std::vector<int> todo{ix.general};
    while (!todo.empty()) {
      const auto& e = k.iexprs[static_cast<size_t>(todo.back())];
      todo.pop_back();
      using K = loop::IExpr::Kind;
      if (e.kind == K::Value)
        LT_CHECK(e.value < before, ErrorKind::Runtime, "internal: ", where, " of kernel ", k.name,
                 " is indexed by instruction ", e.value, ", not computed before it");
      else if (e.kind != K::Const && e.kind != K::Var)
        todo.insert(todo.end(), {e.a, e.b});
    }
  } else {
    LT_CHECK(static_cast<int>(ix.strides.size()) <= nvars, ErrorKind::Runtime, "internal: ", where,
             " of kernel ", k.name, " has ", ix.strides.size(), " strides for ", nvars,
             " loop variables");
  }
}

}  // namespace

void validate_kernel(const loop::Kernel& k) {
  const int nvars = static_cast<int>(k.outer.size() + k.inner.size());
  const int nargs = static_cast<int>(k.args.size());
  for (auto e : k.outer)
    LT_CHECK(e >= 0, ErrorKind::Runtime, "internal: negative extent in ", k.name);
  for (auto e : k.inner)
    LT_CHECK(e >= 0, ErrorKind::Runtime, "internal: negative extent in ", k.name);
  for (size_t i = 0; i < k.iexprs.size(); ++i) {
    const auto& e = k.iexprs[i];
    using K = loop::IExpr::Kind;
    if (e.kind == K::Var) {
      LT_CHECK(e.value >= 0 && e.value < nvars, ErrorKind::Runtime, "internal: iexpr ", i, " of ",
               k.name, " names loop variable ", e.value, " of ", nvars);
    } else if (e.kind == K::Value) {
      LT_CHECK(e.value >= 0 && e.hi >= 0, ErrorKind::Runtime, "internal: iexpr ", i, " of ", k.name,
               " names instruction ", e.value, " with bound ", e.hi);
    } else if (e.kind != K::Const) {
      // Operands come first, so evaluation never recurses into a cycle.
      LT_CHECK(e.a >= 0 && e.b >= 0 && e.a < static_cast<int>(i) && e.b < static_cast<int>(i),
               ErrorKind::Runtime, "internal: iexpr ", i, " of ", k.name, " has bad operands");
    }
  }
  for (size_t s = 0; s < k.stages.size(); ++s) {
    const auto& st = k.stages[s];
    const int n = static_cast<int>(st.body.size());
    for (int i = 0; i < n; ++i) {
      const auto& in = st.body[i];
      std::string where = "instr ";
      where += std::to_string(i);
      where += " of stage ";
      where += std::to_string(s);
      for (int o : {in.a, in.b, in.c})
        LT_CHECK(o < i, ErrorKind::Runtime, "internal: ", where, " of kernel ", k.name,
                 " uses a later instruction");
      switch (in.kind) {
        case IKind::Load:
        case IKind::LoadScalar:
          LT_CHECK(in.arg >= 0 && in.arg < nargs, ErrorKind::Runtime, "internal: ", where, " of ",
                   k.name, " loads arg ", in.arg, " of ", nargs);
          if (in.kind == IKind::Load) check_index(k, in.index, nvars, where, i);
          break;
        case IKind::RandUniform:
          LT_CHECK(in.a >= 0 && in.b >= 0, ErrorKind::Runtime, "internal: ", where,
                   " lacks seed/offset");
          check_index(k, in.index, nvars, where, i);
          break;
        case IKind::Position:
          check_index(k, in.index, nvars, where, i);
          break;
        case IKind::ReduceResult:
          LT_CHECK(in.arg >= 0 && in.arg < static_cast<int>(s) &&
                       k.stages[in.arg].kind == StageKind::Reduce,
                   ErrorKind::Runtime, "internal: ", where, " of ", k.name, " reads stage ", in.arg,
                   ", which is not an earlier Reduce stage");
          break;
        case IKind::Op:
          LT_CHECK(in.a >= 0, ErrorKind::Runtime, "internal: ", where, " of ", k.name,
                   " has no operand");
          break;
        case IKind::Const:
          break;
      }
    }
    if (st.kind == StageKind::Reduce) {
      LT_CHECK(st.reduce_value >= 0 && st.reduce_value < n, ErrorKind::Runtime, "internal: stage ",
               s, " of ", k.name, " reduces a missing instruction");
    }
    for (const auto& store : st.stores) {
      LT_CHECK(store.arg >= 0 && store.arg < nargs && store.value >= 0 && store.value < n,
               ErrorKind::Runtime, "internal: bad store in stage ", s, " of ", k.name);
      LT_CHECK(!k.args[store.arg].scalar, ErrorKind::Runtime, "internal: store to a scalar arg in ",
               k.name);
      check_index(k, store.index, nvars, "a store", n);
    }
  }
}

loop::Kernel merge_dims(const loop::Kernel& src, std::vector<SizeExpr>* params) {
  loop::Kernel k = src;
  const bool sym = k.symbolic();
  const int nouter = static_cast<int>(k.outer.size());
  IntList ext = k.outer;
  ext.insert(ext.end(), k.inner.begin(), k.inner.end());
  const int nvars = static_cast<int>(ext.size());
  // Per loop variable: the size parameter of its extent, or -1.
  std::vector<int> ep(static_cast<size_t>(nvars), -1);
  for (int v = 0; v < nvars; ++v) {
    const auto& ps = v < nouter ? k.outer_params : k.inner_params;
    const size_t d = static_cast<size_t>(v < nouter ? v : v - nouter);
    if (d < ps.size()) ep[static_cast<size_t>(v)] = ps[d];
  }
  std::vector<int> group(nvars), orig(nvars);
  std::vector<bool> pinned(nvars, false);
  for (int v = 0; v < nvars; ++v) group[v] = v < nouter ? 0 : 1, orig[v] = v;
  for (const auto& e : k.iexprs)
    if (e.kind == loop::IExpr::Kind::Var) pinned[e.value] = true;
  std::vector<Index*> affine;
  for_each_index(k, [&](Index& ix) {
    if (ix.affine()) {
      ix.strides.resize(nvars, 0);
      if (sym) ix.stride_params.resize(static_cast<size_t>(nvars), -1);
      affine.push_back(&ix);
    } else {
      ix.strides.clear();
      ix.stride_params.clear();
    }
  });
  // Symbolic sizes as polynomials: an extent, an index's stride.
  auto param_expr = [&](int p, int64_t v) -> std::optional<SizeExpr> {
    if (p < 0) return SizeExpr(v);
    if (!params || p >= static_cast<int>(params->size())) return std::nullopt;
    return (*params)[static_cast<size_t>(p)];
  };
  auto stride_param = [](const Index* ix, size_t v) {
    return v < ix->stride_params.size() ? ix->stride_params[v] : -1;
  };
  // Extent 1 whatever the binding (a symbolic extent is not assumed to be 1 anywhere).
  auto one = [&](size_t v) { return ep[v] < 0 && ext[v] == 1; };
  for (size_t d = 0; d + 1 < ext.size();) {
    bool ok = group[d] == group[d + 1] && !pinned[d] && !pinned[d + 1];
    const bool sym_pair = ep[d] >= 0 || ep[d + 1] >= 0;
    for (size_t i = 0; ok && i < affine.size(); ++i) {
      const auto& s = affine[i]->strides;
      if (one(d) || one(d + 1)) continue;
      if (!sym_pair && stride_param(affine[i], d) < 0 && stride_param(affine[i], d + 1) < 0) {
        ok = s[d] == s[d + 1] * ext[d + 1];
        continue;
      }
      auto outer_s = param_expr(stride_param(affine[i], d), s[d]);
      auto inner_s = param_expr(stride_param(affine[i], d + 1), s[d + 1]);
      auto inner_e = param_expr(ep[d + 1], ext[d + 1]);
      ok = outer_s && inner_s && inner_e && *outer_s == *inner_s * *inner_e;
    }
    // The merged extent must be a size parameter (or a constant) when either one is symbolic.
    int merged_param = -1;
    if (ok && sym_pair) {
      auto a = param_expr(ep[d], ext[d]), b = param_expr(ep[d + 1], ext[d + 1]);
      ok = a && b;
      if (ok) {
        const SizeExpr prod = *a * *b;
        if (!prod.is_const()) {
          for (size_t p = 0; p < params->size() && merged_param < 0; ++p)
            if ((*params)[p] == prod) merged_param = static_cast<int>(p);
          if (merged_param < 0) {
            params->push_back(prod);
            merged_param = static_cast<int>(params->size()) - 1;
          }
        }
      }
    }
    if (!ok) {
      ++d;
      continue;
    }
    // Merged variable v' = i_d * ext[d+1] + i_{d+1}; its stride is the inner one's (or, when
    // the inner dim has extent 1, the outer one's).
    for (Index* ix : affine) {
      auto& s = ix->strides;
      s[d] = one(d + 1) ? s[d] : s[d + 1];
      s.erase(s.begin() + static_cast<std::ptrdiff_t>(d) + 1);
      auto& sp = ix->stride_params;
      if (!sp.empty()) {
        sp[d] = one(d + 1) ? sp[d] : sp[d + 1];
        sp.erase(sp.begin() + static_cast<std::ptrdiff_t>(d) + 1);
      }
    }
    ext[d] *= ext[d + 1];
    ep[d] = merged_param;
    ext.erase(ext.begin() + static_cast<std::ptrdiff_t>(d) + 1);
    ep.erase(ep.begin() + static_cast<std::ptrdiff_t>(d) + 1);
    group.erase(group.begin() + static_cast<std::ptrdiff_t>(d) + 1);
    pinned.erase(pinned.begin() + static_cast<std::ptrdiff_t>(d) + 1);
    orig[d] = -1;
    orig.erase(orig.begin() + static_cast<std::ptrdiff_t>(d) + 1);
  }
  std::vector<int> renum(nvars, -1);
  for (size_t v = 0; v < orig.size(); ++v)
    if (orig[v] >= 0) renum[orig[v]] = static_cast<int>(v);
  for (auto& e : k.iexprs)
    if (e.kind == loop::IExpr::Kind::Var) e.value = renum[e.value];
  k.outer.clear();
  k.inner.clear();
  k.outer_params.clear();
  k.inner_params.clear();
  bool any_param = false;
  for (int p : ep) any_param = any_param || p >= 0;
  for (size_t v = 0; v < ext.size(); ++v) {
    (group[v] == 0 ? k.outer : k.inner).push_back(ext[v]);
    if (any_param) (group[v] == 0 ? k.outer_params : k.inner_params).push_back(ep[v]);
  }
  return k;
}

}  // namespace lt::cpu
