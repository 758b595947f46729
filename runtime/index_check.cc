#include "runtime/index_check.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "backends/backend.h"
#include "ir/error.h"
#include "ir/half.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"
#include "runtime/trace_observer.h"

namespace lt {
namespace {

struct Pending {
  std::weak_ptr<const Node> anchor;
  std::string backend;
  index_checks::Taken check;
};

// Guarded by runtime_mutex(): checks are recorded while tracing and taken by syncs.
std::vector<Pending>& pending() {
  static std::vector<Pending> p;
  return p;
}
size_t g_purge_at = 64;  // drop checks of dead results when the list grows past this

std::string failure_message(const IndexCheckSpec& s, int64_t value, const Shape& index_shape,
                            int32_t source, bool deferred) {
  std::ostringstream m;
  if (s.dim < 0)  // one_hot: no indexed dimension, a class count
    m << s.op << ": class value " << value << " is out of range for num_classes " << s.hi
      << " (index shape " << shape_str(index_shape);
  else
    m << s.op << ": index " << value << " is out of bounds for dimension " << s.dim << " with size "
      << s.hi << " (input shape " << shape_str(s.input_shape) << ", index shape "
      << shape_str(index_shape);
  if (s.lo < 0) m << ", negative indices wrap";
  m << ")";
  const std::string& where = source_str(source);
  if (!where.empty()) m << " at " << where;
  if (deferred) m << "; the index was computed in the lazy graph and checked at the sync";
  return m.str();
}

// The first bad value given an index's max and min (the max when both are out of range).
std::optional<int64_t> bad_value(const IndexCheckSpec& s, int64_t max, int64_t min) {
  if (max >= s.hi) return max;
  if (min < s.lo) return min;
  return std::nullopt;
}

// [max(x), max(-x - 1)] as one int64 [2] reduction over [x; -x - 1]: one kernel, where two 0-d
// reductions would be two. -x - 1 (= ~x in two's complement) maps INT64_MIN to INT64_MAX, so
// min(x) = ~stats[1] exactly; any extra elementwise op here (a clamp) made the fuser materialize x.
Tensor stats_of(const Tensor& index) {
  Tensor x = index.reshape({1, -1});
  if (x.dtype() != DType::Int64) x = cast(x, DType::Int64);
  Tensor p = positions(2, index.device()).reshape({2, 1});  // [0, 1]
  return (x * (p * Scalar(-2) + Scalar(1)) - p).amax({1});
}

// The first `bytes` of s's data: in place when it is in host memory, else copied into `copy`.
const unsigned char* host_bytes(const Storage& s, size_t bytes, std::vector<unsigned char>& copy) {
  if (s.buffer->on_host()) return static_cast<const unsigned char*>(s.buffer->data());
  copy.resize(bytes);
  get_backend(s.backend).copy_to_host(copy.data(), *s.buffer, bytes);
  return copy.data();
}

void read_stats(const Storage& s, int64_t v[2]) {
  std::vector<unsigned char> copy;
  std::memcpy(v, host_bytes(s, 2 * sizeof(int64_t), copy), 2 * sizeof(int64_t));
}

void purge_dead() {
  auto& p = pending();
  std::erase_if(p, [](const Pending& c) { return c.anchor.expired(); });
  g_purge_at = std::max<size_t>(64, 2 * p.size());
}

}  // namespace

bool index_values_known(const Tensor& index) {
  const auto& impl = index.impl();
  return impl && !impl->pending && impl->storage && impl->storage->buffer &&
         impl->storage->buffer->on_host();
}

void check_index_values(const IndexCheckSpec& spec, const Tensor& index, const Tensor& anchor) {
  if (index.numel() == 0) return;
  if (index_values_known(index)) {
    // Under a trace observer (lt.compile's capture) the check is redone on each replay's values (or
    // the data is a constant): reading them here does not make the step depend on data.
    if (TraceObserver* o = trace_observer()) o->on_index_check(spec, index);
    index_checks::check_stored(spec, *index.impl());
    return;
  }
  Tensor st = stats_of(index);
  if (!index.device().is_lazy()) {  // eager: the values exist now
    auto v = st.to_vector<int64_t>();
    if (auto bad = bad_value(spec, v[0], ~v[1]))
      fail(ErrorKind::Index, failure_message(spec, *bad, index.shape(), -1, false));
    return;
  }
  const NodePtr a = anchor.defined() ? anchor.node() : index.node();
  Pending c;
  c.anchor = a;
  c.backend = index.device().backend_name();
  c.check = {st.node(), spec, index.shape(), a->source};
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  pending().push_back(std::move(c));
  if (pending().size() > g_purge_at) purge_dead();
}

void check_class_targets(const Tensor& target, int64_t classes, int64_t ignore_index,
                         const char* fn, const Shape& input_shape) {
  // Under a trace observer (lt.compile's capture) a host read would make the step unreplayable, and
  // replays bind other targets anyway: compiled steps are not checked.
  if (target.numel() == 0 || !index_values_known(target) || trace_observer()) return;
  for (int64_t v : target.to_vector<int64_t>())
    if (v != ignore_index && (v < 0 || v >= classes))
      fail(ErrorKind::Index, fn, ": target ", v, " is out of bounds for ", classes,
           " classes (input ", shape_str(input_shape), ", target ", shape_str(target.shape()), ")");
}

namespace index_checks {

std::vector<Taken> take_into(const std::string& backend, std::vector<const Node*>& roots) {
  std::vector<Taken> taken;
  auto& p = pending();
  if (p.empty()) return taken;
  // Anchors of this backend's live checks; then a walk from the roots until all are found.
  std::unordered_map<const Node*, std::vector<size_t>> wanted;
  NodeList keep;  // anchors stay alive during the walk
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i].backend != backend) continue;
    if (auto a = p[i].anchor.lock()) {
      wanted[a.get()].push_back(i);
      keep.push_back(std::move(a));
    }
  }
  std::vector<bool> take(p.size(), false);
  size_t left = wanted.size();
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack(roots.begin(), roots.end());
  while (left && !stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n).second) continue;
    if (auto it = wanted.find(n); it != wanted.end()) {
      for (size_t i : it->second) take[i] = true;
      --left;
    }
    for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  std::vector<Pending> rest;
  for (size_t i = 0; i < p.size(); ++i) {
    if (take[i])
      taken.push_back(std::move(p[i].check));
    else if (!p[i].anchor.expired())
      rest.push_back(std::move(p[i]));
  }
  p = std::move(rest);
  for (const Taken& t : taken) roots.push_back(t.stats.get());
  return taken;
}

namespace {

// The failure a check's stats [max, ~min] show, or "" when its index was in range.
std::string failure_of(const Taken& t, const int64_t v[2]) {
  if (auto bad = bad_value(t.spec, v[0], ~v[1]))
    return failure_message(t.spec, *bad, t.index_shape, t.source, true);
  return {};
}

}  // namespace

std::string first_failure(const std::vector<Taken>& taken,
                          const std::vector<std::shared_ptr<Storage>>& outs, size_t first) {
  for (size_t i = 0; i < taken.size(); ++i) {
    int64_t v[2];
    read_stats(*outs.at(first + i), v);
    if (std::string bad = failure_of(taken[i], v); !bad.empty()) return bad;
  }
  return {};
}

namespace {

// A device sync's checks whose stats are being copied to the host (defer_reads).
struct Unread {
  Taken check;
  std::function<void(void*)> wait;  // writes [max, ~min]
};
std::vector<Unread>& unread() {  // guarded by runtime_mutex()
  static std::vector<Unread> u;
  return u;
}

}  // namespace

void defer_reads(const std::string& backend, std::vector<Taken> taken,
                 const std::vector<std::shared_ptr<Storage>>& outs, size_t first) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Backend& be = get_backend(backend);
  for (size_t i = 0; i < taken.size(); ++i)
    unread().push_back({std::move(taken[i]),
                        be.copy_to_host_async(*outs.at(first + i)->buffer, 2 * sizeof(int64_t))});
}

std::string first_unread_failure() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::vector<Unread> reads = std::move(unread());
  unread().clear();
  std::string first;
  for (Unread& r : reads) {
    int64_t v[2];
    r.wait(v);
    if (first.empty()) first = failure_of(r.check, v);
  }
  if (!first.empty())
    first +=
        " (found at a later sync or read: on a device a sync's index checks are read while "
        "the next step is traced, not waited for)";
  return first;
}

std::string after_run(const std::string& backend, std::vector<Taken> checks,
                      const std::vector<std::shared_ptr<Storage>>& outs, size_t first) {
  std::string bad = first_unread_failure();
  if (checks.empty()) return bad;
  if (!backend_host_memory(backend))
    defer_reads(backend, std::move(checks), outs, first);
  else if (bad.empty())
    bad = first_failure(checks, outs, first);
  return bad;
}

void check_unread() {
  if (std::string bad = first_unread_failure(); !bad.empty()) fail(ErrorKind::Index, bad);
}

void check_stored(const IndexCheckSpec& spec, const TensorImpl& index) {
  const size_t n = static_cast<size_t>(numel(index.shape)), width = dtype_size(index.dtype);
  std::vector<unsigned char> copy;
  const unsigned char* data = host_bytes(*index.storage, n * width, copy);
  for (size_t i = 0; i < n; ++i)
    if (int64_t x = load_as_int(data + i * width, index.dtype); x < spec.lo || x >= spec.hi)
      fail(ErrorKind::Index, failure_message(spec, x, index.shape, -1, false));
}

void drop_dead() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  purge_dead();
}

size_t pending_count() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  return pending().size();
}

}  // namespace index_checks
}  // namespace lt
