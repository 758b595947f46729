#include "runtime/storm.h"

#include <map>
#include <set>
#include <vector>

namespace lt {
namespace {

struct InputSig {
  DType dtype;
  Shape shape;
  bool operator!=(const InputSig& o) const { return dtype != o.dtype || shape != o.shape; }
};

struct Site {
  std::set<std::pair<uint64_t, uint64_t>> keys;
  // Per (input, dim), the sizes seen in the site's compiles: the dims that keep changing.
  std::map<std::pair<size_t, size_t>, std::set<int64_t>> dim_sizes;
  std::vector<InputSig> last, previous;
  size_t last_nodes = 0, previous_nodes = 0;
  bool warned = false;
};

std::string sig_str(const InputSig& s) {
  return std::string(dtype_name(s.dtype)) + shape_str(s.shape);
}

// "; dim 0 keeps changing (9 sizes: 1, 2, 3, ..., 9)" for each dim of input i seen at more than
// one size: the dimension to mark dynamic, pad or bucket.
std::string changing_dims(const Site& s, size_t input) {
  std::string out;
  for (const auto& [at, sizes] : s.dim_sizes) {
    if (at.first != input || sizes.size() < 2) continue;
    out += "; dim " + std::to_string(at.second) + " keeps changing (" +
           std::to_string(sizes.size()) + " sizes: ";
    size_t k = 0;
    for (int64_t v : sizes) {
      if (k == 3 && sizes.size() > 4) {
        out += ", ..., " + std::to_string(*sizes.rbegin());
        break;
      }
      out += (k++ ? ", " : "") + std::to_string(v);
    }
    out += ")";
  }
  return out;
}

}  // namespace

std::optional<std::string> note_compile(int32_t site_id, const Graph& g, int limit) {
  static std::map<int32_t, Site> sites;  // callers hold the runtime mutex
  Site& s = sites[site_id];
  s.keys.insert({g.key.lo, g.key.hi});
  s.previous = std::move(s.last);
  s.last.clear();
  for (const Node* n : g.inputs) s.last.push_back({n->dtype, n->shape});
  for (size_t i = 0; i < s.last.size(); ++i)
    for (size_t d = 0; d < s.last[i].shape.size(); ++d)
      s.dim_sizes[{i, d}].insert(s.last[i].shape[d]);
  s.previous_nodes = s.last_nodes;
  s.last_nodes = g.order.size();
  if (s.warned || static_cast<int>(s.keys.size()) <= limit) return std::nullopt;
  s.warned = true;
  std::string where = source_str(site_id).empty() ? "an unknown call site" : source_str(site_id);
  std::string msg = "recompilation storm: " + where + " produced " + std::to_string(s.keys.size()) +
                    " distinct graphs; ";
  for (size_t i = 0; i < std::min(s.last.size(), s.previous.size()); ++i)
    if (s.last[i] != s.previous[i])
      return msg + "input " + std::to_string(i) + " changed from " + sig_str(s.previous[i]) +
             " to " + sig_str(s.last[i]) + " between the last two graphs" + changing_dims(s, i) +
             " (pad or bucket it to a fixed shape)";
  if (s.last.size() != s.previous.size())
    return msg + "the number of inputs changed from " + std::to_string(s.previous.size()) + " to " +
           std::to_string(s.last.size());
  const std::string sizes =
      " (" + std::to_string(s.previous_nodes) + " then " + std::to_string(s.last_nodes) + " nodes)";
  if (s.last_nodes > s.previous_nodes)
    return msg + "the graph grows from step to step with inputs of the same shapes" + sizes +
           ": it carries work of earlier steps, a value that persists across steps is never made "
           "data "
           "(end the step with lt.mark_step() or an optimizer step, or read it with .item())";
  return msg + "the inputs kept their shapes but the graph changes" + sizes +
         ": a value baked into the trace changes every step (a slice bound, a shape argument, a "
         "Python "
         "number used as a constant): pass it as a tensor, or keep it fixed";
}

}  // namespace lt
