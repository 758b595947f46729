#include "lowering/plan_serialize.h"

#include <cstdint>

#include "ir/bytes.h"
#include "ir/error.h"
#include "ir/ops.h"
#include "lowering/complete_plan.h"
#include "lowering/kernel_code.h"

namespace lt {

namespace {

// Bumped whenever the layout below changes; a reader rejects other versions.
constexpr uint32_t kPlanFormat = 12;  // 2: Gemm steps and the step order; 3: donations, inplace; 4:
                                      // gather/scatter; 6: attention steps indices; 5: Conv steps;
                                      // 7: loop IR size-parameter fields (always static here);
                                      // 8: collective steps; 9: conv channels-last operands;
                                      // 10: a collective's group; 11: output offsets;
                                      // 12: buffers inside another (BufferSpec::alias)

void put_gemm(ByteWriter& w, const Gemm& g) {
  w.bytes(g.name);
  w.u8(static_cast<uint8_t>(g.dtype));
  for (int64_t v :
       {static_cast<int64_t>(g.a), static_cast<int64_t>(g.b), static_cast<int64_t>(g.out), g.M, g.N,
        g.K, g.a_offset, g.a_rs, g.a_cs, g.b_offset, g.b_rs, g.b_cs})
    w.i64(v);
  put_shape(w, g.batch);
  put_shape(w, g.a_batch_stride);
  put_shape(w, g.b_batch_stride);
}

void put_conv(ByteWriter& w, const ConvStep& c) {
  w.bytes(c.name);
  w.u8(static_cast<uint8_t>(c.kind));
  w.u8(static_cast<uint8_t>(c.dtype));
  for (int v : {c.a, c.b, c.bias, c.out}) w.i64(v);
  w.u8(c.relu);
  w.u8(c.channels_last);
  put_shape(w, c.x);
  put_shape(w, c.w);
  put_shape(w, c.y);
  put_shape(w, c.params.ints());
}

void put_collective(ByteWriter& w, const CollectiveStep& c) {
  w.bytes(c.name);
  w.u8(static_cast<uint8_t>(c.op));
  w.u8(static_cast<uint8_t>(c.dtype));
  for (int64_t v : {int64_t{c.reduce}, int64_t{c.root}, int64_t{c.world}, int64_t{c.in},
                    int64_t{c.out}, c.count, int64_t{c.group}})
    w.i64(v);
}

void put_attention(ByteWriter& w, const AttentionStep& a) {
  w.bytes(a.name);
  w.u8(static_cast<uint8_t>(a.kind));
  w.u8(static_cast<uint8_t>(a.dtype));
  w.u8(a.causal);
  w.f64(a.scale);
  for (int64_t v : {a.batch, a.L, a.S, a.E, a.Ev}) w.i64(v);
  for (int b : {a.q, a.k, a.v, a.out, a.lse, a.dout, a.dsum, a.dq, a.dk, a.dv}) w.i64(b);
}

// Decoding with range checks: enums in range, ids within [lo, hi).
struct Decoder {
  ByteReader& r;

  int id(int64_t lo, int64_t hi, const char* what) {
    int64_t v = r.i64();
    if (v < lo || v >= hi)
      r.bad(std::string(what) + " " + std::to_string(v) + " out of range [" + std::to_string(lo) +
            ", " + std::to_string(hi) + ")");
    return static_cast<int>(v);
  }
  DType dtype() {
    uint8_t v = r.u8();
    if (v >= kNumDTypes) r.bad("bad dtype " + std::to_string(v));
    return static_cast<DType>(v);
  }
  Op op() {
    uint8_t v = r.u8();
    if (static_cast<size_t>(v) >= all_ops().size()) r.bad("bad op " + std::to_string(v));
    return static_cast<Op>(v);
  }
  template <typename E>
  E enumeration(int n, const char* what) {
    uint8_t v = r.u8();
    if (v >= n) r.bad(std::string("bad ") + what + " " + std::to_string(v));
    return static_cast<E>(v);
  }
  bool flag() {
    uint8_t v = r.u8();
    if (v > 1) r.bad("bad flag");
    return v != 0;
  }
  // Buffer ids are range-checked here; sizes and strides against the buffers by validate_gemm.
  Gemm gemm(const std::vector<BufferSpec>& buffers) {
    const int nbuffers = static_cast<int>(buffers.size());
    Gemm g;
    g.name = std::string(r.bytes());
    g.dtype = dtype();
    g.a = id(0, nbuffers, "gemm A buffer");
    g.b = id(0, nbuffers, "gemm B buffer");
    g.out = id(0, nbuffers, "gemm output buffer");
    for (int64_t* v :
         {&g.M, &g.N, &g.K, &g.a_offset, &g.a_rs, &g.a_cs, &g.b_offset, &g.b_rs, &g.b_cs})
      *v = r.i64();
    for (std::vector<int64_t>* v : {&g.batch, &g.a_batch_stride, &g.b_batch_stride}) {
      Shape s = shape();
      v->assign(s.begin(), s.end());
    }
    for (int buf : {g.a, g.b, g.out})
      if (buffers[buf].dtype != g.dtype || buffers[buf].kind == BufferSpec::Kind::Scalar)
        r.bad("gemm " + g.name + " buffer " + std::to_string(buf) + " does not hold " +
              std::string(dtype_name(g.dtype)));
    if (buffers[g.out].kind != BufferSpec::Kind::Temp &&
        buffers[g.out].kind != BufferSpec::Kind::Output)
      r.bad("gemm " + g.name + " writes an input buffer");
    validate_gemm(g, buffers[g.a].numel, buffers[g.b].numel, buffers[g.out].numel, "cached plan");
    return g;
  }
  // Buffer ids are range-checked here; sizes and dtypes by validate_attention.
  AttentionStep attention(const std::vector<BufferSpec>& buffers) {
    const int nbuffers = static_cast<int>(buffers.size());
    AttentionStep a;
    a.name = std::string(r.bytes());
    a.kind = enumeration<AttentionStep::Kind>(2, "attention kind");
    a.dtype = dtype();
    a.causal = flag();
    a.scale = r.f64();
    for (int64_t* v : {&a.batch, &a.L, &a.S, &a.E, &a.Ev}) *v = r.i64();
    for (int* b : {&a.q, &a.k, &a.v, &a.out, &a.lse, &a.dout, &a.dsum, &a.dq, &a.dk, &a.dv})
      *b = id(-1, nbuffers, "attention buffer");
    for (int b : a.writes())
      if (buffers[b].kind != BufferSpec::Kind::Temp && buffers[b].kind != BufferSpec::Kind::Output)
        r.bad("attention " + a.name + " writes an input buffer");
    std::vector<int64_t> numels;
    std::vector<DType> dtypes;
    for (const BufferSpec& b : buffers) {
      numels.push_back(b.kind == BufferSpec::Kind::Scalar ? -1 : b.numel);
      dtypes.push_back(b.dtype);
    }
    validate_attention(a, numels, dtypes, "cached plan");
    return a;
  }
  CollectiveStep collective(const std::vector<BufferSpec>& buffers) {
    const int nbuffers = static_cast<int>(buffers.size());
    CollectiveStep c;
    c.name = std::string(r.bytes());
    c.op = op();
    c.dtype = dtype();
    c.reduce = static_cast<int>(r.i64());
    c.root = static_cast<int>(r.i64());
    c.world = static_cast<int>(r.i64());
    c.in = id(0, nbuffers, "collective input buffer");
    c.out = id(0, nbuffers, "collective output buffer");
    c.count = r.i64();
    c.group = static_cast<int>(r.i64());
    for (int b : {c.in, c.out})
      if (buffers[b].dtype != c.dtype || buffers[b].kind == BufferSpec::Kind::Scalar)
        r.bad("collective " + c.name + " buffer " + std::to_string(b) + " does not hold " +
              std::string(dtype_name(c.dtype)));
    if (buffers[c.out].kind != BufferSpec::Kind::Temp &&
        buffers[c.out].kind != BufferSpec::Kind::Output)
      r.bad("collective " + c.name + " writes an input buffer");
    try {
      validate_collective(c, buffers[c.in].numel, buffers[c.out].numel, "cached plan");
    } catch (const Error& e) {
      r.bad(e.what());
    }
    return c;
  }
  ConvStep conv(const std::vector<BufferSpec>& buffers) {
    const int nbuffers = static_cast<int>(buffers.size());
    ConvStep c;
    c.name = std::string(r.bytes());
    c.kind = enumeration<ConvStep::Kind>(3, "conv kind");
    c.dtype = dtype();
    c.a = id(0, nbuffers, "conv operand buffer");
    c.b = id(0, nbuffers, "conv operand buffer");
    c.bias = id(-1, nbuffers, "conv bias buffer");
    c.out = id(0, nbuffers, "conv output buffer");
    c.relu = flag();
    c.channels_last = r.u8();
    c.x = shape(), c.w = shape(), c.y = shape();
    Attrs a;
    a.ints = shape();
    try {
      c.params = ConvParams::from(Op::Conv2d, a);
    } catch (const Error& e) {
      r.bad(e.what());
    }
    for (int buf : {c.a, c.b, c.bias, c.out})
      if (buf >= 0 &&
          (buffers[buf].dtype != c.dtype || buffers[buf].kind == BufferSpec::Kind::Scalar))
        r.bad("conv " + c.name + " buffer " + std::to_string(buf) + " does not hold " +
              std::string(dtype_name(c.dtype)));
    if (buffers[c.out].kind != BufferSpec::Kind::Temp &&
        buffers[c.out].kind != BufferSpec::Kind::Output)
      r.bad("conv " + c.name + " writes an input buffer");
    validate_conv(c, buffers[c.a].numel, buffers[c.b].numel,
                  c.bias >= 0 ? buffers[c.bias].numel : 0, buffers[c.out].numel, "cached plan");
    return c;
  }
  Shape shape() {
    Shape s(r.count(8));
    for (auto& e : s) {
      e = r.i64();
      if (e < 0) r.bad("negative extent");
    }
    return s;
  }
  // A size-parameter field: stored plans are static (serialize_plan refuses symbolic ones).
  int static_param() {
    if (r.i64() != -1) r.bad("a size parameter in a stored plan");
    return -1;
  }
  void static_params() {
    if (r.count(8) != 0) r.bad("size parameters in a stored plan");
  }
  loop::Index index(int niexprs) {
    loop::Index ix;
    ix.offset = r.i64();
    ix.strides.resize(r.count(8));
    for (auto& s : ix.strides) s = r.i64();
    ix.general = id(-1, niexprs, "iexpr");
    static_param();
    static_params();
    return ix;
  }
  loop::Kernel kernel(int nbuffers) {
    loop::Kernel k;
    k.name = std::string(r.bytes());
    k.outer = shape();
    k.inner = shape();
    static_params();
    static_params();
    k.args.resize(r.count(19));
    for (auto& a : k.args) {
      a.buffer = id(0, nbuffers, "kernel buffer");
      a.dtype = dtype();
      a.numel = r.i64();
      if (a.numel < 0) r.bad("negative numel");
      a.scalar = flag();
      a.output = flag();
      static_param();
    }
    const int nargs = static_cast<int>(k.args.size());
    k.iexprs.resize(r.count(25));
    for (size_t i = 0; i < k.iexprs.size(); ++i) {
      auto& e = k.iexprs[i];
      e.kind = enumeration<loop::IExpr::Kind>(7, "iexpr kind");
      e.value = r.i64();
      e.a = id(-1, static_cast<int64_t>(i), "iexpr operand");
      e.b = id(-1, static_cast<int64_t>(i), "iexpr operand");
      e.hi = r.i64();
      if (e.kind == loop::IExpr::Kind::Value && (e.value < 0 || e.hi < 0)) r.bad("bad value index");
      static_param();
    }
    const int niexprs = static_cast<int>(k.iexprs.size());
    k.stages.resize(r.count(18));
    for (size_t s = 0; s < k.stages.size(); ++s) {
      auto& st = k.stages[s];
      st.kind = enumeration<loop::StageKind>(3, "stage kind");
      st.body.resize(r.count(67));
      for (size_t i = 0; i < st.body.size(); ++i) {
        auto& in = st.body[i];
        const int64_t n = static_cast<int64_t>(i);
        in.kind = enumeration<loop::IKind>(7, "instruction kind");
        in.op = op();
        in.dtype = dtype();
        in.a = id(-1, n, "operand");
        in.b = id(-1, n, "operand");
        in.c = id(-1, n, "operand");
        in.arg = id(-1, in.kind == loop::IKind::ReduceResult ? static_cast<int64_t>(s) : nargs,
                    "instruction arg");
        in.index = index(niexprs);
        in.value = r.f64();
        in.stream = r.i64();
        static_param();
        if (flag()) r.bad("a size parameter in a stored plan");
      }
      const int64_t nbody = static_cast<int64_t>(st.body.size());
      st.reduce_op = op();
      st.reduce_value = id(-1, nbody, "reduce value");
      st.acc_dtype = dtype();
      st.stores.resize(r.count(40));
      for (auto& s2 : st.stores) {
        s2.arg = id(0, nargs, "store arg");
        s2.index = index(niexprs);
        s2.value = id(0, nbody, "store value");
        s2.accumulate = flag();
      }
    }
    k.inplace.resize(r.count(16));
    for (auto& [in, out] : k.inplace) {
      in = id(0, nargs, "inplace input arg");
      out = id(0, nargs, "inplace output arg");
      if (k.args[in].output || !k.args[out].output || k.args[in].scalar || k.args[out].scalar)
        r.bad("kernel " + k.name + " pairs args " + std::to_string(in) + " and " +
              std::to_string(out) +
              " for an in-place update, which are not an input and an output");
    }
    return k;
  }
};

}  // namespace

std::string serialize_plan(const Plan& plan) {
  LT_CHECK(!plan.sym.symbolic(), ErrorKind::NotImplemented,
           "not implemented: storing a symbolic plan (the disk cache keeps static plans)");
  ByteWriter w;
  w.u32(kPlanFormat);
  w.u64(plan.buffers.size());
  for (const auto& b : plan.buffers) {
    w.u8(static_cast<uint8_t>(b.kind));
    w.u8(static_cast<uint8_t>(b.dtype));
    w.i64(b.numel);
    w.i64(b.input);
    w.i64(b.alias);
    w.i64(b.alias_offset);
  }
  w.u64(plan.kernels.size());
  for (const auto& k : plan.kernels) put_kernel(w, k);
  w.u64(plan.gemms.size());
  for (const auto& g : plan.gemms) put_gemm(w, g);
  w.u64(plan.convs.size());
  for (const auto& c : plan.convs) put_conv(w, c);
  w.u64(plan.attentions.size());
  for (const auto& a : plan.attentions) put_attention(w, a);
  w.u64(plan.collectives.size());
  for (const auto& c : plan.collectives) put_collective(w, c);
  w.u64(plan.steps.size());
  for (const auto& st : plan.steps) {
    w.u8(static_cast<uint8_t>(st.kind));
    w.i64(st.index);
  }
  w.u64(plan.output_buffers.size());
  for (int b : plan.output_buffers) w.i64(b);
  w.u64(plan.output_shapes.size());
  for (const auto& s : plan.output_shapes) put_shape(w, s);
  w.u64(plan.output_offsets.size());
  for (int64_t o : plan.output_offsets) w.i64(o);
  w.bytes(plan.grouping);
  w.u64(plan.donations.size());
  for (const Donation& d : plan.donations) {
    w.i64(d.output);
    w.i64(d.input);
  }
  return w.take();
}

Plan deserialize_plan(std::string_view bytes) {
  ByteReader r(bytes, "cached plan");
  Decoder d{r};
  uint32_t format = r.u32();
  if (format != kPlanFormat)
    r.bad("plan format " + std::to_string(format) + ", expected " + std::to_string(kPlanFormat));
  Plan plan;
  plan.buffers.resize(r.count(34));
  for (auto& b : plan.buffers) {
    b.kind = d.enumeration<BufferSpec::Kind>(4, "buffer kind");
    b.dtype = d.dtype();
    b.numel = r.i64();
    if (b.numel < 0) r.bad("negative buffer size");
    b.input = d.id(-1, INT32_MAX, "buffer input");
    b.alias = d.id(-1, INT32_MAX, "buffer alias");
    b.alias_offset = r.i64();
  }
  const int nbuffers = static_cast<int>(plan.buffers.size());
  // A buffer inside another: a Temp in range of a Temp or Output of its dtype that is no alias.
  for (const BufferSpec& b : plan.buffers) {
    if (b.alias < 0) continue;
    if (b.alias >= nbuffers) r.bad("buffer alias out of range");
    const BufferSpec& a = plan.buffers[static_cast<size_t>(b.alias)];
    if (b.kind != BufferSpec::Kind::Temp || a.alias >= 0 || a.dtype != b.dtype ||
        (a.kind != BufferSpec::Kind::Temp && a.kind != BufferSpec::Kind::Output) ||
        b.alias_offset < 0 || b.alias_offset > a.numel || b.numel > a.numel - b.alias_offset)
      r.bad("a buffer's alias does not hold it");
  }
  plan.kernels.resize(r.count(40));
  for (auto& k : plan.kernels) k = d.kernel(nbuffers);
  plan.gemms.resize(r.count(40));
  for (auto& g : plan.gemms) g = d.gemm(plan.buffers);
  plan.convs.resize(r.count(40));
  for (auto& c : plan.convs) c = d.conv(plan.buffers);
  plan.attentions.resize(r.count(100));
  for (auto& a : plan.attentions) a = d.attention(plan.buffers);
  plan.collectives.resize(r.count(50));
  for (auto& c : plan.collectives) c = d.collective(plan.buffers);
  auto count_of = [&](PlanStep::Kind k) {
    return k == PlanStep::Kind::Gemm         ? plan.gemms.size()
           : k == PlanStep::Kind::Conv       ? plan.convs.size()
           : k == PlanStep::Kind::Attention  ? plan.attentions.size()
           : k == PlanStep::Kind::Collective ? plan.collectives.size()
                                             : plan.kernels.size();
  };
  plan.steps.resize(r.count(9));
  for (auto& st : plan.steps) {
    st.kind = d.enumeration<PlanStep::Kind>(5, "step kind");
    st.index = d.id(0, count_of(st.kind), "step index");
  }
  // Every kernel, gemm, conv, attention and collective runs exactly once (an empty order means
  // the kernels in order).
  if (!plan.steps.empty() || !plan.gemms.empty() || !plan.convs.empty() ||
      !plan.attentions.empty() || !plan.collectives.empty()) {
    std::vector<int> seen[5] = {
        std::vector<int>(plan.kernels.size()), std::vector<int>(plan.gemms.size()),
        std::vector<int>(plan.convs.size()), std::vector<int>(plan.attentions.size()),
        std::vector<int>(plan.collectives.size())};
    for (const auto& st : plan.steps) seen[static_cast<int>(st.kind)][st.index]++;
    for (const auto& v : seen)
      for (int c : v)
        if (c != 1)
          r.bad(
              "the step order does not run every kernel, gemm, conv, attention and collective "
              "once");
  }
  plan.output_buffers.resize(r.count(8));
  for (auto& b : plan.output_buffers) b = d.id(0, nbuffers, "output buffer");
  plan.output_shapes.resize(r.count(8));
  for (auto& s : plan.output_shapes) s = d.shape();
  plan.output_offsets.resize(r.count(8));
  if (!plan.output_offsets.empty() && (plan.output_offsets.size() != plan.output_buffers.size() ||
                                       plan.output_shapes.size() != plan.output_buffers.size()))
    r.bad("output offsets for " + std::to_string(plan.output_offsets.size()) + " of " +
          std::to_string(plan.output_buffers.size()) + " outputs");
  for (size_t o = 0; o < plan.output_offsets.size(); ++o) {
    const int64_t off = r.i64();
    plan.output_offsets[o] = off;
    if (o >= plan.output_buffers.size() || o >= plan.output_shapes.size()) continue;
    const BufferSpec& b = plan.buffers[static_cast<size_t>(plan.output_buffers[o])];
    if (off < 0 || off > b.numel || numel(plan.output_shapes[o]) > b.numel - off)
      r.bad("output " + std::to_string(o) + " at offset " + std::to_string(off) +
            " does not lie inside its buffer of " + std::to_string(b.numel) + " elements");
  }
  plan.grouping = std::string(r.bytes());
  plan.donations.resize(r.count(16));
  for (Donation& dn : plan.donations) {
    dn.output = d.id(0, nbuffers, "donated output buffer");
    dn.input = d.id(0, nbuffers, "donated input buffer");
    const BufferSpec &o = plan.buffers[dn.output], &i = plan.buffers[dn.input];
    if (o.kind != BufferSpec::Kind::Output || i.kind != BufferSpec::Kind::Input ||
        o.dtype != i.dtype || o.numel != i.numel)
      r.bad("donation of buffer " + std::to_string(dn.input) + " to buffer " +
            std::to_string(dn.output) +
            " does not pair an input with an output of its dtype and size");
  }
  if (!r.done()) r.bad("trailing bytes");
  complete_plan(plan);  // the memory plan and kernel grouping are derived, so not stored
  return plan;
}

}  // namespace lt
