#include "backends/cpu/onednn_gemm.h"

#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cpu/onednn_engine.h"
#include "backends/cpu/openmp_serial.h"
#include "backends/cpu/small_gemm.h"
#include "backends/cpu/transpose.h"
#include "ir/error.h"

namespace lt::cpu {

#ifdef LT_HAVE_ONEDNN

namespace {

using dims = dnnl::memory::dims;

// The elements a strided operand spans: the stride of a batch dim that it broadcasts (oneDNN takes
// broadcasting as extent 1, whose stride is never stepped but must look like a real layout).
int64_t span(int64_t rows, int64_t cols, int64_t rs, int64_t cs, const std::vector<int64_t>& batch,
             const std::vector<int64_t>& bstride) {
  int64_t last = (rows - 1) * rs + (cols - 1) * cs;
  for (size_t d = 0; d < batch.size(); ++d) last += (batch[d] - 1) * bstride[d];
  return last + 1;
}

dnnl::memory::desc operand_desc(const Gemm& g, bool is_a) {
  const int64_t rows = is_a ? g.M : g.K, cols = is_a ? g.K : g.N;
  const int64_t rs = is_a ? g.a_rs : g.b_rs, cs = is_a ? g.a_cs : g.b_cs;
  const auto& bs = is_a ? g.a_batch_stride : g.b_batch_stride;
  dims d, st;
  int64_t inner = span(rows, cols, rs, cs, g.batch, bs);
  for (size_t i = 0; i < g.batch.size(); ++i) {
    d.push_back(bs[i] ? g.batch[i] : 1);
    st.push_back(bs[i] ? bs[i] : inner);
  }
  d.push_back(rows), d.push_back(cols);
  st.push_back(rs), st.push_back(cs);
  if (d.size() == 2) d.insert(d.begin(), 1), st.insert(st.begin(), inner);
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, st);
}

// The output: contiguous [batch..., M, N] (a leading 1 without batch, as for the operands).
dnnl::memory::desc out_desc(const Gemm& g) {
  dims d(g.batch.begin(), g.batch.end());
  if (d.empty()) d.push_back(1);
  d.push_back(g.M), d.push_back(g.N);
  dims st(d.size());
  int64_t s = 1;
  for (size_t i = d.size(); i-- > 0;) st[i] = s, s *= d[i];
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, st);
}

// Multiply-adds below which a product runs on one thread (OpenmpSerial): some 10-20 us of work,
// about what opening and joining oneDNN's OpenMP team costs on an idle machine, and far less
// than a join waiting on a descheduled team member costs on a busy one.
constexpr int64_t kSerialGemmWork = int64_t{1} << 18;

bool serial(const Gemm& g) { return g.batch_count() * g.M * g.N * g.K < kSerialGemmWork; }

// Whether B goes through a transposed scratch copy first. oneDNN 2.6's f32 matmul (gemm:jit on
// AVX2) runs a row-major B up to 2x slower than the same B stored transposed when M is below 512
// and B outgrows the caches: on the 2-core dev machine (AMD EPYC), [128 x 1024] x [1024 x 1024]
// takes 3.4 ms row-major and 1.7 ms transposed, [256 x 2048] x [2048 x 2048] 25.5 vs 14.8, while
// at M >= 512 the two match and at M = 32 the gain no longer pays the copy (0.4 ms per 2^20
// floats on 2 threads). An MLP's backward dX = dY W is this case.
bool transpose_b_first(const Gemm& g) {
  return g.batch.empty() && g.b_cs == 1 && g.M >= 64 && g.M < 512 &&
         g.K * g.N >= (int64_t{1} << 20);
}

// The same product over contiguous copies of A [batch..., M, K] and B [batch..., K, N], batched
// over every dim: the layout oneDNN takes whatever the operands' own layouts were.
Gemm packed(const Gemm& g) {
  Gemm p = g;
  p.a_rs = g.K, p.a_cs = 1, p.b_rs = g.N, p.b_cs = 1;
  int64_t sa = g.M * g.K, sb = g.K * g.N;
  for (size_t d = g.batch.size(); d-- > 0;) {
    p.a_batch_stride[d] = sa, p.b_batch_stride[d] = sb;
    sa *= g.batch[d], sb *= g.batch[d];
  }
  return p;
}

// Copies a strided batch of rows x cols matrices into a contiguous [batch..., rows, cols] array.
void pack(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
          const std::vector<int64_t>& batch, const std::vector<int64_t>& bstride,
          std::vector<float>& dst) {
  int64_t count = 1;
  for (int64_t e : batch) count *= e;
  dst.resize(static_cast<size_t>(count * rows * cols));
  float* out = dst.data();
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = 0, rest = i;
    for (size_t d = batch.size(); d-- > 0; rest /= batch[d]) off += rest % batch[d] * bstride[d];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) *out++ = src[off + r * rs + c * cs];
  }
}

}  // namespace

struct OnednnGemm::Impl {
  dnnl::memory::desc a, b, c;
  dnnl::matmul prim;
  bool transpose_b = false;  // run on B's transposed copy (transpose_b_first)
  bool pack = false;         // run on contiguous copies of A and B (packed())
  bool serial = false;       // created and run on one OpenMP thread (serial())
};

bool onednn_gemm_available() { return true; }

OnednnGemm::OnednnGemm(const Gemm& g) : g_(g) {
  if (g.dtype != DType::Float32)
    fail(ErrorKind::NotImplemented, "not implemented: gemm in ", dtype_name(g.dtype),
         " on cpu (oneDNN: float32 only)");
  if (small_gemm_fits(g)) return;  // run() uses the loop: no primitive
  // Keyed by everything the primitive depends on; offsets are applied to the pointers instead.
  std::vector<int64_t> key = {g.M, g.N, g.K, g.a_rs, g.a_cs, g.b_rs, g.b_cs};
  for (size_t i = 0; i < g.batch.size(); ++i)
    key.insert(key.end(), {g.batch[i], g.a_batch_stride[i], g.b_batch_stride[i]});
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const Impl>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot) {
    auto impl = std::make_shared<Impl>();
    impl->serial = serial(g);
    // oneDNN sizes a primitive's threading when it is made: made serial, it runs serial.
    std::optional<OpenmpSerial> one_thread;
    if (impl->serial) one_thread.emplace();
    impl->a = operand_desc(g, true);
    impl->transpose_b = transpose_b_first(g);
    Gemm bt = g;
    if (impl->transpose_b) bt.b_rs = 1, bt.b_cs = g.K;  // the copy: [N, K] contiguous
    impl->b = operand_desc(bt, false);
    impl->c = out_desc(g);
    auto make = [&] {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(impl->a, impl->b, impl->c),
                                      onednn_engine());
      impl->prim = dnnl::matmul(pd);
    };
    try {
      make();
    } catch (const dnnl::error&) {
      // A layout oneDNN has no descriptor for (a batch dim that both operands broadcast: a
      // product of expanded tensors): the same product over contiguous copies.
      const Gemm p = packed(g);
      impl->a = operand_desc(p, true);
      impl->b = operand_desc(p, false);
      impl->transpose_b = false;
      impl->pack = true;
      try {
        make();
      } catch (const dnnl::error& e) {
        fail(ErrorKind::NotImplemented, "not implemented: gemm ", g.name, " (M=", g.M, " N=", g.N,
             " K=", g.K, ") on cpu: oneDNN: ", e.what());
      }
    }
    slot = std::move(impl);
  }
  impl_ = slot;
}

void OnednnGemm::run(const void* a, const void* b, void* out) const {
  dnnl::stream& stream = onednn_stream();
  const size_t es = dtype_size(g_.dtype);
  auto* pa = const_cast<char*>(static_cast<const char*>(a)) + g_.a_offset * es;
  auto* pb = const_cast<char*>(static_cast<const char*>(b)) + g_.b_offset * es;
  if (!impl_) {
    small_gemm(g_, reinterpret_cast<const float*>(pa), reinterpret_cast<const float*>(pb),
               static_cast<float*>(out));
    return;
  }
  if (impl_->pack) {
    // Per thread: executables on several threads may run this Gemm at once.
    thread_local std::vector<float> scratch_a, scratch_b;
    pack(reinterpret_cast<const float*>(pa), g_.M, g_.K, g_.a_rs, g_.a_cs, g_.batch,
         g_.a_batch_stride, scratch_a);
    pack(reinterpret_cast<const float*>(pb), g_.K, g_.N, g_.b_rs, g_.b_cs, g_.batch,
         g_.b_batch_stride, scratch_b);
    pa = reinterpret_cast<char*>(scratch_a.data());
    pb = reinterpret_cast<char*>(scratch_b.data());
  }
  if (impl_->transpose_b) {
    // Per thread: executables on several threads may run this Gemm at once.
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(g_.K * g_.N));
    transpose_f32(reinterpret_cast<const float*>(pb), g_.b_rs, g_.K, g_.N, scratch.data());
    pb = reinterpret_cast<char*>(scratch.data());
  }
  const dnnl::engine& eng = onednn_engine();
  std::optional<OpenmpSerial> one_thread;
  if (impl_->serial) one_thread.emplace();
  dnnl::memory ma(impl_->a, eng, pa), mb(impl_->b, eng, pb), mc(impl_->c, eng, out);
  impl_->prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  stream.wait();
}

#else  // !LT_HAVE_ONEDNN

struct OnednnGemm::Impl {};

bool onednn_gemm_available() { return false; }

OnednnGemm::OnednnGemm(const Gemm& g) : g_(g) {
  fail(ErrorKind::NotImplemented, "not implemented: gemm ", g.name,
       " on cpu (built without oneDNN)");
}

void OnednnGemm::run(const void*, const void*, void*) const {}

#endif

OnednnGemm::~OnednnGemm() = default;
OnednnGemm::OnednnGemm(OnednnGemm&&) noexcept = default;

}  // namespace lt::cpu
