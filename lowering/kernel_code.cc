#include "lowering/kernel_code.h"

namespace lt {

namespace {

void put_index(ByteWriter& w, const loop::Index& ix) {
  w.i64(ix.offset);
  w.u64(ix.strides.size());
  for (int64_t s : ix.strides) w.i64(s);
  w.i64(ix.general);
  w.i64(ix.offset_param);
  w.u64(ix.stride_params.size());
  for (int p : ix.stride_params) w.i64(p);
}

void put_params(ByteWriter& w, const std::vector<int>& params) {
  w.u64(params.size());
  for (int p : params) w.i64(p);
}

}  // namespace

void put_kernel(ByteWriter& w, const loop::Kernel& k) {
  w.bytes(k.name);
  put_shape(w, k.outer);
  put_shape(w, k.inner);
  put_params(w, k.outer_params);
  put_params(w, k.inner_params);
  w.u64(k.args.size());
  for (const auto& a : k.args) {
    w.i64(a.buffer);
    w.u8(static_cast<uint8_t>(a.dtype));
    w.i64(a.numel);
    w.u8(a.scalar);
    w.u8(a.output);
    w.i64(a.numel_param);
  }
  w.u64(k.iexprs.size());
  for (const auto& e : k.iexprs) {
    w.u8(static_cast<uint8_t>(e.kind));
    w.i64(e.value);
    w.i64(e.a);
    w.i64(e.b);
    w.i64(e.hi);
    w.i64(e.param);
  }
  w.u64(k.stages.size());
  for (const auto& st : k.stages) {
    w.u8(static_cast<uint8_t>(st.kind));
    w.u64(st.body.size());
    for (const auto& in : st.body) {
      w.u8(static_cast<uint8_t>(in.kind));
      w.u8(static_cast<uint8_t>(in.op));
      w.u8(static_cast<uint8_t>(in.dtype));
      w.i64(in.a);
      w.i64(in.b);
      w.i64(in.c);
      w.i64(in.arg);
      put_index(w, in.index);
      w.f64(in.value);
      w.i64(in.stream);
      w.i64(in.param);
      w.u8(in.param_reciprocal);
    }
    w.u8(static_cast<uint8_t>(st.reduce_op));
    w.i64(st.reduce_value);
    w.u8(static_cast<uint8_t>(st.acc_dtype));
    w.u64(st.stores.size());
    for (const auto& s : st.stores) {
      w.i64(s.arg);
      put_index(w, s.index);
      w.i64(s.value);
      w.u8(s.accumulate);
    }
  }
  w.u64(k.inplace.size());
  for (auto [in, out] : k.inplace) {
    w.i64(in);
    w.i64(out);
  }
}

std::string kernel_code(const loop::Kernel& k) {
  loop::Kernel anon = k;
  anon.name.clear();
  for (size_t a = 0; a < anon.args.size(); ++a) anon.args[a].buffer = static_cast<int>(a);
  ByteWriter w;
  put_kernel(w, anon);
  return w.take();
}

}  // namespace lt
