#include "runtime/dynamic_shapes.h"

#include <cstdlib>
#include <map>
#include <set>

#include "ir/error.h"
#include "runtime/storage.h"

namespace lt {
namespace {

// Per call site and program there (its structure apart from sizes): the last static compile's
// input shapes, and the dims found to change.
struct Site {
  bool compiled = false;
  std::vector<Shape> shapes;
  std::set<DynamicDim> dims;  // dynamic from now on
};

std::map<std::pair<int32_t, std::pair<uint64_t, uint64_t>>, Site>& sites() {
  static std::map<std::pair<int32_t, std::pair<uint64_t, uint64_t>>, Site> s;
  return s;
}

Site& site_of(int32_t site, const Graph& g) {
  const Hash128 p = program_structure(g);
  return sites()[{site, {p.lo, p.hi}}];
}

std::vector<Shape> input_shapes(const Graph& g) {
  std::vector<Shape> s;
  s.reserve(g.inputs.size());
  for (const Node* n : g.inputs) s.push_back(n->shape);
  return s;
}

std::string site_str(int32_t site) {
  const std::string& s = source_str(site);
  return s.empty() ? "an unknown call site" : s;
}

}  // namespace

bool automatic_dynamic() {
  static const bool on = [] {
    const char* e = std::getenv("LT_DYNAMIC");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

void mark_dynamic(Storage& s, int dim) {
  LT_CHECK(dim >= 0 && dim < 64, ErrorKind::Index, "mark_dynamic: dim ", dim, " out of range");
  s.dynamic_dims |= uint64_t{1} << dim;
}

DynamicChoice dynamic_dims(int32_t site, const Graph& g) {
  DynamicChoice c;
  std::set<DynamicDim> dims;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    const auto* s = n->op == Op::Param ? dynamic_cast<const Storage*>(n->data.get()) : nullptr;
    if (!s || !s->dynamic_dims) continue;
    for (size_t d = 0; d < n->shape.size() && d < 64; ++d)
      if (s->dynamic_dims >> d & 1) dims.insert({static_cast<int>(i), static_cast<int>(d)});
  }
  if (!dims.empty()) c.why = "marked dynamic";
  if (automatic_dynamic()) {
    Site& st = site_of(site, g);
    for (const DynamicDim& d : st.dims)
      if (d.input < static_cast<int>(g.inputs.size()) &&
          d.dim < static_cast<int>(g.inputs[d.input]->shape.size()))
        dims.insert(d);
    // Another size of what this site compiled last: the dims that changed become symbolic.
    if (st.compiled && st.shapes.size() == g.inputs.size()) {
      std::vector<DynamicDim> changed;
      std::string how;
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        const Shape& was = st.shapes[i];
        const Shape& now = g.inputs[i]->shape;
        if (was.size() != now.size()) {
          changed.clear();
          break;
        }
        for (size_t d = 0; d < now.size(); ++d) {
          const DynamicDim dd{static_cast<int>(i), static_cast<int>(d)};
          if (was[d] == now[d] || st.dims.count(dd)) continue;
          changed.push_back(dd);
          how += (how.empty() ? "" : ", ") + std::string("input ") + std::to_string(i) + " dim " +
                 std::to_string(d) + " changed from " + std::to_string(was[d]) + " to " +
                 std::to_string(now[d]);
        }
      }
      if (!changed.empty()) {
        for (const DynamicDim& d : changed) {
          st.dims.insert(d);
          dims.insert(d);
        }
        c.why += (c.why.empty() ? "" : "; ") + how + " at " + site_str(site);
      }
    }
  }
  c.dims.assign(dims.begin(), dims.end());
  return c;
}

void forget_dynamic_dims() { sites().clear(); }

void note_static_compile(int32_t site, const Graph& g) {
  if (!automatic_dynamic()) return;
  Site& st = site_of(site, g);
  st.compiled = true;
  st.shapes = input_shapes(g);
}

}  // namespace lt
