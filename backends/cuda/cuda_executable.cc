// CudaExecutable's run (cuda_executable.h): binding a run's buffers, resolving its steps' launches
// (kernels, library steps, flash attention), a symbolic binding's library steps, and launching
// plans with collectives. The class, its constructor, checks and small members stay in the header.
#include "backends/cuda/cuda_executable.h"

namespace lt {

std::vector<BufferPtr> CudaExecutable::run_with(const std::vector<RunInput>& inputs,
                                                RunStats* stats, std::span<const int64_t> symbols) {
  dev_->bind();
  const bool sym = !symbols.empty();
  // Symbolic: every size parameter's value at this binding, each buffer's element count, the
  // slots' sizes (lowering/memory_plan.h's slot_bytes_at).
  std::vector<int64_t> values;
  if (sym) values = sym_.values(symbols);
  std::vector<int64_t> numels(buffers_.size());
  for (size_t b = 0; b < buffers_.size(); ++b) {
    numels[b] = sym ? numel_at(buffers_[b], values) : buffers_[b].numel;
    LT_CHECK(numels[b] >= 0 && numels[b] <= (INT64_MAX >> 4), ErrorKind::Value,
             "cuda executable: the size symbols' values give buffer ", b, " ", numels[b],
             " elements");
  }
  std::vector<size_t> slot_bytes_here;
  if (sym) slot_bytes_here = slot_bytes_at(layout_, values);
  const std::vector<size_t>& slot_bytes = sym ? slot_bytes_here : memory_.slot_bytes;
  // Bind every plan buffer: inputs from the caller, temps and outputs from the allocator.
  std::vector<BufferPtr> owned(buffers_.size());
  std::vector<CUdeviceptr> ptrs(buffers_.size(), 0);
  // A donated input must hold its output at this binding: the check sees this binding's sizes.
  std::vector<BufferSpec> sized;
  if (sym) {
    sized = buffers_;
    for (size_t b = 0; b < sized.size(); ++b) sized[b].numel = numels[b];
  }
  const std::vector<int> donated =
      donated_outputs(sym ? sized : buffers_, donations_, inputs, "cuda executable");
  // A static plan's temporaries keep their memory from run to run (LT_CUDA_KEEP_TEMPS=0: not), so
  // the GEMMs of a replayed CUDA graph see the same addresses and need no recapture (held as
  // torch's CUDA graphs hold their private pool); otherwise they come from the allocator each
  // run.
  const bool keep = !sym && keep_temps();
  std::vector<std::shared_ptr<CudaBuffer>> slot_bufs(slot_bytes.size());
  if (keep && kept_slots_.size() == slot_bytes.size()) {
    slot_bufs = kept_slots_;
  } else {
    for (size_t s = 0; s < slot_bufs.size(); ++s)
      slot_bufs[s] = std::make_shared<CudaBuffer>(alloc_, std::max<size_t>(slot_bytes[s], 1));
    if (keep) kept_slots_ = slot_bufs;
  }
  // The addresses of the last run's outputs and temporaries, asked for again: see
  // CudaCachingAllocator::allocate.
  std::vector<CUdeviceptr> last;
  {
    std::lock_guard<std::mutex> lock(last_addr_mu_);
    last = last_addr_;
  }
  last.resize(buffers_.size(), 0);
  for (size_t b = 0; b < buffers_.size(); ++b) {
    const BufferSpec& spec = buffers_[b];
    const size_t bytes = static_cast<size_t>(numels[b]) * dtype_size(spec.dtype);
    if (spec.alias >= 0) continue;  // a range of another buffer: below
    switch (spec.kind) {
      case BufferSpec::Kind::Input: {
        if (spec.input < 0 || spec.input >= static_cast<int>(inputs.size()) ||
            !inputs[spec.input].buffer)
          fail(ErrorKind::Runtime, "cuda executable: graph input ", spec.input, " is missing (",
               inputs.size(), " given)");
        const CudaBuffer& cb = as_cuda(*inputs[spec.input].buffer, "cuda executable input");
        if (cb.bytes() < bytes)
          fail(ErrorKind::Runtime, "cuda executable: input ", spec.input, " holds ", cb.bytes(),
               " bytes, expected ", bytes, " (", numels[b], " x ", dtype_name(spec.dtype), ")");
        ptrs[b] = cb.ptr();
        break;
      }
      case BufferSpec::Kind::Scalar:
        if (spec.input < 0 || spec.input >= static_cast<int>(inputs.size()))
          fail(ErrorKind::Runtime, "cuda executable: scalar input ", spec.input, " is missing");
        break;
      case BufferSpec::Kind::Temp:
        if (memory_.slot_of[b] >= 0) {  // shared with temporaries of disjoint lifetimes
          ptrs[b] = slot_bufs[static_cast<size_t>(memory_.slot_of[b])]->ptr();
          break;
        }
        [[fallthrough]];
      case BufferSpec::Kind::Output: {
        // A donated output is written in place: nothing to allocate.
        if (spec.kind == BufferSpec::Kind::Output && donated[b] >= 0) {
          ptrs[b] = as_cuda(*inputs[static_cast<size_t>(donated[b])].buffer,
                            "cuda executable donated input")
                        .ptr();
          break;
        }
        auto buf = std::make_shared<CudaBuffer>(alloc_, bytes, last[b]);
        ptrs[b] = buf->ptr();
        owned[b] = std::move(buf);
        break;
      }
    }
  }
  for (size_t b = 0; b < buffers_.size(); ++b)  // concat operands, inside their result
    if (const BufferSpec& spec = buffers_[b]; spec.alias >= 0)
      ptrs[b] = ptrs[static_cast<size_t>(spec.alias)] +
                static_cast<CUdeviceptr>(spec.alias_offset) * dtype_size(spec.dtype);
  {
    std::lock_guard<std::mutex> lock(last_addr_mu_);
    last_addr_ = ptrs;
  }
  {
    std::lock_guard<std::mutex> lock(
        launch_mu_);  // the pointer arrays' host staging is per executable
    Bound& bound = sym ? bound_at(symbols, values, numels) : static_;
    std::vector<size_t> starts;
    std::vector<CudaLaunchStep> steps =
        resolve_steps(inputs, ptrs, bound, collectives_.empty() ? nullptr : &starts);
    // Profiling times each launch, so it launches plainly.
    const bool profiled = stats && stats->on_kernel;
    const bool graph = graphs_ && !profiled && steps.size() >= kCudaGraphMinSteps &&
                       ++bound.runs > kCudaGraphWarmupRuns;
    if (graph && !bound.graph) bound.graph = std::make_shared<CudaGraphReplay>(dev_, blas_);
    int recaptured = 0;
    if (!collectives_.empty()) {
      launch_with_collectives(steps, starts, ptrs, bound, graph, stats);
    } else if (graph && bound.graph->launch(steps, &recaptured)) {
      if (stats) {
        stats->kernel_launches += static_cast<int>(steps.size());
        ++stats->graph_launches;
      }
      if (!graphs_always_) judge_replay(bound, recaptured, steps.size());
    } else {
      launch_cuda_steps(*dev_, blas_.get(), steps, stats);
    }
  }
  // Asynchronous: the outputs are valid for later work on the stream, and host reads wait
  // (copy_to_host). Temporaries go back to the cache now; only later stream work reuses them.
  if (CudaDevice::synchronous_runs()) dev_->synchronize();
  std::vector<BufferPtr> out(buffers_.size());
  for (size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].kind == BufferSpec::Kind::Output) out[b] = std::move(owned[b]);
  return out;  // temps return to the cache here
}

std::vector<CudaLaunchStep> CudaExecutable::resolve_steps(const std::vector<RunInput>& inputs,
                                                          const std::vector<CUdeviceptr>& ptrs,
                                                          Bound& bound,
                                                          std::vector<size_t>* starts) {
  std::vector<CudaLaunchStep> out;
  out.reserve(steps_.size());
  for (size_t si = 0; si < steps_.size(); ++si) {
    const PlanStep& step = steps_[si];
    if (starts) starts->push_back(out.size());
    if (step.kind == PlanStep::Kind::Collective) continue;
    if (step.kind == PlanStep::Kind::Attention) {
      add_attention_launches(bound.attentions[static_cast<size_t>(step.index)], ptrs, out);
      continue;
    }
    if (step.kind == PlanStep::Kind::Conv) {
      out.push_back(conv_launch(*bound.convs[static_cast<size_t>(step.index)], ptrs));
      continue;
    }
    if (step.kind == PlanStep::Kind::Gemm) {
      const Gemm& g = bound.gemms[static_cast<size_t>(step.index)];
      CudaLaunchStep s;
      s.name = g.name;
      s.gemm = &g;
      s.tf32 = matmul_allow_tf32();  // a captured CUDA graph is rebuilt when the setting changes
      s.a = ptrs[g.a], s.b = ptrs[g.b], s.out = ptrs[g.out];
      if (si < gemm_sm_targets_.size()) s.sm_target = gemm_sm_targets_[si];
      if (const size_t bytes = CublasHandle::pointer_array_bytes(g)) {
        GemmArrays& ga = bound.gemm_arrays[static_cast<size_t>(step.index)];
        if (!ga.device)
          ga.device = std::make_shared<CudaBuffer>(alloc_, bytes);  // kept with the executable
        s.arrays = {ga.device->ptr(), &ga.host};
      }
      out.push_back(std::move(s));
      continue;
    }
    const size_t k = static_cast<size_t>(step.index);
    const CudaKernelLaunch& l = module_image_.launches[k];
    const loop::Kernel& kern = kernels_[k];
    // A symbolic kernel's grid follows this binding's outer extent (cuda_codegen.h).
    int64_t blocks = l.max_blocks;
    if (!l.size_params.empty()) {
      int64_t outer = 1;
      for (size_t d = 0; d < kern.outer.size(); ++d) {
        const int p = d < kern.outer_params.size() ? kern.outer_params[d] : -1;
        const int64_t e = p >= 0 ? bound.values[static_cast<size_t>(p)] : kern.outer[d];
        LT_CHECK(e >= 0, ErrorKind::Value, "cuda executable: the size symbols' values give kernel ",
                 kern.name, " a loop of extent ", e);
        LT_CHECK(!__builtin_mul_overflow(outer, e, &outer), ErrorKind::Value,
                 "cuda executable: the size symbols' values make kernel ", kern.name,
                 "'s loop overflow int64");
      }
      for (size_t d = 0; d < kern.inner_params.size(); ++d)
        LT_CHECK(kern.inner_params[d] < 0 || bound.values[kern.inner_params[d]] >= 0,
                 ErrorKind::Value, "cuda executable: the size symbols' values give kernel ",
                 kern.name, " a negative row length");
      blocks = cuda_launch_blocks(l, outer);
    }
    if (blocks <= 0) continue;
    CudaLaunchStep s;
    s.name = kern.name;
    s.fn = functions_[k];
    const int64_t cap = static_cast<int64_t>(dev_->sm_count()) * std::max(1, 2048 / l.threads) * 4;
    s.grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, std::min<int64_t>(cap, 1 << 30)));
    s.threads = static_cast<unsigned>(l.threads);
    // One 8-byte slot per parameter: device pointers, and scalars by value (double / long long).
    s.slots.assign(kern.args.size(), 0);
    for (size_t a = 0; a < kern.args.size(); ++a) {
      const loop::Arg& arg = kern.args[a];
      const BufferSpec& spec = buffers_[static_cast<size_t>(arg.buffer)];
      if (arg.scalar) {
        const RunInput& in = inputs.at(static_cast<size_t>(spec.input));
        if (is_floating(arg.dtype)) {
          double v = in.scalar;
          std::memcpy(&s.slots[a], &v, sizeof v);
        } else {
          long long v = in.scalar_i;
          std::memcpy(&s.slots[a], &v, sizeof v);
        }
      } else {
        CUdeviceptr p = ptrs[static_cast<size_t>(arg.buffer)];
        std::memcpy(&s.slots[a], &p, sizeof p);
      }
    }
    // Symbolic: the size parameters the kernel takes, by value after its arguments.
    for (int p : l.size_params) {
      const long long v = bound.values.at(static_cast<size_t>(p));
      uint64_t slot = 0;
      std::memcpy(&slot, &v, sizeof v);
      s.slots.push_back(slot);
    }
    out.push_back(std::move(s));
  }
  if (starts) starts->push_back(out.size());
  return out;
}

void CudaExecutable::launch_with_collectives(const std::vector<CudaLaunchStep>& launches,
                                             const std::vector<size_t>& starts,
                                             const std::vector<CUdeviceptr>& ptrs, Bound& bound,
                                             bool graph, RunStats* stats) {
  const CollectiveStep& first = collectives_.front();
  std::shared_ptr<dist::Communicator> comm = communicator_for(first.op, first.world);
  auto* nccl = dynamic_cast<NcclCommunicator*>(comm.get());
  if (nccl && nccl->device_ordinal() != dev_->ordinal())
    fail(ErrorKind::Runtime, op_name(first.op), " on cuda:", dev_->ordinal(),
         ": this rank's NCCL communicator is on cuda:", nccl->device_ordinal(),
         " (LOCAL_RANK chooses it: run each rank's tensors there)");
  if (!collectives_checked_.exchange(true)) {
    try {
      check_same_collectives(collectives_);
    } catch (const Error& e) {
      collectives_differ_ = e.what();  // every later run raises it too
      throw;
    }
  } else if (!collectives_differ_.empty()) {
    fail(ErrorKind::Runtime, collectives_differ_);
  }
  if (!nccl) {
    for (size_t s = 0; s < steps_.size(); ++s) {
      if (steps_[s].kind != PlanStep::Kind::Collective) {
        launch_cuda_steps(
            *dev_, blas_.get(),
            std::span<const CudaLaunchStep>(launches).subspan(starts[s], starts[s + 1] - starts[s]),
            stats);
        continue;
      }
      const CollectiveStep& c = collectives_[static_cast<size_t>(steps_[s].index)];
      if (stats) ++stats->kernel_launches;
      if (c.count)
        host_collective(c, ptrs[static_cast<size_t>(c.in)], ptrs[static_cast<size_t>(c.out)]);
    }
    return;
  }
  const std::vector<CudaLaunchStep> seq = with_collectives(launches, starts, ptrs, nccl);
  int recaptured = 0;
  if (graph && !graph_segments_ && bound.graph->launch(seq, &recaptured)) {
    nccl->watch(dev_->stream(), "a CUDA graph replay with collectives");
    if (stats) {
      stats->kernel_launches += static_cast<int>(seq.size());
      ++stats->graph_launches;
    }
    if (!graphs_always_) judge_replay(bound, recaptured, seq.size());
    return;
  }
  // Not one graph (yet, or at all): the kernels between the collectives, as graphs of their own
  // under LT_CUDA_GRAPH_SEGMENTS, else launched one by one.
  launch_segments(seq, bound, nccl, graph && graph_segments_, stats);
}

void CudaExecutable::launch_segments(const std::vector<CudaLaunchStep>& seq, Bound& bound,
                                     NcclCommunicator* nccl, bool capture, RunStats* stats) {
  const CudaDriver& d = dev_->driver();
  const CUstream stream = dev_->stream();
  std::vector<std::shared_ptr<CUevent_st>> done(seq.size());
  std::vector<CudaLaunchStep> part;
  size_t segment = 0;
  int recaptured = 0;
  for (size_t i = 0; i < seq.size();) {
    if (seq[i].collective) {
      done[i] = nccl->enqueue(seq[i].calls, stream);
      if (stats) ++stats->kernel_launches;
      ++i;
      continue;
    }
    // The segment's joins, on the stream before its graph: it is linear inside.
    for (uint32_t j : seq[i].after)
      if (done[j]) d.check(d.cuStreamWaitEvent(stream, done[j].get(), 0), "cuStreamWaitEvent");
    size_t end = i + 1;
    while (end < seq.size() && !seq[end].collective && seq[end].after.empty()) ++end;
    if (!capture) {
      launch_cuda_steps(*dev_, blas_.get(),
                        std::span<const CudaLaunchStep>(seq).subspan(i, end - i), stats);
      i = end;
      continue;
    }
    part.assign(seq.begin() + static_cast<std::ptrdiff_t>(i),
                seq.begin() + static_cast<std::ptrdiff_t>(end));
    part.front().after.clear();
    if (bound.segments.size() <= segment)
      bound.segments.push_back(std::make_shared<CudaGraphReplay>(dev_, blas_));
    int captured = 0;
    if (part.size() >= kCudaGraphMinSteps && bound.segments[segment]->launch(part, &captured)) {
      recaptured += captured;
      if (stats) {
        stats->kernel_launches += static_cast<int>(part.size());
        ++stats->graph_launches;
      }
    } else {
      launch_cuda_steps(*dev_, blas_.get(), part, stats);
    }
    ++segment;
    i = end;
  }
  for (const auto& e : done)
    if (e) d.check(d.cuStreamWaitEvent(stream, e.get(), 0), "cuStreamWaitEvent");
  if (capture && !graphs_always_) judge_replay(bound, recaptured, seq.size());
}

std::vector<CudaLaunchStep> CudaExecutable::with_collectives(
    const std::vector<CudaLaunchStep>& launches, const std::vector<size_t>& starts,
    const std::vector<CUdeviceptr>& ptrs, NcclCommunicator* nccl) const {
  std::vector<CudaLaunchStep> seq;
  seq.reserve(launches.size() + collectives_.size());
  std::vector<uint32_t> in_flight, waits;
  for (size_t s = 0; s < steps_.size(); ++s) {
    if (steps_[s].kind == PlanStep::Kind::Collective) {
      // Collectives keep their order among themselves (one stream, or the graph's collective
      // chain): they claim no waits.
      const CollectiveStep& c = collectives_[static_cast<size_t>(steps_[s].index)];
      if (c.count == 0) continue;  // every rank has the same graph: all skip it
      const CollectiveCall call{&c, ptrs[static_cast<size_t>(c.in)],
                                ptrs[static_cast<size_t>(c.out)]};
      // The next all_reduce of a call group (hoisting keeps a group adjacent) joins its group
      // call: one NCCL group call, one graph branch.
      if (c.group > 0 && !seq.empty() && seq.back().collective &&
          seq.back().collective->group == c.group) {
        seq.back().calls.push_back(call);
        continue;
      }
      CudaLaunchStep x;
      x.name = c.name;
      x.collective = &c;
      x.calls = {call};
      x.comm = nccl;
      x.a = call.in;
      x.out = call.out;
      in_flight.push_back(static_cast<uint32_t>(seq.size()));
      seq.push_back(std::move(x));
      continue;
    }
    for (int b : step_touches_[s]) {
      if (in_flight.empty()) break;
      const CUdeviceptr p = b >= 0 ? ptrs[static_cast<size_t>(b)] : 0;
      for (size_t i = 0; p && i < in_flight.size();)
        if (std::any_of(seq[in_flight[i]].calls.begin(), seq[in_flight[i]].calls.end(),
                        [&](const CollectiveCall& k) { return k.in == p || k.out == p; })) {
          waits.push_back(in_flight[i]);
          in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
    }
    for (size_t k = starts[s]; k < starts[s + 1]; ++k) {
      seq.push_back(launches[k]);
      seq.back().after = std::move(waits);
      waits.clear();
    }
  }
  return seq;
}

void CudaExecutable::host_collective(const CollectiveStep& c, CUdeviceptr in, CUdeviceptr out) {
  const size_t in_bytes = static_cast<size_t>(c.count) * dtype_size(c.dtype);
  const size_t out_bytes = in_bytes * (c.op == Op::AllGather ? static_cast<size_t>(c.world) : 1);
  std::vector<char> host_in(in_bytes), host_out(out_bytes);
  const CudaDriver& d = dev_->driver();
  dev_->synchronize();  // the steps that write the operand
  d.check(d.cuMemcpyDtoH_v2(host_in.data(), in, in_bytes), "cuMemcpyDtoH");
  prepare_host_collective(c, host_in.data(), host_out.data());
  finish_host_collective(c, host_out.data());
  d.check(d.cuMemcpyHtoD_v2(out, host_out.data(), out_bytes), "cuMemcpyHtoD");
}

void CudaExecutable::add_attention_launches(const AttentionStep& a,
                                            const std::vector<CUdeviceptr>& ptrs,
                                            std::vector<CudaLaunchStep>& out) const {
  auto ptr = [&](int b) { return b < 0 ? CUdeviceptr(0) : ptrs[static_cast<size_t>(b)]; };
  const float scale_log2 = static_cast<float>(a.scale * 1.4426950408889634);
  const float scale = static_cast<float>(a.scale);
  const int base = flash_kernel_base(a.dtype);
  auto launch = [&](int which, int64_t rows, std::vector<CUdeviceptr> p) {
    const FlashKernel& k = kFlashKernels[base + which];
    CudaLaunchStep s;
    s.name = a.name;
    s.fn = functions_[kernels_.size() + static_cast<size_t>(base + which)];
    s.grid = static_cast<unsigned>(flash_blocks(a.batch, rows));
    s.threads = k.threads;
    s.smem = k.smem;
    for (CUdeviceptr v : p) s.slots.push_back(v);
    for (int64_t v : {a.batch, a.L, a.S, static_cast<int64_t>(a.causal)}) {
      uint64_t slot = 0;
      const int32_t i = static_cast<int32_t>(v);
      std::memcpy(&slot, &i, sizeof i);
      s.slots.push_back(slot);
    }
    for (float f : {scale_log2, scale}) {
      uint64_t slot = 0;
      std::memcpy(&slot, &f, sizeof f);
      s.slots.push_back(slot);
    }
    if (which == 0) s.slots.pop_back();  // the forward takes no plain scale
    out.push_back(std::move(s));
  };
  if (a.kind == AttentionStep::Kind::Forward) {
    launch(0, a.L, {ptr(a.q), ptr(a.k), ptr(a.v), ptr(a.out), ptr(a.lse)});
    return;
  }
  const std::vector<CUdeviceptr> common = {ptr(a.q),    ptr(a.k),   ptr(a.v),
                                           ptr(a.dout), ptr(a.lse), ptr(a.dsum)};
  auto with = [&](std::initializer_list<CUdeviceptr> more) {
    std::vector<CUdeviceptr> p = common;
    p.insert(p.end(), more);
    return p;
  };
  if (a.dtype != DType::Float32) {
    if (a.dk >= 0 || a.dv >= 0) launch(1, a.S, with({ptr(a.dk), ptr(a.dv)}));
    if (a.dq >= 0) launch(2, a.L, with({ptr(a.dq)}));
    return;
  }
  if (a.dq >= 0) {
    // dQ = 0 first: the dK/dV/dQ kernel adds each key tile's share into it.
    const uint64_t n4 = static_cast<uint64_t>(a.batch * a.L * kFlashTile / 4);
    CudaLaunchStep z;
    z.name = a.name;
    z.fn = functions_[kernels_.size() + 2];
    z.grid = static_cast<unsigned>(std::clamp<uint64_t>((n4 + 255) / 256, 1, 65535));
    z.threads = kFlashKernels[2].threads;
    z.smem = kFlashKernels[2].smem;
    z.slots = {ptr(a.dq), n4};
    out.push_back(std::move(z));
  }
  if (a.dk >= 0 || a.dv >= 0 || a.dq >= 0) launch(1, a.S, with({ptr(a.dk), ptr(a.dv), ptr(a.dq)}));
}

CudaExecutable::Bound& CudaExecutable::bound_at(std::span<const int64_t> symbols,
                                                const std::vector<int64_t>& values,
                                                const std::vector<int64_t>& numels) {
  std::vector<int64_t> key(symbols.begin(), symbols.end());
  auto it = bound_.find(key);
  if (it != bound_.end()) return *it->second;
  if (bound_.size() >= kMaxBindings) {
    // Their graphs and library steps may still be in use by launched work.
    dev_->synchronize();
    bound_.clear();
  }
  auto b = std::make_unique<Bound>();
  b->values = values;
  auto n = [&](int buf) { return numels[static_cast<size_t>(buf)]; };
  for (size_t i = 0; i < gemms_.size(); ++i) {
    Gemm g = with_sizes(gemms_[i], sym_.gemms[i], values);
    validate_gemm(g, n(g.a), n(g.b), n(g.out), "cuda executable");
    b->gemms.push_back(std::move(g));
  }
  b->gemm_arrays.resize(gemms_.size());
  for (size_t i = 0; i < conv_steps_.size(); ++i) {
    ConvStep c = with_sizes(conv_steps_[i], sym_.convs[i], values);
    validate_conv(c, n(c.a), n(c.b), c.bias >= 0 ? n(c.bias) : 0, n(c.out), "cuda executable");
    b->convs.push_back(std::make_unique<CudnnConv>(dnn_, c));
  }
  std::vector<int64_t> sized(numels);
  for (size_t i = 0; i < buffers_.size(); ++i)
    if (buffers_[i].kind == BufferSpec::Kind::Scalar) sized[i] = -1;
  std::vector<DType> dtypes;
  for (const BufferSpec& spec : buffers_) dtypes.push_back(spec.dtype);
  for (size_t i = 0; i < attentions_.size(); ++i) {
    AttentionStep a = with_sizes(attentions_[i], sym_.attentions[i], values);
    validate_attention(a, sized, dtypes, "cuda executable");
    check_attention(a);
    b->attentions.push_back(std::move(a));
  }
  return *bound_.emplace(std::move(key), std::move(b)).first->second;
}

}  // namespace lt
