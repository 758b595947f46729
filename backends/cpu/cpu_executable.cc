#include "backends/cpu/cpu_executable.h"

#include <llvm/IR/GlobalAlias.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

#include "backends/clocks.h"
#include "backends/cpu/codegen.h"
#include "backends/cpu/kernel_prep.h"
#include "backends/cpu/thread_pool.h"
#include "backends/host_collective.h"
#include "backends/parallel_work.h"
#include "ir/bytes.h"
#include "ir/error.h"
#include "ir/half.h"
#include "lowering/kernel_code.h"
#include "lowering/memory_plan.h"
#include "lowering/size_fields.h"

namespace lt::cpu {
namespace {

// Below this many element-iterations a kernel runs on the calling thread: waking workers costs
// more than it saves.
constexpr int64_t kParallelWork = 32768;
// Each chunk of a parallel kernel gets at least this much work.
constexpr int64_t kChunkWork = 16384;

void check_kernel_args(const loop::Kernel& k, const std::vector<BufferSpec>& buffers) {
  for (const auto& a : k.args) {
    LT_CHECK(a.buffer >= 0 && a.buffer < static_cast<int>(buffers.size()), ErrorKind::Runtime,
             "internal: kernel ", k.name, " names buffer ", a.buffer, " of ", buffers.size());
    const BufferSpec& b = buffers[a.buffer];
    LT_CHECK(b.dtype == a.dtype, ErrorKind::Runtime, "internal: kernel ", k.name, " reads buffer ",
             a.buffer, " as ", dtype_name(a.dtype), " but it holds ", dtype_name(b.dtype));
    LT_CHECK(a.scalar == (b.kind == BufferSpec::Kind::Scalar), ErrorKind::Runtime,
             "internal: kernel ", k.name, " disagrees with the plan on whether buffer ", a.buffer,
             " is a scalar");
    LT_CHECK(!a.output || b.kind == BufferSpec::Kind::Temp || b.kind == BufferSpec::Kind::Output,
             ErrorKind::Runtime, "internal: kernel ", k.name, " writes input buffer ", a.buffer);
  }
}

// Identical kernels share one function. Lowering grouped the kernels that are equal as it emits
// them (Plan::distinct); merging dims makes more of them equal (a contiguous [4, 6] and a [24]
// elementwise kernel), so groups whose merged representatives have one code are joined. Codes are
// numbered by first appearance, as Plan::distinct's are.
DistinctKernels join_merged(const DistinctKernels& exact, const std::vector<loop::Kernel>& merged) {
  DistinctKernels joined;
  std::map<std::string, size_t> by_code;
  std::vector<size_t> code_of_exact;
  for (size_t first : exact.first) {
    auto [it, fresh] = by_code.emplace(kernel_code(merged[first]), joined.first.size());
    if (fresh) joined.first.push_back(first);
    code_of_exact.push_back(it->second);
  }
  for (size_t c : exact.code_of) joined.code_of.push_back(code_of_exact[c]);
  return joined;
}

// Primitives kept per symbolic library step; past this many distinct instantiations the step's
// map starts afresh (oneDNN keeps its own cache of primitives behind them).
constexpr size_t kMaxBindingsPerStep = 64;

// The step's size fields (size_fields.h), the key of its primitive per binding.
template <class Step>
std::vector<int64_t> size_key(Step s) {
  std::vector<int64_t> key;
  for_each_size_field(s, [&](int64_t& v) { key.push_back(v); });
  return key;
}

// a * b, or an lt::Error naming `what` when it does not fit int64 (a binding too large).
int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  LT_CHECK(!__builtin_mul_overflow(a, b, &r), ErrorKind::Value,
           "cpu executable: the size symbols' values make ", what, " overflow int64");
  return r;
}

// The product of a symbolic kernel's extents at this binding (static ones from `ext`).
int64_t extent_product(const std::vector<int>& params, const std::vector<int64_t>& ext,
                       std::span<const int64_t> values, const std::string& kernel) {
  int64_t n = 1;
  for (size_t d = 0; d < ext.size(); ++d) {
    const int64_t e = params[d] >= 0 ? values[static_cast<size_t>(params[d])] : ext[d];
    LT_CHECK(e >= 0, ErrorKind::Value, "cpu executable: the size symbols' values give kernel ",
             kernel, " a loop of extent ", e);
    n = checked_mul(n, e, "a loop's size");
  }
  return n;
}

// A symbolic step's primitive for one binding's instantiation `at`, made on first use and kept in
// `cache` (at most kMaxBindingsPerStep, then all dropped). Callers hold steps_mutex_.
template <class Op, class Step>
std::shared_ptr<const Op> primitive_at(
    std::map<std::vector<int64_t>, std::shared_ptr<const Op>>& cache, const Step& at) {
  std::vector<int64_t> key = size_key(at);
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxBindingsPerStep) cache.clear();
    it = cache.emplace(std::move(key), std::make_shared<const Op>(at)).first;
  }
  return it->second;
}

// The plan's memory plan, computed by lowering (lowering/complete_plan.h).
const MemoryPlan& memory_of(const Plan& plan) {
  LT_CHECK(plan.is_completed(), ErrorKind::Runtime,
           "internal: cpu executable given a plan that complete_plan has not completed");
  return plan.memory;
}

}  // namespace

std::vector<loop::Kernel> CpuExecutable::prepare(const Plan& plan) {
  std::vector<loop::Kernel> merged_kernels;
  for (size_t i = 0; i < plan.kernels.size(); ++i) {
    const loop::Kernel& k = plan.kernels[i];
    validate_kernel(k);
    check_kernel_args(k, buffers_);
    loop::Kernel merged = merge_dims(k, &params_);
    CompiledKernel ck;
    ck.name = "lt_k";
    ck.name += std::to_string(i);
    for (const auto& a : k.args) ck.arg_buffers.push_back(a.buffer);
    ck.outer_numel = merged.outer_numel();
    ck.inner_numel = numel(merged.inner);
    ck.inner_contiguous = merged.inner.empty() ? 16 : 1;
    // scatter_add's accumulating kernel runs on one thread: points of its outer space may add
    // into one element, and a serial loop needs no atomics (LLVM has none for float16/bfloat16)
    // and sums in a fixed order, so results do not vary from run to run.
    ck.serial = k.accumulates();
    ck.symbolic = merged.symbolic();
    if (ck.symbolic) {
      ck.outer_ext.assign(merged.outer.begin(), merged.outer.end());
      ck.inner_ext.assign(merged.inner.begin(), merged.inner.end());
      ck.outer_params = merged.outer_params;
      ck.inner_params = merged.inner_params;
      ck.outer_params.resize(merged.outer.size(), -1);
      ck.inner_params.resize(merged.inner.size(), -1);
    }
    kernels_.push_back(std::move(ck));
    merged_kernels.push_back(std::move(merged));
  }
  return merged_kernels;
}

void CpuExecutable::prepare_gemms(const Plan& plan) {
  for (size_t i = 0; i < plan.gemms.size(); ++i) {
    const Gemm& g = plan.gemms[i];
    for (int buf : {g.a, g.b, g.out})
      LT_CHECK(buf >= 0 && buf < static_cast<int>(buffers_.size()) &&
                   buffers_[buf].dtype == g.dtype && buffers_[buf].kind != BufferSpec::Kind::Scalar,
               ErrorKind::Runtime, "internal: gemm ", g.name, " names bad buffer ", buf);
    LT_CHECK(buffers_[g.out].kind == BufferSpec::Kind::Temp ||
                 buffers_[g.out].kind == BufferSpec::Kind::Output,
             ErrorKind::Runtime, "internal: gemm ", g.name, " writes input buffer ", g.out);
    validate_gemm(g, buffers_[g.a].numel, buffers_[g.b].numel, buffers_[g.out].numel,
                  "cpu executable");
    BoundGemm bg{g.a,
                 g.b,
                 g.out,
                 g,
                 i < plan.sym.gemms.size() ? plan.sym.gemms[i] : StepSizeParams{},
                 nullptr,
                 nullptr,
                 {}};
    if (bg.sizes.empty())
      bg.op = std::make_shared<const OnednnGemm>(g);
    else
      bg.rt = std::make_shared<const OnednnSymbolicGemm>(g, bg.sizes);
    gemms_.push_back(std::move(bg));
  }
  for (size_t i = 0; i < plan.convs.size(); ++i) {
    const ConvStep& c = plan.convs[i];
    for (int buf : {c.a, c.b, c.bias, c.out})
      LT_CHECK(
          (buf == -1 && c.bias == -1 && c.a != -1 && c.b != -1 && c.out != -1) ||
              (buf >= 0 && buf < static_cast<int>(buffers_.size()) &&
               buffers_[buf].dtype == c.dtype && buffers_[buf].kind != BufferSpec::Kind::Scalar),
          ErrorKind::Runtime, "internal: conv ", c.name, " names bad buffer ", buf);
    LT_CHECK(buffers_[c.out].kind == BufferSpec::Kind::Temp ||
                 buffers_[c.out].kind == BufferSpec::Kind::Output,
             ErrorKind::Runtime, "internal: conv ", c.name, " writes input buffer ", c.out);
    validate_conv(c, buffers_[c.a].numel, buffers_[c.b].numel,
                  c.bias >= 0 ? buffers_[c.bias].numel : 0, buffers_[c.out].numel,
                  "cpu executable");
    BoundConv bc{c.a,     c.b, c.bias,
                 c.out,   c,   i < plan.sym.convs.size() ? plan.sym.convs[i] : StepSizeParams{},
                 nullptr, {}};
    if (bc.sizes.empty()) bc.op = std::make_shared<const OnednnConv>(c);
    convs_.push_back(std::move(bc));
  }
  steps_ = plan.ordered_steps();
  collectives_ = plan.collectives;
  // What each step touches, for waiting on collectives in flight (run).
  if (!collectives_.empty()) step_touches_ = step_touches(plan, steps_);
  if (!collectives_.empty()) comm_ = std::make_unique<CollectiveQueue>();
  for (const PlanStep& st : steps_)
    LT_CHECK(st.index >= 0 &&
                 st.index < static_cast<int>(st.kind == PlanStep::Kind::Gemm   ? plan.gemms.size()
                                             : st.kind == PlanStep::Kind::Conv ? plan.convs.size()
                                             : st.kind == PlanStep::Kind::Collective
                                                 ? plan.collectives.size()
                                                 : plan.kernels.size()),
             ErrorKind::Runtime, "internal: plan step names step ", st.index,
             " that does not exist");
}

void CpuExecutable::bind(std::unique_ptr<JitCode> code) {
  code_ = std::move(code);
  LT_CHECK(code_->functions().size() == kernels_.size(), ErrorKind::Runtime,
           "cpu executable: ", code_->functions().size(), " functions for ", kernels_.size(),
           " kernels");
  for (size_t i = 0; i < kernels_.size(); ++i) kernels_[i].fn = code_->functions()[i];
}

void CpuExecutable::keep_symbols(const Plan& plan) {
  validate_size_params(plan);
  if (!plan.sym.symbolic()) return;
  sym_ = plan.sym;
  params_ = plan.sym.params;
  layout_.buffers = plan.buffers;
  layout_.memory = plan.memory;
}

CpuExecutable::CpuExecutable(const Plan& plan)
    : buffers_(plan.buffers), donations_(plan.donations), memory_(memory_of(plan)) {
  keep_symbols(plan);
  prepare_gemms(plan);
  if (plan.kernels.empty()) return;
  std::vector<loop::Kernel> merged = prepare(plan);
  // Identical kernels (repeated layers) get one function and aliases. The distinct ones are
  // split into groups compiled on separate threads, each in its own LLVMContext (LLVM's O3 and
  // instruction selection are most of a cold compile), then linked into one JITDylib.
  const DistinctKernels codes = join_merged(plan.distinct, merged);
  const std::vector<size_t>&first_of = codes.first, &code_of = codes.code_of;
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  // Work in units of a typical kernel: a long fused body (a 1,000-node chain lowers to a few
  // kernels of ~250 instructions each) costs LLVM about as much as that many small kernels, so
  // a graph of a few large kernels is split across threads as well.
  std::vector<size_t> code_work(first_of.size());
  size_t work = 0;
  for (size_t c = 0; c < first_of.size(); ++c) {
    size_t instrs = 0;
    for (const auto& st : merged[first_of[c]].stages) instrs += st.body.size();
    work += code_work[c] = 1 + instrs / kInstrsPerKernelUnit;
  }
  const size_t groups = std::clamp<size_t>(work / kKernelsPerCompileThread, 1, hw);
  const std::vector<size_t> group_of = balance_groups(code_work, groups);
  std::vector<std::vector<size_t>> members(groups);  // kernels of each group, code order kept
  for (size_t i = 0; i < merged.size(); ++i) members[group_of[code_of[i]]].push_back(i);
  std::vector<std::string> objects(groups);
  std::vector<std::vector<std::string>> group_sources(groups);
  std::vector<JitTimings> group_timings(groups);
  run_in_parallel(groups, [&](size_t g) {
    llvm::LLVMContext ctx;
    llvm::Module module("lazytensor_plan_" + std::to_string(g), ctx);
    std::vector<std::string> names;
    for (size_t i : members[g]) {
      const std::string& name = kernels_[i].name;
      size_t first = first_of[code_of[i]];
      if (first == i)
        emit_kernel(module, merged[i], name);
      else if (llvm::Function* f = module.getFunction(kernels_[first].name))
        llvm::GlobalAlias::create(f->getLinkage(), name, f);
      names.push_back(name);
    }
    objects[g] = jit_compile_object(module, names, &group_sources[g], &group_timings[g]);
  });
  sources_.assign(merged.size(), std::string());
  for (size_t g = 0; g < groups; ++g) {
    for (size_t j = 0; j < members[g].size(); ++j)
      sources_[members[g][j]] = std::move(group_sources[g][j]);
    timings_.optimize_s = std::max(timings_.optimize_s, group_timings[g].optimize_s);
    timings_.codegen_s = std::max(timings_.codegen_s, group_timings[g].codegen_s);
  }
  std::vector<std::string> names;
  for (const auto& k : kernels_) names.push_back(k.name);
  objects_ = std::move(objects);
  const auto t0 = std::chrono::steady_clock::now();
  bind(jit_load_objects(objects_, names));
  timings_.link_s = seconds_since(t0);
}

// Layout of the CPU backend's part of a cache entry; bump kCachedFormat when it changes.
constexpr uint32_t kCachedFormat = 2;  // 2: several object files

CpuExecutable::CpuExecutable(const Plan& plan, std::string_view cached)
    : buffers_(plan.buffers), donations_(plan.donations), memory_(memory_of(plan)) {
  // Symbolic plans are not stored (serialize refuses them): their kernels' parameter list grows
  // with the merged dims, which this constructor would have to reproduce exactly.
  LT_CHECK(!plan.sym.symbolic(), ErrorKind::Runtime,
           "cached cpu code: a symbolic plan is never cached");
  ByteReader r(cached, "cached cpu code");
  uint32_t format = r.u32();
  if (format != kCachedFormat) r.bad("format " + std::to_string(format));
  size_t nk = r.count(8);
  if (nk != plan.kernels.size())
    r.bad(std::to_string(nk) + " kernels, the plan has " + std::to_string(plan.kernels.size()));
  objects_.resize(r.count(8));
  for (auto& obj : objects_) obj = std::string(r.bytes());
  sources_.resize(r.count(8));
  for (auto& src : sources_) src = std::string(r.bytes());
  if (!r.done()) r.bad("trailing bytes");
  prepare_gemms(plan);
  if (plan.kernels.empty()) return;
  prepare(plan);
  std::vector<std::string> names;
  for (const auto& k : kernels_) names.push_back(k.name);
  bind(jit_load_objects(objects_, names));
}

std::string CpuExecutable::serialize() const {
  LT_CHECK(!sym_.symbolic(), ErrorKind::Runtime,
           "internal: cpu executable of a symbolic plan asked to serialize");
  ByteWriter w;
  w.u32(kCachedFormat);
  w.u64(kernels_.size());
  w.u64(objects_.size());
  for (const auto& obj : objects_) w.bytes(obj);
  w.u64(sources_.size());
  for (const auto& src : sources_) w.bytes(src);
  return w.take();
}

std::vector<BufferPtr> CpuExecutable::run(const std::vector<RunInput>& inputs, RunStats* stats) {
  LT_CHECK(!sym_.symbolic(), ErrorKind::Value, "cpu executable: the plan has ", sym_.num_symbols,
           " size symbols; run it with their values (run_symbolic)");
  return run_with(inputs, stats, {});
}

std::vector<BufferPtr> CpuExecutable::run_symbolic(const std::vector<RunInput>& inputs,
                                                   RunStats* stats,
                                                   std::span<const int64_t> symbols) {
  LT_CHECK(symbols.size() == static_cast<size_t>(sym_.num_symbols), ErrorKind::Value,
           "cpu executable: the plan has ", sym_.num_symbols, " size symbols, got ", symbols.size(),
           " values");
  if (!sym_.symbolic()) return run_with(inputs, stats, {});
  // The plan's parameters, then the merged extents (merge_dims): PlanSymbols::values' order.
  std::vector<int64_t> values;
  values.reserve(params_.size());
  for (const SizeExpr& e : params_) values.push_back(e.eval(symbols));
  return run_with(inputs, stats, values);
}

void CpuExecutable::run_gemm(BoundGemm& g, std::span<const int64_t> values,
                             const std::vector<void*>& data) {
  if (g.sizes.empty()) {
    g.op->run(data[g.a], data[g.b], data[g.out]);
    return;
  }
  const Gemm at = with_sizes(g.step, g.sizes, values);
  validate_gemm(at, numel_at(buffers_[g.a], values), numel_at(buffers_[g.b], values),
                numel_at(buffers_[g.out], values), "cpu executable");
  if (g.rt->run(at, data[g.a], data[g.b], data[g.out])) return;
  gemm_at(g, at)->run(data[g.a], data[g.b], data[g.out]);
}

std::shared_ptr<const OnednnGemm> CpuExecutable::gemm_at(BoundGemm& g, const Gemm& at) {
  std::lock_guard<std::mutex> lock(steps_mutex_);
  return primitive_at(g.per_binding, at);
}

std::shared_ptr<const OnednnConv> CpuExecutable::conv_at(BoundConv& c,
                                                         std::span<const int64_t> values) {
  if (c.sizes.empty()) return c.op;
  const ConvStep at = with_sizes(c.step, c.sizes, values);
  validate_conv(at, numel_at(buffers_[c.a], values), numel_at(buffers_[c.b], values),
                c.bias >= 0 ? numel_at(buffers_[c.bias], values) : 0,
                numel_at(buffers_[c.out], values), "cpu executable");
  std::lock_guard<std::mutex> lock(steps_mutex_);
  return primitive_at(c.per_binding, at);
}

std::vector<BufferPtr> CpuExecutable::run_with(const std::vector<RunInput>& inputs, RunStats* stats,
                                               std::span<const int64_t> values) {
  const size_t nb = buffers_.size();
  std::vector<BufferPtr> owned(nb);
  // Per buffer its element count at this binding.
  std::vector<int64_t> numels(nb);
  for (size_t b = 0; b < nb; ++b) {
    numels[b] = values.empty() ? buffers_[b].numel : numel_at(buffers_[b], values);
    LT_CHECK(numels[b] >= 0 && numels[b] <= (INT64_MAX >> 4), ErrorKind::Value,
             "cpu executable: the size symbols' values give buffer ", b, " ", numels[b],
             " elements");
  }
  // Temporaries with disjoint lifetimes share one allocation (lowering/memory_plan.h), sized for
  // this binding.
  std::vector<size_t> slot_bytes_here;
  if (!values.empty()) slot_bytes_here = slot_bytes_at(layout_, values);
  const std::vector<size_t>& slot_bytes = values.empty() ? memory_.slot_bytes : slot_bytes_here;
  std::vector<BufferPtr> slot_bufs(slot_bytes.size());
  for (size_t s = 0; s < slot_bufs.size(); ++s)
    slot_bufs[s] = std::make_shared<HostBuffer>(slot_bytes[s]);
  std::vector<void*> data(nb, nullptr);
  std::vector<uint64_t> slots(nb, 0);  // 8-byte, 8-aligned homes of scalar inputs
  // A donated input must hold its output at this binding: the check sees this binding's sizes.
  std::vector<BufferSpec> sized;
  const bool donating = std::any_of(inputs.begin(), inputs.end(),
                                    [](const RunInput& in) { return in.donated_output >= 0; });
  if (!values.empty() && donating) {
    sized = buffers_;
    for (size_t b = 0; b < nb; ++b) sized[b].numel = numels[b];
  }
  const std::vector<int> donated =
      donated_outputs(sized.empty() ? buffers_ : sized, donations_, inputs, "cpu executable");
  for (size_t b = 0; b < nb; ++b) {
    const BufferSpec& spec = buffers_[b];
    const size_t bytes = static_cast<size_t>(numels[b]) * dtype_size(spec.dtype);
    if (spec.alias >= 0) continue;  // a range of another buffer: below
    switch (spec.kind) {
      case BufferSpec::Kind::Input:
      case BufferSpec::Kind::Scalar: {
        LT_CHECK(spec.input >= 0 && spec.input < static_cast<int>(inputs.size()), ErrorKind::Value,
                 "cpu executable: expected at least ", spec.input + 1, " inputs, got ",
                 inputs.size());
        const RunInput& in = inputs[spec.input];
        if (spec.kind == BufferSpec::Kind::Scalar) {
          if (is_floating(spec.dtype))
            store_from_double(&slots[b], spec.dtype, in.scalar);
          else
            store_from_int(&slots[b], spec.dtype, in.scalar_i);
          data[b] = &slots[b];
          break;
        }
        LT_CHECK(in.buffer != nullptr, ErrorKind::Value, "cpu executable: input ", spec.input,
                 " has no buffer");
        LT_CHECK(in.buffer->on_host(), ErrorKind::Value, "cpu executable: input ", spec.input,
                 " is not in host memory");
        LT_CHECK(in.buffer->bytes() >= bytes, ErrorKind::Value, "cpu executable: input ",
                 spec.input, " has ", in.buffer->bytes(), " bytes, expected ", bytes, " (",
                 numels[b], " x ", dtype_name(spec.dtype), ")");
        data[b] = in.buffer->data();
        break;
      }
      case BufferSpec::Kind::Temp:
        if (memory_.slot_of[b] >= 0) {
          data[b] = slot_bufs[static_cast<size_t>(memory_.slot_of[b])]->data();
          break;
        }
        [[fallthrough]];
      case BufferSpec::Kind::Output:
        // A donated output is written in place: nothing to allocate.
        if (spec.kind == BufferSpec::Kind::Output && donated[b] >= 0) {
          const Buffer* in = inputs[static_cast<size_t>(donated[b])].buffer;
          LT_CHECK(in->on_host(), ErrorKind::Value, "cpu executable: donated input ", donated[b],
                   " is not in host memory");
          data[b] = in->data();
          break;
        }
        owned[b] = std::make_shared<HostBuffer>(bytes);
        data[b] = owned[b]->data();
        break;
    }
  }
  for (size_t b = 0; b < nb; ++b)  // concat operands (BufferSpec::alias), inside their result
    if (const BufferSpec& spec = buffers_[b]; spec.alias >= 0)
      data[b] = static_cast<char*>(data[static_cast<size_t>(spec.alias)]) +
                static_cast<size_t>(spec.alias_offset) * dtype_size(spec.dtype);
  ThreadPool& pool = ThreadPool::global();
  std::vector<void*> args;
  const bool timed = stats && stats->on_kernel;
  // Collectives in flight on comm_'s worker: the memory each writes and its ticket. A step that
  // touches that memory waits for it first (temporaries sharing a slot share its address).
  std::vector<std::pair<const void*, int64_t>> in_flight;
  // A call group's all_reduces gathered so far (their steps, operands and results).
  std::vector<const CollectiveStep*> call_steps;
  std::vector<const void*> call_ins;
  std::vector<void*> call_outs;
  auto settle = [&](const std::vector<int>& buffers) {
    for (int b : buffers) {
      if (b < 0 || in_flight.empty()) continue;
      for (size_t i = 0; i < in_flight.size(); ++i)
        if (in_flight[i].first == data[b]) {
          comm_->wait(in_flight[i].second);
          in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
    }
  };
  // Every collective is done (and its error raised) before the run returns.
  struct Drain {
    CollectiveQueue* q;
    bool armed = true;
    ~Drain() {
      if (q && armed) try {
          q->wait_all();
        } catch (...) {  // an error is already propagating
        }
    }
  } drain{comm_.get()};
  // The first run checks that every rank runs these collectives (queued first: every rank's
  // worker issues the check at the same point of its sequence).
  if (comm_ && !collectives_checked_.exchange(true))
    comm_->submit([this] {
      try {
        check_same_collectives(collectives_);
      } catch (const Error& e) {
        collectives_differ_ = e.what();  // every later run raises it too
        throw;
      }
    });
  else if (comm_ && !collectives_differ_.empty())
    fail(ErrorKind::Runtime, collectives_differ_);
  for (const PlanStep& step : steps_) {
    const auto t0 =
        timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (!in_flight.empty()) settle(step_touches_[static_cast<size_t>(&step - steps_.data())]);
    if (step.kind == PlanStep::Kind::Gemm) {
      BoundGemm& g = gemms_[step.index];
      run_gemm(g, values, data);
      if (timed) stats->on_kernel("gemm", t0, std::chrono::steady_clock::now());
      continue;
    }
    if (step.kind == PlanStep::Kind::Collective) {
      const CollectiveStep& c = collectives_[step.index];
      // A call group's all_reduces (adjacent in the plan: lowering/collective.h) run as one
      // engine call over their operands packed together: DDP's bucket mode, one Gloo call a
      // bucket without a concatenating kernel. Gathered here up to the group's last step.
      const size_t at = static_cast<size_t>(&step - steps_.data());
      const PlanStep* next = at + 1 < steps_.size() ? &steps_[at + 1] : nullptr;
      const bool more = next && next->kind == PlanStep::Kind::Collective &&
                        same_engine_call(c, collectives_[next->index]);
      if (more || !call_steps.empty()) {
        call_steps.push_back(&c);
        call_ins.push_back(data[c.in]);
        call_outs.push_back(data[c.out]);
        if (more) continue;
        auto packed = prepare_host_call(call_steps, call_ins);
        const RunStats* st = timed ? stats : nullptr;
        const int64_t ticket = comm_->submit([steps = call_steps, outs = call_outs, packed, st] {
          const auto s0 = std::chrono::steady_clock::now();
          finish_host_call(steps, *packed, outs);
          if (st) st->on_kernel(steps.front()->name, s0, std::chrono::steady_clock::now());
        });
        for (void* out : call_outs) in_flight.emplace_back(out, ticket);
        call_steps.clear(), call_ins.clear(), call_outs.clear();
        continue;
      }
      // The operand is copied into the result here; the worker then works on the result alone
      // (the operand's memory may serve another temporary once this step is past).
      prepare_host_collective(c, data[c.in], data[c.out]);
      void* out = data[c.out];
      const RunStats* st = timed ? stats : nullptr;
      in_flight.emplace_back(out, comm_->submit([&c, out, st] {
        const auto s0 = std::chrono::steady_clock::now();
        finish_host_collective(c, out);
        if (st) st->on_kernel(c.name, s0, std::chrono::steady_clock::now());
      }));
      continue;
    }
    if (step.kind == PlanStep::Kind::Conv) {
      BoundConv& c = convs_[step.index];
      conv_at(c, values)->run(data[c.a], data[c.b], c.bias >= 0 ? data[c.bias] : nullptr,
                              data[c.out]);
      if (timed) stats->on_kernel("conv", t0, std::chrono::steady_clock::now());
      continue;
    }
    const CompiledKernel& k = kernels_[step.index];
    args.clear();
    for (int b : k.arg_buffers) args.push_back(data[b]);
    int64_t n = k.outer_numel, inner = k.inner_numel;
    if (k.symbolic) {
      // The parameter array (read-only to the kernel) and this binding's loop sizes.
      args.push_back(const_cast<int64_t*>(values.data()));
      n = extent_product(k.outer_params, k.outer_ext, values, k.name);
      inner = extent_product(k.inner_params, k.inner_ext, values, k.name);
    }
    const int64_t per_point = std::max<int64_t>(1, inner);
    if (n <= 0) continue;
    int64_t work = 0;
    if (__builtin_mul_overflow(n, per_point, &work)) work = INT64_MAX;
    if (n < 2 || work < kParallelWork || k.serial) {
      k.fn(args.data(), 0, n);
    } else {
      void** a = args.data();
      KernelFn fn = k.fn;
      pool.parallel_for(0, n, std::max<int64_t>(1, kChunkWork / per_point), k.inner_contiguous,
                        [a, fn](int64_t lo, int64_t hi) { fn(a, lo, hi); });
    }
    if (timed) stats->on_kernel(k.name, t0, std::chrono::steady_clock::now());
  }
  if (comm_) {
    drain.armed = false;
    comm_->wait_all();  // raises a collective's error here, on the caller's thread, before the
                        // temporaries it may write are released
  }
  if (stats) stats->kernel_launches += static_cast<int>(steps_.size());
  for (size_t b = 0; b < nb; ++b)
    if (buffers_[b].kind != BufferSpec::Kind::Output) owned[b].reset();
  return owned;
}

}  // namespace lt::cpu
