#include "lowering/branch_regions.h"

namespace lt::loop {

namespace {

struct Use {
  int user;  // instruction id; -1: a store or the reduced value (always the top level)
  int side;  // 0 or 1: the user is a select and this is its value for that side; else -1
};

// The instructions an index expression reads (IExpr::Kind::Value).
void index_values(const Kernel& k, const Index& ix, std::vector<int>& out) {
  if (ix.affine()) return;
  std::vector<int> todo{ix.general};
  while (!todo.empty()) {
    const int id = todo.back();
    todo.pop_back();
    if (id < 0 || id >= static_cast<int>(k.iexprs.size())) continue;
    const IExpr& e = k.iexprs[static_cast<size_t>(id)];
    if (e.kind == IExpr::Kind::Value) {
      out.push_back(static_cast<int>(e.value));
      continue;
    }
    todo.push_back(e.a);
    todo.push_back(e.b);
  }
}

std::vector<std::vector<Use>> uses_of(const Kernel& k, const Stage& st) {
  const int n = static_cast<int>(st.body.size());
  std::vector<std::vector<Use>> uses(static_cast<size_t>(n));
  auto use = [&](int id, Use u) {
    if (id >= 0 && id < n) uses[static_cast<size_t>(id)].push_back(u);
  };
  std::vector<int> ids;
  for (int i = 0; i < n; ++i) {
    const Instr& in = st.body[static_cast<size_t>(i)];
    if (in.kind == IKind::Op) {
      const bool select = op_info(in.op).cls == OpClass::Where;
      use(in.a, {i, -1});
      use(in.b, {i, select ? 0 : -1});
      use(in.c, {i, select ? 1 : -1});
    } else if (in.kind == IKind::RandUniform) {
      use(in.a, {i, -1});
      use(in.b, {i, -1});
    }
    ids.clear();
    index_values(k, in.index, ids);
    for (int id : ids) use(id, {i, -1});
  }
  for (const Store& s : st.stores) {
    use(s.value, {-1, -1});
    ids.clear();
    index_values(k, s.index, ids);
    for (int id : ids) use(id, {-1, -1});
  }
  use(st.reduce_value, {-1, -1});
  return uses;
}

// Regions when the selects marked in `branch` are branches (users come after their operands, so
// one pass from the end sees every user's region first).
std::vector<int> regions_for(const std::vector<std::vector<Use>>& uses,
                             const std::vector<char>& branch) {
  const int n = static_cast<int>(uses.size());
  std::vector<int> region(static_cast<size_t>(n), -1);
  for (int i = n - 1; i >= 0; --i) {
    const auto& us = uses[static_cast<size_t>(i)];
    if (us.empty()) continue;  // unused: emitted at the top level, as before
    int r = -2;
    for (const Use& u : us) {
      const int ur = u.user < 0                                           ? -1
                     : u.side >= 0 && branch[static_cast<size_t>(u.user)] ? 2 * u.user + u.side
                                                                          : region[u.user];
      if (r == -2)
        r = ur;
      else if (r != ur)
        r = -1;  // used in two places: computed before both
    }
    region[static_cast<size_t>(i)] = r;
  }
  return region;
}

}  // namespace

BranchRegions branch_regions(const Kernel& k, const Stage& st) {
  const size_t n = st.body.size();
  const auto uses = uses_of(k, st);
  std::vector<char> select(n, 0);
  for (size_t i = 0; i < n; ++i)
    select[i] = st.body[i].kind == IKind::Op && op_info(st.body[i].op).cls == OpClass::Where;
  // With every select a branch, mark those whose sides (nested ones included) hold a load.
  const std::vector<int> all = regions_for(uses, select);
  std::vector<char> loads(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Instr& in = st.body[i];
    if (in.kind != IKind::Load || k.args.at(static_cast<size_t>(in.arg)).scalar) continue;
    for (int r = all[i]; r >= 0; r = all[static_cast<size_t>(r / 2)])
      loads[static_cast<size_t>(r / 2)] = 1;
  }
  BranchRegions out;
  out.branch = loads;
  out.region = regions_for(uses, out.branch);
  return out;
}

}  // namespace lt::loop
