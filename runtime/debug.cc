#include "runtime/debug.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "ir/error.h"
#include "ir/half.h"
#include "ir/printer.h"
#include "ir/serialize.h"
#include "runtime/executor.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"

namespace lt::debug {
namespace fs = std::filesystem;
namespace {

size_t nbytes(DType t, const Shape& s) { return static_cast<size_t>(numel(s)) * dtype_size(t); }

std::vector<unsigned char> host_bytes(const Storage& s, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  if (!bytes) return v;
  if (s.buffer->on_host())
    std::memcpy(v.data(), s.buffer->data(), bytes);
  else
    get_backend(s.backend).copy_to_host(v.data(), *s.buffer, bytes);
  return v;
}

// A .bin file holds raw row-major arrays back to back; "<file>#k" names the k-th array.
struct BinWriter {
  std::string name;
  std::ofstream out;
  int count = 0;
  BinWriter(const fs::path& dir, std::string n)
      : name(std::move(n)), out(dir / name, std::ios::binary | std::ios::trunc) {
    if (!out) fail(ErrorKind::Runtime, "dump: cannot write ", (dir / name).string());
  }
  std::string add(const std::vector<unsigned char>& bytes) {
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    return name + "#" + std::to_string(count++);
  }
};

// Reads "<file>#k" references; array sizes are declared in listing order (offsets follow from
// them).
class BinReader {
 public:
  explicit BinReader(fs::path dir) : dir_(std::move(dir)) {}
  std::vector<unsigned char> read(const std::string& ref, size_t bytes) {
    auto [file, index] = split(ref);
    auto& sizes = sizes_[file];
    if (static_cast<size_t>(index) != sizes.size())
      fail(ErrorKind::Value, "trace: data reference ", ref, " is out of order (expected #",
           sizes.size(), ")");
    size_t off = 0;
    for (size_t s : sizes) off += s;
    sizes.push_back(bytes);
    std::ifstream in(dir_ / file, std::ios::binary);
    if (!in) fail(ErrorKind::Value, "trace: data file ", (dir_ / file).string(), " is missing");
    in.seekg(0, std::ios::end);
    size_t total = static_cast<size_t>(in.tellg());
    if (off + bytes > total)
      fail(ErrorKind::Value, "trace: data file ", file, " is truncated (", total, " bytes, need ",
           off + bytes, ")");
    std::vector<unsigned char> v(bytes);
    in.seekg(static_cast<std::streamoff>(off));
    in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(bytes));
    return v;
  }

 private:
  static std::pair<std::string, int> split(const std::string& ref) {
    auto h = ref.rfind('#');
    if (h == std::string::npos || h == 0 || h + 1 == ref.size() ||
        ref.find('/') != std::string::npos ||
        ref.find_first_not_of("0123456789", h + 1) != std::string::npos || ref.size() - h > 9)
      fail(ErrorKind::Value, "trace: malformed data reference '", ref,
           "' (expected <file>#<index>)");
    return {ref.substr(0, h), std::stoi(ref.substr(h + 1))};
  }
  fs::path dir_;
  std::unordered_map<std::string, std::vector<size_t>> sizes_;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorKind::Value, "trace: cannot open ", path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct Loaded {
  LoadedTrace trace;
  std::vector<std::vector<unsigned char>> outputs;  // recorded outputs (empty vectors when absent)
  std::vector<std::vector<unsigned char>> values;   // recorded node values (empty when absent)
  std::vector<bool> has_output, has_value;
};

// Loads a trace; Param inputs get their data on `backend`; recorded outputs/values are read too.
Loaded load(const std::string& path, const std::string& backend) {
  std::string text = read_text(path);
  BinReader bins(fs::path(path).parent_path());
  Backend& be = get_backend(backend);
  Loaded L;
  L.trace = trace_from_json(text, [&](const TraceInput& in) -> std::shared_ptr<LeafData> {
    if (in.data.empty())
      fail(ErrorKind::Value, "trace: input ", in.id, " has no data (dump it with data=True)");
    size_t bytes = nbytes(in.dtype, in.shape);
    auto v = bins.read(in.data, bytes);
    auto s = std::make_shared<Storage>();
    s->backend = backend;
    s->buffer = be.allocate(bytes);
    if (bytes) be.copy_from_host(*s->buffer, v.data(), bytes);
    return s;
  });
  for (size_t i = 0; i < L.trace.nodes.size(); ++i) {
    const auto& n = L.trace.nodes[i];
    bool has = !L.trace.node_refs[i].empty();
    L.has_value.push_back(has);
    L.values.push_back(has ? bins.read(L.trace.node_refs[i], nbytes(n->dtype, n->shape))
                           : std::vector<unsigned char>{});
  }
  for (size_t i = 0; i < L.trace.roots.size(); ++i) {
    const auto& n = L.trace.roots[i];
    bool has = !L.trace.output_refs[i].empty();
    L.has_output.push_back(has);
    L.outputs.push_back(has ? bins.read(L.trace.output_refs[i], nbytes(n->dtype, n->shape))
                            : std::vector<unsigned char>{});
  }
  return L;
}

// Largest absolute and relative differences; NaN matches NaN, a lone NaN is an infinite error.
std::pair<double, double> compare(const std::vector<unsigned char>& got,
                                  const std::vector<unsigned char>& want, DType t, int64_t n) {
  double abs_e = 0, rel_e = 0;
  size_t w = dtype_size(t);
  for (int64_t i = 0; i < n; ++i) {
    double a = load_as_double(got.data() + i * w, t), b = load_as_double(want.data() + i * w, t);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (a == b) continue;  // equal infinities
    double d = std::isnan(a) || std::isnan(b) ? INFINITY : std::fabs(a - b);
    abs_e = std::max(abs_e, d);
    rel_e = std::max(rel_e, d / std::max(std::fabs(b), 1e-30));
  }
  return {abs_e, rel_e};
}

bool within(std::pair<double, double> e, double tol) { return e.first <= tol || e.second <= tol; }

// A node of a loaded trace on `backend` (library prims it lacks are expanded by its lowering).
std::vector<unsigned char> run_one(const Node* n, const std::string& backend) {
  auto out = execute_graph({n}, backend, SyncReason::Sync).at(0);
  return host_bytes(*out, nbytes(n->dtype, n->shape));
}

}  // namespace

std::string ir_text(const std::vector<Tensor>& ts) {
  NodeList keep;
  std::vector<const Node*> roots;
  for (auto& t : ts) keep.push_back(t.node()), roots.push_back(keep.back().get());
  return graph_text(collect_graph(roots));
}

std::string ir_dot(const std::vector<Tensor>& ts) {
  NodeList keep;
  std::vector<const Node*> roots;
  for (auto& t : ts) keep.push_back(t.node()), roots.push_back(keep.back().get());
  return graph_dot(collect_graph(roots));
}

std::string dump(const std::string& path, const std::vector<Tensor>& ts, bool data) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (ts.empty()) fail(ErrorKind::Value, "dump: no tensors given");
  NodeList keep;
  std::vector<const Node*> roots;
  for (auto& t : ts) keep.push_back(t.node()), roots.push_back(keep.back().get());
  Graph g = collect_graph(roots);
  std::string backend = ts[0].device().backend_name();
  fs::path p(path), dir = p.parent_path();
  if (!dir.empty()) fs::create_directories(dir);
  std::string stem = p.stem().string();
  std::unordered_map<const Node*, std::string> node_refs;
  std::vector<std::string> in_refs(g.inputs.size()), out_refs(g.roots.size());
  if (data) {
    BinWriter ins(dir, stem + ".inputs.bin"), nodes(dir, stem + ".nodes.bin"),
        outs(dir, stem + ".outputs.bin");
    for (size_t i = 0; i < g.inputs.size(); ++i) {
      const Node* n = g.inputs[i];
      if (n->op != Op::Param) continue;
      in_refs[i] =
          ins.add(host_bytes(*static_cast<Storage*>(n->data.get()), nbytes(n->dtype, n->shape)));
    }
    // Every node's value, computed in one graph, so bisect can point at the first divergence.
    std::vector<const Node*> all;
    for (const Node* n : g.order)
      if (n->op != Op::Param && n->op != Op::Scalar) all.push_back(n);
    auto vals = execute_graph(all, backend, SyncReason::Sync);
    std::unordered_map<const Node*, std::vector<unsigned char>> bytes;
    for (size_t i = 0; i < all.size(); ++i) {
      bytes[all[i]] = host_bytes(*vals[i], nbytes(all[i]->dtype, all[i]->shape));
      node_refs[all[i]] = nodes.add(bytes[all[i]]);
    }
    for (size_t i = 0; i < g.roots.size(); ++i) out_refs[i] = outs.add(bytes.at(g.roots[i]));
  }
  std::string key = g.key.hex();
  std::ofstream out(p, std::ios::trunc);
  if (!out) fail(ErrorKind::Runtime, "dump: cannot write ", path);
  out << trace_to_json(
      g, key, backend, [&](int i) { return in_refs[i]; }, [&](int i) { return out_refs[i]; },
      [&](const Node* n) {
        auto it = node_refs.find(n);
        return it == node_refs.end() ? std::string() : it->second;
      });
  return key;
}

ReplayReport replay(const std::string& path, const std::string& backend, bool check, double tol) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Loaded L = load(path, backend);
  ReplayReport r;
  r.backend = backend;
  std::vector<const Node*> roots;
  for (auto& n : L.trace.roots) roots.push_back(n.get());
  auto outs = execute_graph(roots, backend, SyncReason::Sync);
  r.outputs = static_cast<int>(outs.size());
  Device dev{Device::Type::Lazy, 0, backend};
  for (size_t i = 0; i < outs.size(); ++i) {
    const Node* n = roots[i];
    r.results.push_back(Tensor(make_data_tensor(outs[i], n->dtype, n->shape, dev)));
    if (!check || !L.has_output[i]) continue;
    r.checked = true;
    auto e = compare(host_bytes(*outs[i], nbytes(n->dtype, n->shape)), L.outputs[i], n->dtype,
                     numel(n->shape));
    r.max_abs_error = std::max(r.max_abs_error, e.first);
    r.max_rel_error = std::max(r.max_rel_error, e.second);
    if (!within(e, tol) && r.ok) {
      r.ok = false;
      r.message = "output " + std::to_string(i) + " differs: max abs error " +
                  std::to_string(e.first) + ", max rel error " + std::to_string(e.second) +
                  " (tol " + std::to_string(tol) + ")";
    }
  }
  if (check && !r.checked)
    r.message = "no recorded outputs to compare (dump with data=True)";
  else if (r.ok)
    r.message = "ok: " + std::to_string(r.outputs) + " output(s) on " + backend +
                (r.checked ? ", max abs error " + std::to_string(r.max_abs_error) : "");
  return r;
}

BisectReport bisect(const std::string& path, const std::string& backend, double tol) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Loaded L = load(path, backend);
  Loaded R = backend == "reference" ? Loaded{} : load(path, "reference");
  BisectReport rep;
  for (size_t i = 0; i < L.trace.nodes.size(); ++i) {
    const Node* n = L.trace.nodes[i].get();
    std::vector<unsigned char> got, want;
    std::string err;
    try {
      got = run_one(n, backend);
    } catch (const Error& e) {
      err = e.what();
    }
    // The expectation: the recorded value when the dump has one, else the reference interpreter.
    if (L.has_value[i])
      want = L.values[i];
    else
      want = run_one(backend == "reference" ? n : R.trace.nodes[i].get(), "reference");
    std::pair<double, double> e{0, 0};
    if (err.empty()) e = compare(got, want, n->dtype, numel(n->shape));
    if (err.empty() && within(e, tol)) continue;
    rep.diverged = true;
    rep.node_id = L.trace.node_ids[i];
    rep.op = std::string(op_name(n->op));
    rep.shape = shape_str(n->shape);
    rep.dtype = std::string(dtype_name(n->dtype));
    rep.source = source_str(n->source);
    rep.max_abs_error = e.first;
    rep.message =
        "node %" + std::to_string(rep.node_id) + " = " + rep.op + " : " + rep.dtype + rep.shape +
        (rep.source.empty() ? "" : " at " + rep.source) +
        (err.empty()
             ? " diverges (max abs error " + std::to_string(e.first) + ", " +
                   (L.has_value[i] ? "against the recorded value" : "against the reference") + ")"
             : " fails: " + err);
    return rep;
  }
  rep.message =
      "no divergence in " + std::to_string(L.trace.nodes.size()) + " node(s) on " + backend;
  return rep;
}

std::vector<std::string> kernel_sources() { return last_kernel_sources(); }

}  // namespace lt::debug

namespace lt {

InputBytes dump_inputs(const Graph& g) {
  using namespace debug;
  InputBytes bytes(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (g.inputs[i]->op == Op::Param && g.inputs[i]->data)
      bytes[i] = host_bytes(*static_cast<Storage*>(g.inputs[i]->data.get()),
                            nbytes(g.inputs[i]->dtype, g.inputs[i]->shape));
  return bytes;
}

void dump_compiled(const std::string& dir_s, const Graph& g, const std::string& key,
                   const std::string& backend, const std::vector<std::string>& sources,
                   const std::vector<std::shared_ptr<Storage>>* outputs, const InputBytes* inputs) {
  using namespace debug;
  try {
    fs::path dir(dir_s);
    fs::create_directories(dir);
    std::vector<std::string> in_refs(g.inputs.size()), out_refs(g.roots.size());
    if (outputs) {
      BinWriter ins(dir, key + ".inputs.bin"), outs(dir, key + ".outputs.bin");
      for (size_t i = 0; i < g.inputs.size(); ++i)
        if (g.inputs[i]->op == Op::Param)
          in_refs[i] = ins.add(inputs ? (*inputs)[i]
                                      : host_bytes(*static_cast<Storage*>(g.inputs[i]->data.get()),
                                                   nbytes(g.inputs[i]->dtype, g.inputs[i]->shape)));
      for (size_t i = 0; i < g.roots.size(); ++i)
        out_refs[i] =
            outs.add(host_bytes(*(*outputs)[i], nbytes(g.roots[i]->dtype, g.roots[i]->shape)));
    }
    std::ofstream(dir / (key + ".json")) << trace_to_json(
        g, key, backend, [&](int i) { return in_refs[i]; }, [&](int i) { return out_refs[i]; });
    std::ofstream(dir / (key + ".txt")) << graph_text(g);
    std::ofstream(dir / (key + ".dot")) << graph_dot(g);
    const char* ext = cuda_ordinal(backend) >= 0 ? ".cu" : ".ll";
    for (size_t i = 0; i < sources.size(); ++i)
      std::ofstream(dir / (key + ".kernel" + std::to_string(i) + ext)) << sources[i];
  } catch (const std::exception& e) {
    // A dump that cannot be written must not break the program being debugged.
    std::fprintf(stderr, "[lazytensor] LT_DUMP_DIR: could not write the dump of %s: %s\n",
                 key.c_str(), e.what());
  }
}

}  // namespace lt
