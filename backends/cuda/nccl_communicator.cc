#include "backends/cuda/nccl_communicator.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/nccl_api.h"
#include "distributed/tcp_store.h"
#include "ir/dtype.h"
#include "ir/env_switch.h"
#include "ir/error.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;

int nccl_dtype(DType t, std::string_view what) {
  switch (t) {
    case DType::Float32:
      return nccl::kFloat32;
    case DType::Float64:
      return nccl::kFloat64;
    case DType::Float16:
      return nccl::kFloat16;
    case DType::BFloat16:
      return nccl::kBfloat16;
    case DType::Int32:
      return nccl::kInt32;
    case DType::Int64:
      return nccl::kInt64;
    case DType::Int8:  // the host calls' bytes
      return nccl::kInt8;
    default:
      fail(ErrorKind::NotImplemented, "not implemented: ", what, " of ", dtype_name(t),
           " on nccl (float32, float64, float16, bfloat16, int32 or int64)");
  }
}

int nccl_op(int reduce) {
  switch (static_cast<dist::ReduceOp>(reduce)) {
    case dist::ReduceOp::Sum:
      return nccl::kSum;
    case dist::ReduceOp::Avg:
      return nccl::kAvg;
    case dist::ReduceOp::Max:
      return nccl::kMax;
  }
  fail(ErrorKind::Runtime, "internal: all_reduce with reduce op ", reduce);
}

// The GPU this rank uses: LOCAL_RANK (torchrun's one process per GPU), else rank modulo the GPUs.
int rank_device(const dist::ProcessGroupConfig& cfg) {
  const CudaDriver& d = cuda_driver();
  if (!d.ok || d.device_count == 0)
    fail(ErrorKind::Runtime,
         "nccl needs a CUDA device: ", d.error.empty() ? "the driver reports none" : d.error);
  if (cfg.local_rank >= 0) {
    LT_CHECK(cfg.local_rank < d.device_count, ErrorKind::Runtime,
             "nccl: LOCAL_RANK=", cfg.local_rank, " but ", d.device_count,
             " CUDA device(s) are visible");
    return cfg.local_rank;
  }
  return cfg.rank % d.device_count;
}

// LT_NCCL_STREAM_PRIORITY: "high" runs the collectives at the device's greatest stream priority,
// so their blocks take SMs ahead of the backward's kernels queued on the normal stream (PyTorch's
// ProcessGroupNCCL option is_high_priority_stream); "normal" or unset: the default priority.
bool high_priority_stream() { return env_switch("LT_NCCL_STREAM_PRIORITY", "normal", "high"); }

class Nccl final : public NcclCommunicator {
 public:
  Nccl(const dist::EngineRendezvous& g) : rank_(g.cfg.rank), size_(g.cfg.world_size) {
    timeout_ = g.cfg.timeout;
    const nccl::Library& lib = nccl::library();
    LT_CHECK(lib.ok(), ErrorKind::NotImplemented, "not implemented: nccl: ", lib.error);
    api_ = &lib.api;
    // The primary context; its stream is ours.
    dev_ = CudaDevice::open(rank_device(g.cfg), high_priority_stream());
    clear_collective_error(dev_->ordinal());
    // Rank 0 makes the unique id; every rank reads it from the group's store.
    nccl::UniqueId id{};
    const std::string key = g.prefix + "/nccl/unique_id";
    if (rank_ == 0) {
      check(api_->get_unique_id(&id), "ncclGetUniqueId");
      g.store.set(key, std::vector<char>(id.internal, id.internal + nccl::kUniqueIdBytes));
    } else {
      std::vector<char> v = g.store.get(key);
      LT_CHECK(v.size() == nccl::kUniqueIdBytes, ErrorKind::Runtime, "nccl: the unique id in the ",
               "store has ", v.size(), " bytes, expected ", nccl::kUniqueIdBytes);
      std::memcpy(id.internal, v.data(), v.size());
    }
    dev_->bind();  // NCCL's runtime calls use the current context: the device's primary one
    nccl::Config cfg;
    cfg.blocking = 0;  // every call returns at once; we poll, so a missing peer cannot hang us
    nccl::Result r = api_->comm_init_rank_config(&comm_, size_, id, rank_, &cfg);
    if (r == nccl::kSuccess || r == nccl::kInProgress) r = settle();
    if (r != nccl::kSuccess) {
      // kInProgress: still joining when the timeout passed (a rank that never came).
      const std::string why = r == nccl::kInProgress
                                  ? "not every rank joined within the timeout (" +
                                        dist::seconds_text(timeout_) + ", LT_DIST_TIMEOUT)"
                                  : describe(r);
      if (comm_) api_->comm_abort(comm_);
      comm_ = nullptr;
      fail(ErrorKind::Runtime, "nccl: joining the group failed on rank ", rank_, " of ", size_,
           " (cuda:", dev_->ordinal(), "): ", why);
    }
    watchdog_ = std::thread([this] { watchdog_loop(); });
  }

  ~Nccl() override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      // The collectives in flight end first (each within the timeout, or the watchdog aborts).
      idle_.wait(lock, [&] { return pending_.empty() || !broken_.empty(); });
      stop_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    try {
      drop_graphs();  // NCCL's finalize, destroy and abort wait for them (hold_graph)
      dev_->bind();
      if (staging_) dev_->driver().cuMemFree_v2(staging_);
      for (CUdeviceptr p : packing_) dev_->driver().cuMemFree_v2(p);
      // A broken communicator was aborted (freed) when it broke (abort_with); leaving the group
      // is the user's answer to its error, so the device's host waits stop raising it.
      if (!broken_.empty()) clear_collective_error(dev_->ordinal());
      if (!comm_ || !broken_.empty()) return;
      // A healthy communicator is finalized (its last operations flushed) within the timeout; one
      // whose finalize does not end is aborted: ncclCommDestroy could block.
      const nccl::Result r = api_->comm_finalize(comm_);
      const bool clean =
          (r == nccl::kSuccess || r == nccl::kInProgress) && settle() == nccl::kSuccess;
      if (clean)
        api_->comm_destroy(comm_);
      else
        api_->comm_abort(comm_);
    } catch (...) {
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int device_ordinal() const override { return dev_->ordinal(); }
  int stream_priority() const override { return dev_->stream_priority(); }

  std::shared_ptr<CUevent_st> enqueue(std::span<const CollectiveCall> calls,
                                      CUstream after) override {
    std::lock_guard<std::mutex> lock(call_mu_);
    return enqueue_locked(calls, after);
  }

  void all_reduce(void* data, int64_t count, DType dtype, dist::ReduceOp op) override {
    CollectiveStep c;
    c.name = "all_reduce", c.op = Op::AllReduce, c.dtype = dtype;
    c.reduce = static_cast<int>(op), c.count = count, c.world = size_;
    const size_t bytes = static_cast<size_t>(count) * dtype_size(dtype);
    host_staged(c, data, bytes, data, bytes);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    CollectiveStep c;
    c.name = "broadcast", c.op = Op::Broadcast, c.dtype = DType::Int8, c.root = root;
    c.count = static_cast<int64_t>(bytes), c.world = size_;
    host_staged(c, data, bytes, data, bytes);
  }

  void all_gather(const void* in, void* out, size_t bytes_per_rank) override {
    CollectiveStep c;
    c.name = "all_gather", c.op = Op::AllGather, c.dtype = DType::Int8;
    c.count = static_cast<int64_t>(bytes_per_rank), c.world = size_;
    host_staged(c, in, bytes_per_rank, out, bytes_per_rank * static_cast<size_t>(size_));
  }

  void barrier() override {
    int32_t one = 1;
    all_reduce(&one, 1, DType::Int32, dist::ReduceOp::Sum);
  }

 private:
  struct InFlight {
    std::shared_ptr<CUevent_st> done;
    Clock::time_point deadline;
    std::string what;
  };

  void check(nccl::Result r, const char* call) {
    if (r != nccl::kSuccess && r != nccl::kInProgress)
      fail(ErrorKind::Runtime, "nccl: ", call, " failed on rank ", rank_, " of ", size_, ": ",
           describe(r));
  }

  std::string describe(nccl::Result r) {
    std::string s = api_->get_error_string ? api_->get_error_string(r) : "error";
    s += " (ncclResult " + std::to_string(r) + ")";
    std::lock_guard<std::mutex> lock(abort_mu_);  // an aborted communicator is freed
    if (comm_ && !aborted_ && api_->get_last_error)
      if (const char* last = api_->get_last_error(comm_); last && *last)
        s += ": " + std::string(last);
    return s;
  }

  // Polls a nonblocking call until NCCL says it has ended, at most the timeout; returns its result
  // (kInProgress when the timeout passed).
  nccl::Result settle() {
    const auto deadline = Clock::now() + timeout_;
    nccl::Result state = nccl::kInProgress;
    while (true) {
      const nccl::Result r = async_error(&state);
      if (r != nccl::kSuccess) return r;
      if (state != nccl::kInProgress || Clock::now() > deadline) return state;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }

  std::shared_ptr<CUevent_st> new_event() {
    const CudaDriver& d = dev_->driver();
    CUevent e = nullptr;
    d.check(d.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    const CudaDriver* drv = &d;
    return std::shared_ptr<CUevent_st>(e, [drv](CUevent ev) { drv->cuEventDestroy_v2(ev); });
  }

  void enqueue_captured(std::span<const CollectiveCall> calls, CUstream stream) override {
    std::lock_guard<std::mutex> lock(call_mu_);
    raise_if_broken(calls.front().step->name);
    dev_->bind();
    issue(calls, stream, /*abort_on_error=*/false);  // the graph falls back to plain launches
  }

  void watch(CUstream stream, const std::string& what) override {
    std::lock_guard<std::mutex> lock(call_mu_);
    dev_->bind();
    track(stream, what);
  }

  // The NCCL calls on `stream` (under call_mu_): one alone; a call group of all_reduces of one
  // dtype and reduction as one all_reduce over their operands packed into a buffer (coalesced);
  // any other group as one NCCL group call.
  void issue(std::span<const CollectiveCall> calls, CUstream stream, bool abort_on_error = true) {
    const CollectiveStep& first = *calls.front().step;
    if (calls.size() == 1) {
      finish(call(first, calls[0].in, calls[0].out, stream), first, abort_on_error);
      return;
    }
    if (coalescable(calls)) {
      coalesced(calls, stream, abort_on_error);
      return;
    }
    nccl::Result r = api_->group_start();
    if (r != nccl::kSuccess) fail(ErrorKind::Runtime, "nccl: ncclGroupStart: ", describe(r));
    try {
      for (const CollectiveCall& k : calls) {
        r = call(*k.step, k.in, k.out, stream);
        if (r != nccl::kSuccess && r != nccl::kInProgress) break;
      }
    } catch (...) {
      api_->group_end();  // leaves the group whatever went wrong
      throw;
    }
    const nccl::Result end = api_->group_end();
    finish(r == nccl::kSuccess || r == nccl::kInProgress ? end : r, first, abort_on_error);
  }

  static bool coalescable(std::span<const CollectiveCall> calls) {
    const CollectiveStep& f = *calls.front().step;
    return std::all_of(calls.begin(), calls.end(),
                       [&](const CollectiveCall& k) { return same_engine_call(f, *k.step); });
  }

  // A bucket's all_reduces as one: NCCL moves a few large buffers at full bandwidth, while a
  // group call of many small all_reduces pays per call (2 H200s, GPT-2's DDP: 25.5 ms a step as
  // a group call, 24.8 with the bucket concatenated by a kernel). The operands are copied into
  // a packed buffer, reduced in place, and copied out, all on `stream` (the communicator's, or
  // the one a CUDA graph captures: memcpy nodes), so the copies overlap the backward too.
  void coalesced(std::span<const CollectiveCall> calls, CUstream stream, bool abort_on_error) {
    const CollectiveStep& first = *calls.front().step;
    const size_t elem = dtype_size(first.dtype);
    // Each operand starts 256-byte aligned (full-speed copies); the gaps are reduced too, unread.
    auto padded = [&](const CollectiveStep& c) {
      return (static_cast<size_t>(c.count) * elem + 255) / 256 * 256;
    };
    size_t bytes = 0;
    for (const CollectiveCall& k : calls) bytes += padded(*k.step);
    if (bytes == 0) return;  // every rank has the same graph: all skip it
    const CUdeviceptr buf = packing_buffer(bytes);
    const CudaDriver& d = dev_->driver();
    // Each operand into its place in the buffer (pack), or its place back into its result.
    auto copy_each = [&](bool pack) {
      size_t off = 0;
      for (const CollectiveCall& k : calls) {
        const size_t n = static_cast<size_t>(k.step->count) * elem;
        if (n)
          d.check(
              d.cuMemcpyDtoDAsync_v2(pack ? buf + off : k.out, pack ? k.in : buf + off, n, stream),
              "cuMemcpyDtoDAsync");
        off += padded(*k.step);
      }
    };
    copy_each(true);
    CollectiveStep packed = first;
    packed.count = static_cast<int64_t>(bytes / elem);
    finish(call(packed, buf, buf, stream), first, abort_on_error);
    copy_each(false);
  }

  // Device memory of at least `bytes` for coalesced(). A buffer is never freed before the
  // communicator: a CUDA graph may have captured its address, and work in flight may use it
  // (calls on one communicator run one after another, so one buffer serves them all); a larger
  // need allocates a new one, twice as large, and keeps the old.
  CUdeviceptr packing_buffer(size_t bytes) {
    if (!packing_.empty() && packing_bytes_ >= bytes) return packing_.back();
    const CudaDriver& d = dev_->driver();
    const size_t size = std::max(bytes, 2 * packing_bytes_);
    CUdeviceptr p = 0;
    d.check(d.cuMemAlloc_v2(&p, size), "cuMemAlloc (nccl's packing buffer)");
    packing_.push_back(p);
    packing_bytes_ = size;
    return p;
  }

  // One NCCL call (inside a group or not); returns NCCL's result.
  nccl::Result call(const CollectiveStep& c, CUdeviceptr in, CUdeviceptr out, CUstream stream) {
    const size_t count = static_cast<size_t>(c.count);
    const int dt = nccl_dtype(c.dtype, op_name(c.op));
    void* src = reinterpret_cast<void*>(in);
    void* dst = reinterpret_cast<void*>(out);
    nccl::Result r = nccl::kSuccess;
    switch (c.op) {
      case Op::AllReduce:
        r = api_->all_reduce(src, dst, count, dt, nccl_op(c.reduce), comm_, stream);
        break;
      case Op::Broadcast:
        LT_CHECK(c.root >= 0 && c.root < size_, ErrorKind::Value, "broadcast: root ", c.root,
                 " is not a rank of a group of ", size_);
        r = api_->broadcast(src, dst, count, dt, c.root, comm_, stream);
        break;
      case Op::AllGather:
        r = api_->all_gather(src, dst, count, dt, comm_, stream);
        break;
      default:
        fail(ErrorKind::Runtime, "internal: collective step ", c.name, " has op ", op_name(c.op));
    }
    return r;
  }

  // A call's (or a group call's) result: settled, then raised (a call made while capturing) or
  // the communicator aborted with it.
  void finish(nccl::Result r, const CollectiveStep& c, bool abort_on_error) {
    // Nonblocking: an enqueue may still be in progress when it returns; it is issued in order on
    // the stream either way, so work issued after it follows it.
    if (r == nccl::kInProgress) r = settle();
    if (r != nccl::kSuccess && !abort_on_error)
      fail(ErrorKind::Runtime, op_name(c.op), " on nccl: ", describe(r));
    if (r != nccl::kSuccess) {
      abort_with(std::string(op_name(c.op)) + ": " + describe(r));
      raise_if_broken(c.name);
    }
  }

  // An event after the work issued on `stream` so far, polled by the watchdog (under call_mu_).
  std::shared_ptr<CUevent_st> track(CUstream stream, const std::string& what) {
    const CudaDriver& d = dev_->driver();
    auto done = new_event();
    d.check(d.cuEventRecord(done.get(), stream), "cuEventRecord");
    {
      std::lock_guard<std::mutex> lock(mu_);
      pending_.push_back({done, Clock::now() + timeout_, what});
    }
    wake_.notify_all();
    return done;
  }

  // Under call_mu_.
  std::shared_ptr<CUevent_st> enqueue_locked(std::span<const CollectiveCall> calls,
                                             CUstream after) {
    const CollectiveStep& c = *calls.front().step;
    raise_if_broken(c.name);
    dev_->bind();
    const CudaDriver& d = dev_->driver();
    const CUstream comm_stream = dev_->stream();
    if (after) {
      auto ready = new_event();
      d.check(d.cuEventRecord(ready.get(), after), "cuEventRecord");
      d.check(d.cuStreamWaitEvent(comm_stream, ready.get(), 0), "cuStreamWaitEvent");
    }
    issue(calls, comm_stream);
    return track(comm_stream, std::string(op_name(c.op)));
  }

  // A host-memory collective: `in` (in_bytes) to the device, the collective, `out` (out_bytes)
  // back. Synchronous; the watchdog bounds the wait.
  void host_staged(const CollectiveStep& c, const void* in, size_t in_bytes, void* out,
                   size_t out_bytes) {
    if (c.count == 0) return;
    std::lock_guard<std::mutex> lock(call_mu_);
    raise_if_broken(c.name);
    dev_->bind();
    const CudaDriver& d = dev_->driver();
    const size_t need = in_bytes + out_bytes;
    if (staging_bytes_ < need) {
      if (staging_) d.cuMemFree_v2(staging_);
      staging_ = 0, staging_bytes_ = 0;
      d.check(d.cuMemAlloc_v2(&staging_, std::max<size_t>(need, 256)), "cuMemAlloc");
      staging_bytes_ = std::max<size_t>(need, 256);
    }
    const CUdeviceptr din = staging_, dout = staging_ + in_bytes;
    d.check(d.cuMemcpyHtoDAsync_v2(din, in, in_bytes, dev_->stream()), "cuMemcpyHtoDAsync");
    const CollectiveCall staged{&c, din, dout};
    enqueue_locked({&staged, 1}, nullptr);  // the synchronize below waits for it
    d.check(d.cuMemcpyDtoHAsync_v2(out, dout, out_bytes, dev_->stream()), "cuMemcpyDtoHAsync");
    d.check(d.cuStreamSynchronize(dev_->stream()), "cuStreamSynchronize");
    raise_if_broken(c.name);
  }

  void raise_if_broken(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty())
      fail(ErrorKind::Runtime, what, " on nccl: the communicator failed earlier: ", broken_);
  }

  // Records why the communicator failed and aborts it (once; ncclCommAbort frees it, so nothing
  // touches comm_ after: every entry point raises broken_ first, the watchdog stops polling and
  // the destructor leaves it): its kernels end, so streams that wait on them drain, and every
  // later call and host wait on the device raises `why`.
  void abort_with(const std::string& why) {
    std::string message;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!broken_.empty()) return;
      broken_ = why + " on rank " + std::to_string(rank_) + " of " + std::to_string(size_) +
                " (timeout " + dist::seconds_text(timeout_) + ", LT_DIST_TIMEOUT)";
      message = broken_;
    }
    set_collective_error(dev_->ordinal(), "a collective failed on nccl: " + message);
    drop_graphs();  // ncclCommAbort would wait for them (hold_graph)
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      aborted_ = true;
      api_->comm_abort(comm_);
    }
    idle_.notify_all();
  }

  // ncclCommGetAsyncError, never on an aborted (freed) communicator: the watchdog and a failing
  // call may abort it from either thread.
  nccl::Result async_error(nccl::Result* state) {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (aborted_) {
      *state = nccl::kInProgress + 1;  // not success, not in progress: the caller stops
      return nccl::kSuccess;
    }
    return api_->comm_get_async_error(comm_, state);
  }

  // The watchdog: polls the collectives in flight every millisecond or so.
  void watchdog_loop() {
    try {
      dev_->bind();
    } catch (...) {
    }
    const CudaDriver& d = dev_->driver();
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      if (pending_.empty() || !broken_.empty()) {
        pending_.clear();
        idle_.notify_all();
        wake_.wait(lock, [&] { return stop_ || (!pending_.empty() && broken_.empty()); });
        continue;
      }
      // Done in order (one stream): drop the finished ones from the front.
      while (!pending_.empty() && d.cuEventQuery(pending_.front().done.get()) == CUDA_SUCCESS)
        pending_.pop_front();
      if (pending_.empty()) continue;
      const InFlight front = pending_.front();
      lock.unlock();
      nccl::Result state = nccl::kSuccess;
      const nccl::Result r = async_error(&state);
      std::string why;
      if (r != nccl::kSuccess)
        why = front.what + ": ncclCommGetAsyncError: " + describe(r);
      else if (state != nccl::kSuccess && state != nccl::kInProgress)
        why = front.what + " failed: " + describe(state);
      else if (Clock::now() > front.deadline)
        why = front.what +
              " did not finish in time (a rank that died or that runs other "
              "collectives)";
      if (!why.empty()) abort_with(why);
      lock.lock();
      if (why.empty()) wake_.wait_for(lock, std::chrono::milliseconds(1));
    }
  }

  int rank_, size_;
  dist::Millis timeout_{300000};
  const nccl::Api* api_ = nullptr;
  std::shared_ptr<CudaDevice> dev_;
  nccl::Comm comm_ = nullptr;
  std::mutex call_mu_;  // NCCL calls on one communicator are not thread-safe
  CUdeviceptr staging_ = 0;
  size_t staging_bytes_ = 0;
  std::vector<CUdeviceptr> packing_;  // coalesced()'s buffers, the last the largest
  size_t packing_bytes_ = 0;
  std::mutex mu_;  // pending_, broken_, stop_
  std::condition_variable wake_, idle_;
  std::deque<InFlight> pending_;
  std::string broken_;
  bool stop_ = false;
  std::mutex abort_mu_;  // aborted_, and every ncclCommGetAsyncError and ncclCommAbort
  bool aborted_ = false;
  std::thread watchdog_;
};

}  // namespace

void NcclCommunicator::hold_graph(const std::shared_ptr<CudaGraphReplay>& graph) {
  std::lock_guard<std::mutex> lock(graphs_mu_);
  if (graphs_closed_)
    fail(ErrorKind::Runtime, "nccl: the communicator is closing: no new CUDA graph may capture it");
  for (const auto& held : graphs_)
    if (held.first == graph.get()) return;
  graphs_.emplace_back(graph.get(), graph);
}

void NcclCommunicator::release_graph(const CudaGraphReplay* graph) {
  std::lock_guard<std::mutex> lock(graphs_mu_);
  std::erase_if(graphs_, [&](const auto& held) { return held.first == graph; });
}

void NcclCommunicator::drop_graphs() {
  std::vector<std::pair<const CudaGraphReplay*, std::weak_ptr<CudaGraphReplay>>> held;
  {
    std::lock_guard<std::mutex> lock(graphs_mu_);
    graphs_closed_ = true;
    held.swap(graphs_);
  }
  // Outside graphs_mu_: a graph's reset releases itself here.
  for (const auto& h : held)
    if (std::shared_ptr<CudaGraphReplay> g = h.second.lock()) g->drop();
}

std::shared_ptr<NcclCommunicator> NcclCommunicator::join(const dist::EngineRendezvous& group) {
  return std::make_shared<Nccl>(group);
}

void register_nccl_engine() {
  dist::register_engine("nccl", [](const dist::EngineRendezvous& g) {
    return std::shared_ptr<dist::Communicator>(NcclCommunicator::join(g));
  });
}

}  // namespace lt
