#include "distributed/gloo_communicator.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "ir/error.h"
#include "ir/half.h"

#ifdef LT_HAVE_GLOO
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif

namespace lt::dist {

#ifndef LT_HAVE_GLOO

bool gloo_available() { return false; }

std::shared_ptr<Communicator> make_gloo_communicator(TcpStore&, const GlooOptions&) {
  fail(ErrorKind::NotImplemented,
       "not implemented: gloo (built without libgloo-dev; install it and reconfigure with "
       "LT_WITH_GLOO=ON)");
}

#else

bool gloo_available() { return true; }

namespace {

// Gloo's view of our store (gloo::rendezvous::Store): Gloo's rendezvous calls get() without a
// timeout of its own, so the store's timeout (LT_DIST_TIMEOUT) bounds it.
class StoreForGloo final : public gloo::rendezvous::Store {
 public:
  explicit StoreForGloo(TcpStore& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& t) override {
    store_.wait(keys, t);
  }

 private:
  TcpStore& store_;
};

// Element-wise reductions for gloo::AllreduceOptions (out may alias either input). Integer sums
// wrap around in two's complement (through the unsigned type: no signed overflow). Max keeps a
// NaN, as torch.max does.
template <typename T>
void sum_fn(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    for (size_t i = 0; i < n; ++i)
      o[i] = static_cast<T>(static_cast<U>(x[i]) + static_cast<U>(y[i]));
  } else {
    for (size_t i = 0; i < n; ++i) o[i] = x[i] + y[i];
  }
}

template <typename T>
void max_fn(void* out, const void* a, const void* b, size_t n) {
  auto* o = static_cast<T*>(out);
  auto* x = static_cast<const T*>(a);
  auto* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) {
    if constexpr (std::is_floating_point_v<T>)
      o[i] = (x[i] > y[i] || std::isnan(x[i])) ? x[i] : y[i];
    else
      o[i] = x[i] > y[i] ? x[i] : y[i];
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> ctx, Millis timeout)
      : ctx_(std::move(ctx)), timeout_(timeout) {}
  // The context's pairs close softly when it goes (what this rank sent last still arrives); only a
  // failure closes them hard (run()).

  int rank() const override { return ctx_->rank; }
  int size() const override { return ctx_->size; }
  std::string_view engine() const override { return "gloo"; }

  void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) override {
    LT_CHECK(count >= 0, ErrorKind::Value, "all_reduce: count must be >= 0, got ", count);
    LT_CHECK(data || count == 0, ErrorKind::Value, "all_reduce: null data for ", count,
             " elements of ", dtype_name(dtype));
    bool supported = dtype == DType::Float32 || dtype == DType::Float64 ||
                     dtype == DType::Float16 || dtype == DType::BFloat16 || dtype == DType::Int32 ||
                     dtype == DType::Int64;
    LT_CHECK(supported, ErrorKind::NotImplemented, "not implemented: all_reduce of ",
             dtype_name(dtype),
             " on gloo (supported: float32, float64, float16, bfloat16, int32, int64)");
    LT_CHECK(op != ReduceOp::Avg || is_floating(dtype), ErrorKind::Type,
             "all_reduce: ReduceOp Avg of ", dtype_name(dtype),
             ": Avg divides, so it takes a floating dtype (use Sum, then divide)");
    if (count == 0) return;
    auto n = static_cast<size_t>(count);
    switch (dtype) {
      case DType::Float32:
        reduce_typed(static_cast<float*>(data), n, op);
        break;
      case DType::Float64:
        reduce_typed(static_cast<double*>(data), n, op);
        break;
      case DType::Int32:
        reduce_typed(static_cast<int32_t*>(data), n, op);
        break;
      case DType::Int64:
        reduce_typed(static_cast<int64_t*>(data), n, op);
        break;
      default: {
        // 16-bit floats: reduce in float32 and round once, as the backends' reductions do (a
        // float16 partial sum rounded at every hop would drift with the ring's order).
        bool bf = dtype == DType::BFloat16;
        auto* h = static_cast<uint16_t*>(data);
        std::vector<float> tmp(n);
        for (size_t i = 0; i < n; ++i) tmp[i] = bf ? bfloat16_to_float(h[i]) : half_to_float(h[i]);
        reduce_typed(tmp.data(), n, op);
        for (size_t i = 0; i < n; ++i)
          h[i] = bf ? float_to_bfloat16(tmp[i]) : float_to_half(tmp[i]);
      }
    }
  }

  void broadcast(void* data, size_t bytes, int root) override {
    LT_CHECK(root >= 0 && root < size(), ErrorKind::Value, "broadcast: root ", root,
             " is not a rank of the group of ", size());
    LT_CHECK(data || bytes == 0, ErrorKind::Value, "broadcast: null data for ", bytes, " bytes");
    if (bytes == 0 || size() == 1) return;
    run("broadcast", [&](uint32_t tag) {
      gloo::BroadcastOptions o(ctx_);
      o.setOutput(static_cast<uint8_t*>(data), bytes);
      o.setRoot(root);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::broadcast(o);
    });
  }

  void all_gather(const void* in, void* out, size_t bytes_per_rank) override {
    LT_CHECK((in && out) || bytes_per_rank == 0, ErrorKind::Value, "all_gather: null ",
             in ? "output" : "input", " for ", bytes_per_rank, " bytes per rank");
    if (bytes_per_rank == 0) return;
    auto* slot = static_cast<uint8_t*>(out) + static_cast<size_t>(rank()) * bytes_per_rank;
    if (size() == 1) {
      std::memmove(slot, in, bytes_per_rank);
      return;
    }
    run("all_gather", [&](uint32_t tag) {
      gloo::AllgatherOptions o(ctx_);
      // In place (in is out's own slot): no input, Gloo sends from the slot.
      if (in != slot)
        o.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes_per_rank);
      o.setOutput(static_cast<uint8_t*>(out), bytes_per_rank * static_cast<size_t>(size()));
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::allgather(o);
    });
  }

  void barrier() override {
    if (size() == 1) return;
    run("barrier", [&](uint32_t tag) {
      gloo::BarrierOptions o(ctx_);
      o.setTag(tag);
      o.setTimeout(timeout_);
      gloo::barrier(o);
    });
  }

 private:
  template <typename T>
  void reduce_typed(T* data, size_t n, ReduceOp op) {
    if (size() > 1) {
      run("all_reduce", [&](uint32_t tag) {
        gloo::AllreduceOptions o(ctx_);
        o.setOutput(data, n);
        o.setReduceFunction(op == ReduceOp::Max ? &max_fn<T> : &sum_fn<T>);
        o.setTag(tag);
        o.setTimeout(timeout_);
        gloo::allreduce(o);
      });
    }
    if constexpr (std::is_floating_point_v<T>) {
      if (op == ReduceOp::Avg) {
        T s = static_cast<T>(size());
        for (size_t i = 0; i < n; ++i) data[i] /= s;
      }
    }
  }

  // Runs one collective under the lock with the next tag (a rank whose calls went out of step
  // with the others' then waits on a tag nobody sends, and times out, instead of mixing data).
  // Gloo's failures come back as lt::Error, and the communicator is closed for good: its pairs may
  // still hold the failed operation's data in flight.
  template <typename F>
  void run(const char* what, F&& body) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!broken_.empty())
      fail(ErrorKind::Runtime, what, " on gloo: rank ", rank(), " of ", size(),
           ": the process group is unusable after an earlier failure (", broken_,
           "); destroy it and initialize a new one");
    uint32_t tag = next_tag_++;
    try {
      body(tag);
      return;
    } catch (const std::exception& e) {
      broken_ = std::string(what) + ": " + e.what();
    } catch (...) {
      broken_ = std::string(what) + ": unknown exception";
    }
    // Fail the peers fast: their pairs to this rank close, so they need not wait out the timeout.
    try {
      ctx_->closeConnections();
    } catch (...) {
    }
    fail(ErrorKind::Runtime, what, " on gloo failed on rank ", rank(), " of ", size(), " (timeout ",
         seconds_text(timeout_),
         ", LT_DIST_TIMEOUT): a peer exited, closed its "
         "connection or did not make the same call in time: ",
         broken_.substr(std::strlen(what) + 2));
  }

  std::shared_ptr<gloo::Context> ctx_;
  Millis timeout_;
  std::mutex mu_;
  uint32_t next_tag_ = 0;
  std::string broken_;
};

// Gloo's TCP pairs write with writev(), which raises SIGPIPE once a peer has gone: its default
// action would end this process before Gloo's error could reach the caller. Ignored, unless the
// program handles the signal itself (Python ignores it already).
void ignore_sigpipe() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction old {};
    if (::sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL &&
        !(old.sa_flags & SA_SIGINFO))
      ::signal(SIGPIPE, SIG_IGN);
  });
}

std::string default_hostname() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0 || !name[0]) return "127.0.0.1";
  return name;
}

}  // namespace

std::shared_ptr<Communicator> make_gloo_communicator(TcpStore& store, const GlooOptions& opts) {
  LT_CHECK(opts.size >= 1 && opts.rank >= 0 && opts.rank < opts.size, ErrorKind::Value,
           "make_gloo_communicator: rank ", opts.rank, " outside a group of ", opts.size);
  LT_CHECK(opts.timeout.count() > 0, ErrorKind::Value,
           "make_gloo_communicator: timeout must be positive, got ", opts.timeout.count(), " ms");
  ignore_sigpipe();
  gloo::transport::tcp::attr attr;
  if (!opts.iface.empty())
    attr.iface = opts.iface;
  else
    attr.hostname = opts.hostname.empty() ? default_hostname() : opts.hostname;
  std::string where = !opts.iface.empty() ? "interface " + opts.iface : "host " + attr.hostname;
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    fail(ErrorKind::Runtime, "gloo: cannot open a TCP device on ", where, " (rank ", opts.rank,
         " of ", opts.size, "; set GLOO_SOCKET_IFNAME or LT_GLOO_HOSTNAME): ", e.what());
  }
  auto ctx = std::make_shared<gloo::rendezvous::Context>(opts.rank, opts.size);
  ctx->setTimeout(opts.timeout);
  StoreForGloo gstore(store);
  gloo::rendezvous::PrefixStore prefixed(opts.prefix, gstore);
  try {
    ctx->connectFullMesh(prefixed, device);
  } catch (const std::exception& e) {
    fail(ErrorKind::Runtime, "gloo: rank ", opts.rank, " of ", opts.size,
         " could not connect to its peers (timeout ", seconds_text(opts.timeout), ", store at ",
         store.address(), ", Gloo device on ", where, "): ", e.what());
  }
  return std::make_shared<GlooCommunicator>(std::move(ctx), opts.timeout);
}

#endif  // LT_HAVE_GLOO

}  // namespace lt::dist
