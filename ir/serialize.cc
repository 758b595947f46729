#include "ir/serialize.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <type_traits>
#include <unordered_map>

#include "ir/error.h"
#include "ir/half.h"

namespace lt {

using nlohmann::json;

namespace {

// A float for the trace: JSON has no inf or NaN (nlohmann writes null, which no reader takes
// back), so those are the strings "inf", "-inf" and "nan" (float_from reads both forms).
json float_json(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

json attrs_json(const Node& n) {
  json a = json::object();
  const OpInfo& info = op_info(n.op);
  switch (info.cls) {
    case OpClass::Reduce:
      a["axes"] = n.attrs.ints;
      a["keepdim"] = n.attrs.keepdim;
      if (n.op == Op::Var) a["correction"] = float_json(n.attrs.value);
      break;
    case OpClass::Reshape:
    case OpClass::Expand:
      a["shape"] = n.attrs.ints;
      break;
    case OpClass::Permute:
      a["perm"] = n.attrs.ints;
      break;
    case OpClass::Slice:
      a["slices"] = n.attrs.ints;
      break;
    case OpClass::AxisUnary:
    case OpClass::Gather:
    case OpClass::ScatterAdd:
      a["axis"] = n.attrs.ints.at(0);
      break;
    case OpClass::Cast:
      a["dtype"] = std::string(dtype_name(n.attrs.dtype));
      break;
    case OpClass::Rand:
      a["shape"] = n.attrs.ints;
      a["dtype"] = std::string(dtype_name(n.attrs.dtype));
      a["stream"] = n.attrs.stream;
      break;
    case OpClass::LayerNorm:
      a["ints"] = n.attrs.ints;
      a["eps"] = float_json(n.attrs.value);
      break;
    case OpClass::Conv:
      a["ints"] = n.attrs.ints;
      break;
    case OpClass::Attention:
      a["causal"] = n.attrs.ints.at(0) != 0;
      a["scale"] = float_json(n.attrs.value);
      break;
    case OpClass::Collective:
      a["ints"] = n.attrs.ints;
      break;
    case OpClass::Leaf:
      a["value"] = float_json(n.attrs.value);
      break;  // Constant
    default:
      if (n.op == Op::Gelu) a["approximate"] = n.attrs.stream ? "tanh" : "none";
  }
  return a;
}

[[noreturn]] void bad(const std::string& what) { fail(ErrorKind::Value, "trace: ", what); }

template <typename T>
struct is_vector : std::false_type {};
template <typename U>
struct is_vector<std::vector<U>> : std::true_type {};
template <typename U, size_t N>
struct is_vector<SmallVec<U, N>> : std::true_type {};  // Shape and IntList

// Whether `v` can become a T without nlohmann's unchecked static_cast: integers must be JSON
// integers within T's range (a float such as 8.9e106 read as int is undefined behaviour, found
// by tests/fuzz), element by element for vectors.
template <typename T>
bool integers_fit(const json& v) {
  if constexpr (is_vector<T>::value) {
    if (!v.is_array()) return true;  // get<T>() reports the wrong type
    for (const auto& e : v)
      if (!integers_fit<typename T::value_type>(e)) return false;
    return true;
  } else if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    if (v.is_number_unsigned())
      return v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max());
    if (v.is_number_integer()) {
      const int64_t x = v.get<int64_t>();
      return x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             (x < 0 ||
              static_cast<uint64_t>(x) <= static_cast<uint64_t>(std::numeric_limits<T>::max()));
    }
    return !v.is_number_float();
  } else {
    return true;
  }
}

template <typename T>
T get(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) bad(where + " lacks \"" + key + "\"");
  if (!integers_fit<T>(j.at(key))) bad(where + ": \"" + key + "\" is not an integer in range");
  try {
    return j.at(key).get<T>();
  } catch (const json::exception&) {
    bad(where + ": \"" + key + "\" has the wrong type");
  }
}

// A float written by float_json: a JSON number, or "inf", "-inf", "nan".
double float_from(const json& j, const char* key, const std::string& where) {
  if (j.is_object() && j.contains(key) && j.at(key).is_string()) {
    const std::string v = j.at(key).get<std::string>();
    if (v == "inf") return std::numeric_limits<double>::infinity();
    if (v == "-inf") return -std::numeric_limits<double>::infinity();
    if (v == "nan") return std::numeric_limits<double>::quiet_NaN();
    bad(where + ": \"" + key + "\" is \"" + v + "\", not a number, \"inf\", \"-inf\" or \"nan\"");
  }
  return get<double>(j, key, where);
}

Shape get_shape(const json& j, const char* key, const std::string& where) {
  Shape s = get<Shape>(j, key, where);
  for (auto d : s)
    if (d < 0 || d > (int64_t{1} << 40))
      bad(where + ": dimension " + std::to_string(d) + " out of range");
  return s;
}

DType get_dtype(const json& j, const char* key, const std::string& where) {
  std::string name = get<std::string>(j, key, where);
  try {
    return dtype_from_name(name);
  } catch (const Error&) {
    bad(where + ": unknown dtype \"" + name + "\"");
  }
}

Attrs attrs_from(Op op, const json& a, const std::string& where) {
  Attrs r;
  if (!a.is_object()) bad(where + ": attrs must be an object");
  switch (op_info(op).cls) {
    case OpClass::Reduce:
      r.ints = get<IntList>(a, "axes", where);
      r.keepdim = get<bool>(a, "keepdim", where);
      if (op == Op::Var) r.value = float_from(a, "correction", where);
      break;
    case OpClass::Reshape:
    case OpClass::Expand:
      r.ints = get_shape(a, "shape", where);
      break;
    case OpClass::Permute:
      r.ints = get<IntList>(a, "perm", where);
      break;
    case OpClass::Slice:
      r.ints = get<IntList>(a, "slices", where);
      break;
    case OpClass::AxisUnary:
    case OpClass::Gather:
    case OpClass::ScatterAdd:
      r.ints = {get<int64_t>(a, "axis", where)};
      break;
    case OpClass::Cast:
      r.dtype = get_dtype(a, "dtype", where);
      break;
    case OpClass::Rand:
      r.ints = get_shape(a, "shape", where);
      r.dtype = get_dtype(a, "dtype", where);
      r.stream = get<int64_t>(a, "stream", where);
      break;
    case OpClass::LayerNorm:
      r.ints = get<IntList>(a, "ints", where);
      r.value = float_from(a, "eps", where);
      break;
    case OpClass::Conv:
      r.ints = get<IntList>(a, "ints", where);
      break;
    case OpClass::Attention:
      r.ints = {get<bool>(a, "causal", where) ? 1 : 0};
      r.value = float_from(a, "scale", where);
      break;
    case OpClass::Collective:
      r.ints = get<IntList>(a, "ints", where);
      break;
    default:
      if (op == Op::Gelu) r.stream = get<std::string>(a, "approximate", where) == "tanh" ? 1 : 0;
  }
  return r;
}

}  // namespace

std::string trace_to_json(const Graph& g, const std::string& hash, const std::string& backend,
                          const std::function<std::string(int)>& data_ref,
                          const std::function<std::string(int)>& output_ref,
                          const std::function<std::string(const Node*)>& node_ref) {
  json j;
  j["format"] = "lazytensor-trace";
  j["version"] = kTraceVersion;
  j["hash"] = hash;
  j["backend"] = backend;
  std::unordered_map<const Node*, int> id;
  json inputs = json::array(), nodes = json::array();
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    json in = {{"id", static_cast<int>(i)}, {"dtype", dtype_name(n->dtype)}, {"shape", n->shape}};
    if (n->op == Op::Scalar) {
      in["kind"] = "scalar";
      if (is_floating(n->dtype))
        in["value"] = float_json(n->scalar);
      else
        in["value"] = n->scalar_i;
    } else {
      in["kind"] = "param";
      in["data"] = data_ref(static_cast<int>(i));
    }
    inputs.push_back(in);
  }
  int next = static_cast<int>(g.inputs.size());
  for (const Node* n : g.order) {
    if (n->op == Op::Param || n->op == Op::Scalar) {
      id[n] = g.input_of.at(n);
      continue;
    }
    json ins = json::array();
    for (auto& c : n->inputs) ins.push_back(id.at(c.get()));
    id[n] = next;
    json node = {{"id", next++},
                 {"op", op_name(n->op)},
                 {"inputs", ins},
                 {"attrs", attrs_json(*n)},
                 {"dtype", dtype_name(n->dtype)},
                 {"shape", n->shape},
                 {"source", source_str(n->source)}};
    if (node_ref) {
      std::string r = node_ref(n);
      if (!r.empty()) node["data"] = r;
    }
    nodes.push_back(node);
  }
  json outputs = json::array();
  for (size_t i = 0; i < g.roots.size(); ++i)
    outputs.push_back({{"node", id.at(g.roots[i])}, {"data", output_ref(static_cast<int>(i))}});
  j["inputs"] = inputs;
  j["nodes"] = nodes;
  j["outputs"] = outputs;
  return j.dump(1);
}

namespace {
LoadedTrace load_trace(
    const std::string& text,
    const std::function<std::shared_ptr<LeafData>(const TraceInput&)>& leaf_data) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for numbers that overflow
    bad(std::string("not valid JSON (") + e.what() + ")");
  }
  if (!j.is_object()) bad("top level must be an object");
  if (get<std::string>(j, "format", "file") != "lazytensor-trace")
    bad("\"format\" is not \"lazytensor-trace\"");
  int version = get<int>(j, "version", "file");
  if (version > kTraceVersion)
    bad("version " + std::to_string(version) + " is newer than this build supports (" +
        std::to_string(kTraceVersion) + ")");
  if (version < 1) bad("version " + std::to_string(version) + " is invalid");
  LoadedTrace t;
  t.hash = j.value("hash", "");
  t.backend = j.value("backend", "");
  std::unordered_map<int, NodePtr> by_id;
  const json& inputs = j.contains("inputs") ? j["inputs"] : json::array();
  if (!inputs.is_array()) bad("\"inputs\" must be an array");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string where = "input " + std::to_string(i);
    const json& in = inputs[i];
    TraceInput ti{get<int>(in, "id", where), false, get_dtype(in, "dtype", where),
                  get_shape(in, "shape", where)};
    std::string kind = get<std::string>(in, "kind", where);
    if (kind == "scalar") {
      ti.scalar = true;
      if (!ti.shape.empty()) bad(where + ": a scalar input must have shape []");
      if (is_floating(ti.dtype)) {
        ti.value = float_from(in, "value", where);
        ti.value_i = double_to_int64(ti.value);  // only integral scalars use it
      } else {
        ti.value_i = get<int64_t>(in, "value", where), ti.value = static_cast<double>(ti.value_i);
      }
    } else if (kind == "param") {
      ti.data = in.value("data", "");
    } else {
      bad(where + ": unknown kind \"" + kind + "\"");
    }
    if (by_id.count(ti.id)) bad(where + ": duplicate id " + std::to_string(ti.id));
    NodePtr leaf = ti.scalar ? (is_floating(ti.dtype) ? make_scalar(ti.dtype, ti.value)
                                                      : make_int_scalar(ti.dtype, ti.value_i))
                             : make_param(ti.dtype, ti.shape, leaf_data(ti));
    by_id[ti.id] = leaf;
    t.inputs.push_back(ti);
  }
  const json& nodes = j.contains("nodes") ? j["nodes"] : json::array();
  if (!nodes.is_array()) bad("\"nodes\" must be an array");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json& n = nodes[i];
    std::string where = "node " + std::to_string(i);
    int id = get<int>(n, "id", where);
    where = "node " + std::to_string(id);
    std::string name = get<std::string>(n, "op", where);
    Op op;
    if (!op_from_name(name, &op)) bad(where + ": unknown op \"" + name + "\"");
    where += " (" + name + ")";
    if (by_id.count(id)) bad(where + ": duplicate id");
    NodeList ins;
    for (int c : get<std::vector<int>>(n, "inputs", where)) {
      auto it = by_id.find(c);
      if (it == by_id.end())
        bad(where + ": input id " + std::to_string(c) + " is not defined before it");
      ins.push_back(it->second);
    }
    NodePtr made;
    if (op == Op::Constant) {
      if (!ins.empty()) bad(where + ": a constant takes no inputs");
      made = make_constant(get_dtype(n, "dtype", where), float_from(n.at("attrs"), "value", where),
                           get_shape(n, "shape", where));
    } else if (op == Op::Iota) {  // 0, 1, ..., n - 1 (lazy devices' positions)
      if (!ins.empty()) bad(where + ": an iota takes no inputs");
      const Shape shape = get_shape(n, "shape", where);
      if (shape.size() != 1) bad(where + ": an iota has one dim, got " + shape_str(shape));
      try {
        made = make_iota(shape[0]);
      } catch (const Error& e) {
        bad(where + ": " + e.what());
      }
    } else if (op == Op::Param || op == Op::Scalar) {
      bad(where + ": leaves belong in \"inputs\"");
    } else {
      Attrs a = attrs_from(op, n.contains("attrs") ? n["attrs"] : json::object(), where);
      try {
        made = make_node(op, std::move(ins), a);
      } catch (const Error& e) {
        bad(where + ": " + e.what());
      }
    }
    if (n.contains("dtype") && get_dtype(n, "dtype", where) != made->dtype)
      bad(where + ": recorded dtype " + get<std::string>(n, "dtype", where) + " but it infers " +
          std::string(dtype_name(made->dtype)));
    if (n.contains("shape") && get_shape(n, "shape", where) != made->shape)
      bad(where + ": recorded shape " + shape_str(get_shape(n, "shape", where)) +
          " but it infers " + shape_str(made->shape));
    if (n.contains("source") && n["source"].is_string() && !n["source"].get<std::string>().empty())
      const_cast<Node&>(*made).source = intern_source(n["source"].get<std::string>());
    by_id[id] = made;
    t.nodes.push_back(made);
    t.node_ids.push_back(id);
    t.node_refs.push_back(n.contains("data") && n["data"].is_string() ? n["data"].get<std::string>()
                                                                      : "");
  }
  const json& outs = get<json>(j, "outputs", "file");
  if (!outs.is_array() || outs.empty()) bad("\"outputs\" must be a non-empty array");
  for (size_t i = 0; i < outs.size(); ++i) {
    std::string where = "output " + std::to_string(i);
    int id = get<int>(outs[i], "node", where);
    auto it = by_id.find(id);
    if (it == by_id.end()) bad(where + ": node id " + std::to_string(id) + " does not exist");
    t.roots.push_back(it->second);
    t.output_refs.push_back(outs[i].value("data", ""));
  }
  return t;
}

}  // namespace

LoadedTrace trace_from_json(
    const std::string& text,
    const std::function<std::shared_ptr<LeafData>(const TraceInput&)>& leaf_data) {
  // Any JSON access of the wrong type that slipped past the checks becomes the same clear error
  // (found by tests/fuzz: a number too large for its type escaped as nlohmann's out_of_range).
  try {
    return load_trace(text, leaf_data);
  } catch (const json::exception& e) {
    bad(std::string("malformed value (") + e.what() + ")");
  }
}

}  // namespace lt
