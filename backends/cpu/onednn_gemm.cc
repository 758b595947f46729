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
#include "ir/half.h"
#include "lowering/size_fields.h"

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

// Runtime-dims forms of operand_desc and out_desc: every dim or stride that a field marked in
// `m` (1: symbolic, as OnednnSymbolicGemm::mask_) feeds is DNNL_RUNTIME_DIM_VAL; the others are
// g's values, which every binding of the variant shares.
constexpr int64_t kRuntime = DNNL_RUNTIME_DIM_VAL;

dnnl::memory::desc operand_desc_rt(const Gemm& g, const Gemm& m, bool is_a) {
  const int64_t rows = is_a ? g.M : g.K, cols = is_a ? g.K : g.N;
  const int64_t rs = is_a ? g.a_rs : g.b_rs, cs = is_a ? g.a_cs : g.b_cs;
  const auto& bs = is_a ? g.a_batch_stride : g.b_batch_stride;
  const bool m_rows = is_a ? m.M : m.K, m_cols = is_a ? m.K : m.N;
  const bool m_rs = is_a ? m.a_rs : m.b_rs, m_cs = is_a ? m.a_cs : m.b_cs;
  const auto& mbs = is_a ? m.a_batch_stride : m.b_batch_stride;
  bool m_span = m_rows || m_cols || m_rs || m_cs;  // the span's stride (broadcast dims)
  for (size_t i = 0; i < g.batch.size(); ++i) m_span = m_span || m.batch[i] || mbs[i];
  const int64_t inner = m_span ? kRuntime : span(rows, cols, rs, cs, g.batch, bs);
  dims d, st;
  for (size_t i = 0; i < g.batch.size(); ++i) {
    d.push_back(bs[i] ? (m.batch[i] ? kRuntime : g.batch[i]) : 1);
    st.push_back(bs[i] ? (mbs[i] ? kRuntime : bs[i]) : inner);
  }
  d.push_back(m_rows ? kRuntime : rows), d.push_back(m_cols ? kRuntime : cols);
  st.push_back(m_rs ? kRuntime : rs), st.push_back(m_cs ? kRuntime : cs);
  if (d.size() == 2) d.insert(d.begin(), 1), st.insert(st.begin(), inner);
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, st);
}

dnnl::memory::desc out_desc_rt(const Gemm& g, const Gemm& m) {
  dims d(g.batch.begin(), g.batch.end());
  std::vector<bool> rt(m.batch.begin(), m.batch.end());
  if (d.empty()) d.push_back(1), rt.push_back(false);
  d.push_back(g.M), d.push_back(g.N);
  rt.push_back(m.M != 0), rt.push_back(m.N != 0);
  dims st(d.size());
  int64_t s = 1;
  bool s_rt = false;  // the stride multiplies a runtime extent
  for (size_t i = d.size(); i-- > 0;) {
    st[i] = s_rt ? kRuntime : s;
    s *= d[i];
    s_rt = s_rt || rt[i];
    if (rt[i]) d[i] = kRuntime;
  }
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

// Copies a strided batch of rows x cols matrices into a contiguous float32 [batch..., rows, cols]
// array, each element through to_float (16-bit operands are widened on the way: exactly, every
// 16-bit value being a float32 one).
template <class T, class ToFloat>
void pack(const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
          const std::vector<int64_t>& batch, const std::vector<int64_t>& bstride,
          std::vector<float>& dst, ToFloat to_float) {
  int64_t count = 1;
  for (int64_t e : batch) count *= e;
  dst.resize(static_cast<size_t>(count * rows * cols));
  float* out = dst.data();
  for (int64_t i = 0; i < count; ++i) {
    int64_t off = 0, rest = i;
    for (size_t d = batch.size(); d-- > 0; rest /= batch[d]) off += rest % batch[d] * bstride[d];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) *out++ = to_float(src[off + r * rs + c * cs]);
  }
}

void pack(const float* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
          const std::vector<int64_t>& batch, const std::vector<int64_t>& bstride,
          std::vector<float>& dst) {
  pack(src, rows, cols, rs, cs, batch, bstride, dst, [](float v) { return v; });
}

}  // namespace

struct OnednnGemm::Impl {
  dnnl::memory::desc a, b, c;  // with runtime dims (rt): the actual ones are made per run
  dnnl::matmul prim;
  bool transpose_b = false;  // run on B's transposed copy (transpose_b_first)
  bool pack = false;         // run on contiguous copies of A and B (packed())
  bool serial = false;       // created and run on one OpenMP thread (serial())
  bool rt = false;           // some dims or strides are runtime (OnednnSymbolicGemm)
};

namespace {

// The primitives of every OnednnGemm and OnednnSymbolicGemm of the process, keyed by everything
// a primitive depends on (offsets are applied to the pointers instead).
struct PrimitiveCache {
  std::mutex mu;
  std::map<std::vector<int64_t>, std::shared_ptr<const OnednnGemm::Impl>> map;
};

PrimitiveCache& primitive_cache() {
  static PrimitiveCache cache;
  return cache;
}

dnnl::matmul make_matmul(const OnednnGemm::Impl& impl) {
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(impl.a, impl.b, impl.c), onednn_engine());
  return dnnl::matmul(pd);
}

// Runs `impl` for product g on operands pa, pb (offsets applied); blocks until done.
void execute(const OnednnGemm::Impl& impl, const Gemm& g, char* pa, char* pb, void* out) {
  dnnl::stream& stream = onednn_stream();
  if (impl.pack) {
    // Per thread: executables on several threads may run this Gemm at once.
    thread_local std::vector<float> scratch_a, scratch_b;
    pack(reinterpret_cast<const float*>(pa), g.M, g.K, g.a_rs, g.a_cs, g.batch, g.a_batch_stride,
         scratch_a);
    pack(reinterpret_cast<const float*>(pb), g.K, g.N, g.b_rs, g.b_cs, g.batch, g.b_batch_stride,
         scratch_b);
    pa = reinterpret_cast<char*>(scratch_a.data());
    pb = reinterpret_cast<char*>(scratch_b.data());
  }
  if (impl.transpose_b) {
    // Per thread: executables on several threads may run this Gemm at once.
    thread_local std::vector<float> scratch;
    scratch.resize(static_cast<size_t>(g.K * g.N));
    transpose_f32(reinterpret_cast<const float*>(pb), g.b_rs, g.K, g.N, scratch.data());
    pb = reinterpret_cast<char*>(scratch.data());
  }
  const dnnl::engine& eng = onednn_engine();
  std::optional<OpenmpSerial> one_thread;
  if (impl.serial) one_thread.emplace();
  if (impl.rt) {
    // This binding's descriptors (the primitive's static entries match them).
    dnnl::memory::desc bd;
    if (impl.transpose_b) {
      Gemm bt = g;
      bt.b_rs = 1, bt.b_cs = g.K;
      bd = operand_desc(bt, false);
    } else {
      bd = operand_desc(g, false);
    }
    dnnl::memory ma(operand_desc(g, true), eng, pa), mb(bd, eng, pb), mc(out_desc(g), eng, out);
    impl.prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  } else {
    dnnl::memory ma(impl.a, eng, pa), mb(impl.b, eng, pb), mc(impl.c, eng, out);
    impl.prim.execute(stream, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}});
  }
  stream.wait();
}

// The 16-bit operand (bfloat16 or float16 bits) as pack() makes float32 ones.
void widen(const uint16_t* src, DType t, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
           const std::vector<int64_t>& batch, const std::vector<int64_t>& bstride,
           std::vector<float>& dst) {
  if (t == DType::BFloat16)
    pack(src, rows, cols, rs, cs, batch, bstride, dst, bfloat16_to_float);
  else
    pack(src, rows, cols, rs, cs, batch, bstride, dst, half_to_float);
}

}  // namespace

bool onednn_gemm_available() { return true; }

size_t onednn_gemm_primitives() {
  PrimitiveCache& cache = primitive_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  return cache.map.size();
}

OnednnGemm::OnednnGemm(const Gemm& g) : g_(g) {
  if (g.dtype == DType::BFloat16 || g.dtype == DType::Float16) {
    Gemm p = packed(g);
    p.dtype = DType::Float32;
    p.a_offset = p.b_offset = 0;
    widened_ = std::make_shared<const OnednnGemm>(p);
    return;
  }
  if (g.dtype != DType::Float32)
    fail(ErrorKind::NotImplemented, "not implemented: gemm in ", dtype_name(g.dtype),
         " on cpu (oneDNN: float32, bfloat16 and float16 only)");
  if (small_gemm_fits(g)) return;  // run() uses the loop: no primitive
  // Keyed by everything the primitive depends on; offsets are applied to the pointers instead.
  std::vector<int64_t> key = {g.M, g.N, g.K, g.a_rs, g.a_cs, g.b_rs, g.b_cs};
  for (size_t i = 0; i < g.batch.size(); ++i)
    key.insert(key.end(), {g.batch[i], g.a_batch_stride[i], g.b_batch_stride[i]});
  PrimitiveCache& cache = primitive_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto& slot = cache.map[key];
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
    try {
      impl->prim = make_matmul(*impl);
    } catch (const dnnl::error&) {
      // A layout oneDNN has no descriptor for (a batch dim that both operands broadcast: a
      // product of expanded tensors): the same product over contiguous copies.
      const Gemm p = packed(g);
      impl->a = operand_desc(p, true);
      impl->b = operand_desc(p, false);
      impl->transpose_b = false;
      impl->pack = true;
      try {
        impl->prim = make_matmul(*impl);
      } catch (const dnnl::error& e) {
        cache.map.erase(key);
        fail(ErrorKind::NotImplemented, "not implemented: gemm ", g.name, " (M=", g.M, " N=", g.N,
             " K=", g.K, ") on cpu: oneDNN: ", e.what());
      }
    }
    slot = std::move(impl);
  }
  impl_ = slot;
}

void OnednnGemm::run(const void* a, const void* b, void* out) const {
  const size_t es = dtype_size(g_.dtype);
  auto* pa = const_cast<char*>(static_cast<const char*>(a)) + g_.a_offset * es;
  auto* pb = const_cast<char*>(static_cast<const char*>(b)) + g_.b_offset * es;
  if (widened_) {
    // Freed on return, not kept per thread: a vocabulary-sized product's float32 copies run to
    // gigabytes, and allocating them costs little next to the product itself.
    std::vector<float> wa, wb, wc;
    widen(reinterpret_cast<const uint16_t*>(pa), g_.dtype, g_.M, g_.K, g_.a_rs, g_.a_cs, g_.batch,
          g_.a_batch_stride, wa);
    widen(reinterpret_cast<const uint16_t*>(pb), g_.dtype, g_.K, g_.N, g_.b_rs, g_.b_cs, g_.batch,
          g_.b_batch_stride, wb);
    wc.resize(static_cast<size_t>(g_.batch_count() * g_.M * g_.N));
    widened_->run(wa.data(), wb.data(), wc.data());
    auto* o = static_cast<uint16_t*>(out);
    if (g_.dtype == DType::BFloat16)
      for (size_t i = 0; i < wc.size(); ++i) o[i] = float_to_bfloat16(wc[i]);
    else
      for (size_t i = 0; i < wc.size(); ++i) o[i] = float_to_half(wc[i]);
    return;
  }
  if (!impl_) {
    small_gemm(g_, reinterpret_cast<const float*>(pa), reinterpret_cast<const float*>(pb),
               static_cast<float*>(out));
    return;
  }
  execute(*impl_, g_, pa, pb, out);
}

OnednnSymbolicGemm::OnednnSymbolicGemm(const Gemm& g, const StepSizeParams& sizes) : mask_(g) {
  usable_ = g.dtype == DType::Float32;
  int ordinal = 0;
  size_t next = 0;
  for_each_size_field(mask_, [&](int64_t& v) {
    const bool sym = next < sizes.size() && sizes[next].first == ordinal;
    if (sym) ++next;
    v = sym ? 1 : 0;
    ++ordinal;
  });
}

bool OnednnSymbolicGemm::run(const Gemm& at, const void* a, const void* b, void* out) const {
  if (!usable_ || at.batch.size() > 30) return false;  // (the variant's bits below)
  auto* pa = const_cast<char*>(static_cast<const char*>(a)) + at.a_offset * sizeof(float);
  auto* pb = const_cast<char*>(static_cast<const char*>(b)) + at.b_offset * sizeof(float);
  if (small_gemm_fits(at)) {
    small_gemm(at, reinterpret_cast<const float*>(pa), reinterpret_cast<const float*>(pb),
               static_cast<float*>(out));
    return true;
  }
  // The variant: what this binding's sizes decide beyond the runtime dims.
  const bool one_thread = serial(at), tb = transpose_b_first(at);
  uint64_t variant = uint64_t{one_thread} | uint64_t{tb} << 1;
  for (size_t i = 0; i < at.batch.size(); ++i)
    variant |= uint64_t{at.a_batch_stride[i] == 0} << (2 + 2 * i) |
               uint64_t{at.b_batch_stride[i] == 0} << (3 + 2 * i);
  std::shared_ptr<const OnednnGemm::Impl> impl;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = variants_.find(variant);
    if (it == variants_.end()) {
      // The shared cache's key: a runtime marker, the variant, and the static fields (offsets,
      // applied to the pointers, and symbolic fields left out).
      std::vector<int64_t> key = {-1, static_cast<int64_t>(variant),
                                  static_cast<int64_t>(at.batch.size())};
      Gemm g = at, m = mask_;
      std::vector<int64_t> flags;
      for_each_size_field(m, [&](int64_t& v) { flags.push_back(v); });
      size_t f = 0;
      for_each_size_field(g, [&](int64_t& v) {
        const bool offset = f == 3 || f == 6;
        key.push_back(flags[f] || offset ? INT64_MIN : v);
        ++f;
      });
      PrimitiveCache& cache = primitive_cache();
      std::lock_guard<std::mutex> cache_lock(cache.mu);
      auto slot = cache.map.find(key);
      std::shared_ptr<const OnednnGemm::Impl> made;
      if (slot != cache.map.end()) {
        made = slot->second;
      } else {
        auto p = std::make_shared<OnednnGemm::Impl>();
        p->rt = true;
        p->serial = one_thread;
        p->transpose_b = tb;
        std::optional<OpenmpSerial> serial_scope;
        if (one_thread) serial_scope.emplace();
        p->a = operand_desc_rt(g, m, true);
        Gemm bt = g, bm = m;
        if (tb) bt.b_rs = 1, bt.b_cs = g.K, bm.b_rs = 0, bm.b_cs = m.K;
        p->b = operand_desc_rt(bt, bm, false);
        p->c = out_desc_rt(g, m);
        try {
          p->prim = make_matmul(*p);
          made = std::move(p);
          cache.map.emplace(std::move(key), made);
        } catch (const dnnl::error&) {
          // No runtime-dims matmul for this layout: null, so the caller instantiates per binding.
        }
      }
      it = variants_.emplace(variant, std::move(made)).first;
    }
    impl = it->second;
  }
  if (!impl) return false;
  execute(*impl, at, pa, pb, out);
  return true;
}

#else  // !LT_HAVE_ONEDNN

struct OnednnGemm::Impl {};

bool onednn_gemm_available() { return false; }

OnednnGemm::OnednnGemm(const Gemm& g) : g_(g) {
  fail(ErrorKind::NotImplemented, "not implemented: gemm ", g.name,
       " on cpu (built without oneDNN)");
}

void OnednnGemm::run(const void*, const void*, void*) const {}

size_t onednn_gemm_primitives() { return 0; }

OnednnSymbolicGemm::OnednnSymbolicGemm(const Gemm& g, const StepSizeParams&) : mask_(g) {}

bool OnednnSymbolicGemm::run(const Gemm&, const void*, const void*, void*) const { return false; }

#endif

OnednnGemm::~OnednnGemm() = default;
OnednnGemm::OnednnGemm(OnednnGemm&&) noexcept = default;
OnednnSymbolicGemm::~OnednnSymbolicGemm() = default;

}  // namespace lt::cpu
