#include "runtime/executor.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "ir/debug_level.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/half.h"
#include "lowering/lower.h"
#include "runtime/disk_cache.h"
#include "runtime/dynamic_shapes.h"
#include "runtime/graph_cache.h"
#include "runtime/metrics_state.h"
#include "runtime/profile.h"
#include "runtime/storm.h"
#include "runtime/symbolic_compile.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"
#include "runtime/trace_observer.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

GraphCache& cache() {
  static GraphCache c(4096);
  return c;
}

Hash128 g_last_key;  // of the last executed graph, for kernel sources

const char* env(const char* name) {
  const char* e = std::getenv(name);
  return e && *e ? e : nullptr;
}

// What the output builder needs of input b: its Storage, or its dtype and scalar value.
struct InputView {
  const Storage* storage;
  DType dtype;
  double scalar;
  int64_t scalar_i;
};

// One Storage per root from the executable's output buffers (shared by syncs and replays).
// `donated`: per graph input, the output buffer written into its memory (or -1).
std::vector<std::shared_ptr<Storage>> make_outputs(const CachedGraph& entry,
                                                   const std::vector<BufferPtr>& outs,
                                                   Backend& backend,
                                                   const std::string& backend_name, size_t roots,
                                                   const std::function<InputView(int)>& input,
                                                   const std::vector<int>& donated) {
  std::vector<std::shared_ptr<Storage>> result(roots);
  // Per output buffer, the input donated to it (the first, as a scan would find): looked up per
  // root, where scanning every input for every root was quadratic (741 roots x 2509 inputs in a
  // GPT-2 step).
  std::vector<int> donor_of(outs.size(), -1);
  for (size_t j = donated.size(); j-- > 0;)
    if (donated[j] >= 0 && static_cast<size_t>(donated[j]) < donor_of.size())
      donor_of[static_cast<size_t>(donated[j])] = static_cast<int>(j);
  for (size_t i = 0; i < roots; ++i) {
    int b = entry.output_buffers[i];
    auto s = std::make_shared<Storage>();
    s->backend = backend_name;
    if (entry.output_kinds[i] == BufferSpec::Kind::Output) {
      s->buffer = outs.at(b);
      if (!s->buffer && donor_of.at(b) >= 0)
        s->buffer = input(donor_of[b]).storage->buffer;  // updated in place
      // A view of another root's value (Plan::output_offsets): its part of that buffer.
      if (s->buffer && !entry.output_views.empty() && entry.output_views[i].second >= 0)
        s->buffer = backend.sub_buffer(s->buffer, entry.output_views[i].first,
                                       static_cast<size_t>(entry.output_views[i].second));
    } else if (entry.output_kinds[i] == BufferSpec::Kind::Scalar) {
      // The root is a runtime scalar (lt::full({}, 2.5)): it has no buffer yet, so write one.
      InputView n = input(b);
      uint64_t raw = 0;
      if (is_floating(n.dtype))
        store_from_double(&raw, n.dtype, n.scalar);
      else
        store_from_int(&raw, n.dtype, n.scalar_i);
      size_t bytes = dtype_size(n.dtype);
      s->buffer = backend.allocate(bytes);
      backend.copy_from_host(*s->buffer, &raw, bytes);
    } else {
      // The root is an input itself: share its data.
      const Storage* in = input(b).storage;
      s->buffer = in->buffer;
      s->backend = in->backend;
    }
    if (!s->buffer) fail(ErrorKind::Runtime, "internal: graph output ", i, " was not produced");
    result[i] = std::move(s);
  }
  return result;
}

}  // namespace

std::vector<std::string> last_kernel_sources() {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  CachedGraph* e = cache().find(g_last_key);
  return e ? e->exe->kernel_sources() : std::vector<std::string>{};
}

void clear_graph_cache() {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  cache().clear();
  forget_symbolic_compiles();
  forget_dynamic_dims();
}

size_t graph_cache_size() {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  return cache().size();
}

namespace {

// Marks the chosen donations on the run's inputs and counts them (lt.metrics donated_buffers,
// donated_bytes).
void apply_donations(const std::vector<int>& donated,
                     const std::vector<DonationCandidate>& candidates,
                     std::vector<RunInput>& inputs) {
  // Per output buffer, its first candidate (a map: a scan per donated input was quadratic in a
  // training step's hundreds of donations).
  std::vector<const DonationCandidate*> by_output;
  for (const DonationCandidate& c : candidates) {
    if (c.output < 0) continue;
    if (static_cast<size_t>(c.output) >= by_output.size()) by_output.resize(c.output + 1, nullptr);
    if (!by_output[c.output]) by_output[c.output] = &c;
  }
  int64_t buffers = 0, bytes = 0;
  for (size_t j = 0; j < donated.size(); ++j) {
    if (donated[j] < 0) continue;
    inputs[j].donated_output = donated[j];
    if (static_cast<size_t>(donated[j]) < by_output.size())
      if (const DonationCandidate* c = by_output[donated[j]]) {
        ++buffers;
        bytes += static_cast<int64_t>(c->bytes);
      }
  }
  if (buffers) {
    metrics::bump(metrics::Counter::DonatedBuffers, buffers);
    metrics::bump(metrics::Counter::DonatedBytes, bytes);
  }
}

}  // namespace

std::vector<std::shared_ptr<Storage>> execute_graph(const std::vector<const Node*>& roots,
                                                    const std::string& backend_name,
                                                    SyncReason reason, GraphRecord* record,
                                                    const RootRefs* root_refs) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (TraceObserver* o = trace_observer()) o->on_execution(reason);  // computed mid-capture
  auto t0 = Clock::now();
  Backend& backend = get_backend(backend_name);
  Graph g = collect_graph(roots);
  // The library choices lowering makes (LowerOptions) are part of the key: a trace is the same
  // whatever the backend offers (conv and attention are prims everywhere), so a graph compiled
  // with LT_FLASH_ATTENTION=0, LT_CUDNN=0 or LT_GEMM=0 must not serve a call made without.
  const LowerOptions opts = backend.lower_options();
  Hasher kh(0x62616b);
  for (char c : backend_name) kh.add(static_cast<uint64_t>(c));
  for (const auto* dtypes : {&opts.gemm_dtypes, &opts.conv_dtypes, &opts.attention_dtypes}) {
    kh.add(dtypes->size());
    for (DType t : *dtypes) kh.add(static_cast<uint64_t>(t));
  }
  kh.add(static_cast<uint64_t>(opts.attention_head_dim));
  kh.add(static_cast<uint64_t>(opts.split_for_many_threads));
  kh.add(static_cast<uint64_t>(opts.conv_channels_last));
  kh.add(static_cast<uint64_t>(opts.collectives_beside_light_work));
  const Hash128 prefix = Hasher(kh).digest();
  Hash128 key = kh.add(g.key).digest();
  profile::record(profile::Phase::Hash, "hash", t0, Clock::now());

  CachedGraph* entry = cache().find(key);
  // Not cached at these sizes: a symbolic compile may serve them (issue 30), found or made now.
  std::optional<SymbolicRun> sym;
  if (!entry && reason != SyncReason::Eager) {
    sym = symbolic_entry(g, backend, opts, prefix, cache(), current_source());
    if (sym) entry = sym->entry;
    if (sym && sym->compiled) {
      metrics::bump(metrics::Counter::GraphCompiles);
      metrics::bump(metrics::Counter::SymbolicCompiles);
      metrics::bump(metrics::Counter::KernelsCompiled, entry->exe->num_kernels());
    }
  }
  const bool hit = entry != nullptr && !(sym && sym->compiled);
  const char* source = hit ? "memory" : "compiled";  // CONTRACT.md's last_graph()["cache"]
  double compile_ms = sym ? sym->compile_ms : 0;
  if (!entry) {
    auto tc = Clock::now();
    if (auto loaded = disk_cache::load(backend, key)) {
      entry = cache().insert(
          key, make_cached_graph(loaded->plan, std::move(loaded->exe), loaded->nodes));
      source = "disk";
      metrics::bump(metrics::Counter::DiskCacheHits);
    } else {
      auto tl = Clock::now();
      Plan plan = lower(g, opts);
      profile::record(profile::Phase::Lower, key.hex().substr(0, 12), tl, Clock::now());
      auto nodes = static_cast<int64_t>(plan.prims.nodes.size());
      std::unique_ptr<Executable> exe;
      {
        profile::Scope s(profile::Phase::Compile, key.hex().substr(0, 12) + " " + backend_name);
        exe = backend.compile(plan);
      }
      entry = cache().insert(key, make_cached_graph(plan, std::move(exe), nodes));
      disk_cache::store(backend, key, plan, nodes, *entry->exe);
      metrics::bump(metrics::Counter::GraphCompiles);
      metrics::bump(metrics::Counter::KernelsCompiled, entry->exe->num_kernels());
    }
    compile_ms = ms_since(tc);
    if (reason != SyncReason::Eager) note_static_compile(current_source(), g);
  }
  if (!hit && reason != SyncReason::Eager)
    if (auto warning = note_compile(current_source(), g); warning && debug_level() > 0)
      std::fprintf(stderr, "[lazytensor] warning: %s\n", warning->c_str());
  if (hit) metrics::bump(metrics::Counter::GraphCacheHits);

  std::vector<RunInput> inputs(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    if (n->op == Op::Scalar) {
      inputs[i].scalar = n->scalar;
      inputs[i].scalar_i = n->scalar_i;
      continue;
    }
    auto* s = static_cast<Storage*>(n->data.get());
    if (!s || !s->buffer) fail(ErrorKind::Runtime, "internal: input ", i, " of graph has no data");
    if (s->backend != backend_name &&
        !(backend_host_memory(s->backend) && backend_host_memory(backend_name)))
      fail(ErrorKind::Runtime, "input ", i, " of a graph for backend ", backend_name,
           " lives on backend ", s->backend, "; move it with .to(device) first");
    inputs[i].buffer = s->buffer.get();
  }
  std::vector<int> donated;
  if (root_refs && !entry->donations.empty()) {
    donated = choose_donations(g, entry->donations, *root_refs);
    apply_donations(donated, entry->donations, inputs);
  }
  // A dump with data records the inputs as this run reads them: donated ones are overwritten by
  // the results (an optimizer's parameters), and a replay must start from the values before.
  const char* dump_dir = hit ? nullptr : env("LT_DUMP_DIR");
  const bool dump_data = dump_dir && env("LT_DUMP_DATA");
  InputBytes inputs_before;
  if (dump_data) inputs_before = dump_inputs(g);
  auto tr = Clock::now();
  RunStats stats;
  if (profile::tracing())
    stats.on_kernel = [](const std::string& name, Clock::time_point s, Clock::time_point e) {
      profile::record(profile::Phase::Kernel, name, s, e);
    };
  std::vector<BufferPtr> outs = sym ? entry->exe->run_symbolic(inputs, &stats, sym->symbols)
                                    : entry->exe->run(inputs, &stats);
  double run_ms = ms_since(tr);
  profile::record(profile::Phase::Run, key.hex().substr(0, 12), tr, Clock::now());
  metrics::bump(metrics::Counter::KernelLaunches, stats.kernel_launches);
  metrics::bump(metrics::Counter::CudaGraphLaunches, stats.graph_launches);
  metrics::record_sync(reason);

  g_last_key = sym ? sym->cache_key : key;
  std::vector<std::shared_ptr<Storage>> result = make_outputs(
      *entry, outs, backend, backend_name, roots.size(),
      [&](int b) {
        const Node* n = g.inputs.at(b);
        return InputView{static_cast<const Storage*>(n->data.get()), n->dtype, n->scalar,
                         n->scalar_i};
      },
      donated);

  if (dump_dir)
    dump_compiled(dump_dir, g, key.hex(), backend_name, entry->exe->kernel_sources(),
                  dump_data ? &result : nullptr, dump_data ? &inputs_before : nullptr);

  if (reason != SyncReason::Eager || debug_level() > 0) {
    metrics::GraphInfo info;
    info.hash = key.hex();
    info.nodes = entry->nodes;
    info.kernels = entry->exe->num_kernels();
    info.inputs = static_cast<int64_t>(g.inputs.size());
    info.outputs = static_cast<int64_t>(roots.size());
    info.cache = source;
    info.compile_ms = compile_ms;
    info.run_ms = run_ms;
    info.backend = backend_name;
    info.grouping = entry->grouping;
    if (sym) info.symbolic_dims = sym->dims;
    if (debug_level() > 0)
      std::fprintf(stderr,
                   "[lazytensor] sync %s: graph %s backend=%s nodes=%lld kernels=%lld %s "
                   "compile=%.2fms run=%.2fms total=%.2fms\n",
                   sync_reason_name(reason), info.hash.substr(0, 16).c_str(), backend_name.c_str(),
                   static_cast<long long>(info.nodes), static_cast<long long>(info.kernels),
                   info.cache.c_str(), compile_ms, run_ms, ms_since(t0));
    if (debug_level() > 1 && !hit) std::fprintf(stderr, "%s", info.grouping.c_str());
    metrics::set_last_graph(std::move(info));
  }
  if (record) {
    record->key = key;
    record->graph = std::move(g);
  }
  return result;
}

std::optional<std::vector<std::shared_ptr<Storage>>> run_cached(
    const Hash128& key, const std::string& backend_name, const std::vector<BoundInput>& inputs,
    size_t roots) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  CachedGraph* entry = cache().find(key);
  if (!entry || entry->symbolic) return std::nullopt;
  Backend& backend = get_backend(backend_name);
  metrics::bump(metrics::Counter::GraphCacheHits);
  std::vector<RunInput> run(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const BoundInput& in = inputs[i];
    if (!in.storage) {
      run[i].scalar = in.scalar;
      run[i].scalar_i = in.scalar_i;
      continue;
    }
    if (!in.storage->buffer)
      fail(ErrorKind::Runtime, "internal: input ", i, " of a replayed graph has no data");
    if (in.storage->backend != backend_name &&
        !(backend_host_memory(in.storage->backend) && backend_host_memory(backend_name)))
      fail(ErrorKind::Runtime, "input ", i, " of a replayed graph for backend ", backend_name,
           " lives on backend ", in.storage->backend);
    run[i].buffer = in.storage->buffer.get();
  }
  std::vector<int> donated(inputs.size(), -1);
  for (const DonationCandidate& c : entry->donations) {
    const BoundInput& in = inputs.at(static_cast<size_t>(c.input));
    // owner_root is set (capture/capture.cc) only for a buffer held by its storage alone and owned
    // by the runtime: never a view's memory (Plan::output_offsets) or memory a view shares.
    if (in.owner_root >= 0 && static_cast<size_t>(in.owner_root) < roots &&
        entry->output_buffers.at(static_cast<size_t>(in.owner_root)) == c.output)
      donated[static_cast<size_t>(c.input)] = c.output;
  }
  apply_donations(donated, entry->donations, run);
  auto tr = Clock::now();
  RunStats stats;
  if (profile::tracing())
    stats.on_kernel = [](const std::string& name, Clock::time_point s, Clock::time_point e) {
      profile::record(profile::Phase::Kernel, name, s, e);
    };
  std::vector<BufferPtr> outs = entry->exe->run(run, &stats);
  double run_ms = ms_since(tr);
  profile::record(profile::Phase::Run, key.hex().substr(0, 12), tr, Clock::now());
  metrics::bump(metrics::Counter::KernelLaunches, stats.kernel_launches);
  metrics::bump(metrics::Counter::CudaGraphLaunches, stats.graph_launches);
  metrics::record_sync(SyncReason::MarkStep);
  g_last_key = key;
  auto result = make_outputs(
      *entry, outs, backend, backend_name, roots,
      [&](int b) {
        const BoundInput& in = inputs.at(b);
        return InputView{in.storage.get(), in.dtype, in.scalar, in.scalar_i};
      },
      donated);
  metrics::GraphInfo info;
  info.hash = key.hex();
  info.nodes = entry->nodes;
  info.kernels = entry->exe->num_kernels();
  info.inputs = static_cast<int64_t>(inputs.size());
  info.outputs = static_cast<int64_t>(roots);
  info.cache = "memory";
  info.run_ms = run_ms;
  info.backend = backend_name;
  if (debug_level() > 0)
    std::fprintf(stderr,
                 "[lazytensor] replay (lt.compile): graph %s backend=%s kernels=%lld run=%.2fms\n",
                 info.hash.substr(0, 16).c_str(), backend_name.c_str(),
                 static_cast<long long>(info.kernels), run_ms);
  if (debug_level() > 1) info.grouping = entry->grouping;
  metrics::set_last_graph(std::move(info));
  return result;
}

}  // namespace lt
