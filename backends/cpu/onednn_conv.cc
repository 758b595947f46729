#include "backends/cpu/onednn_conv.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backends/cpu/onednn_engine.h"
#include "ir/error.h"

namespace lt::cpu {

#ifdef LT_HAVE_ONEDNN

namespace {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;
constexpr auto kF32 = dnnl::memory::data_type::f32;

// Plain layouts only (the plan's buffers are contiguous NCHW / OIHW, or NHWC for a channels-last
// data operand, lowering/channels_last.h): oneDNN then reads and writes them in place, with no
// reorder around each call.
dnnl::memory::desc data_desc(const Shape& s, bool channels_last) {
  return {dims(s.begin(), s.end()), kF32, channels_last ? tag::nhwc : tag::nchw};
}
dnnl::memory::desc weight_desc(const Shape& w, int64_t groups, bool channels_last) {
  if (groups == 1) return {dims(w.begin(), w.end()), kF32, channels_last ? tag::ohwi : tag::oihw};
  return {dims{groups, w[0] / groups, w[1], w[2], w[3]}, kF32,
          channels_last ? tag::gohwi : tag::goihw};
}

}  // namespace

struct OnednnConv::Impl {
  ConvStep::Kind kind;
  dnnl::memory::desc a, b, bias, out;
  dnnl::primitive prim;
};

bool onednn_conv_available() { return true; }

OnednnConv::OnednnConv(const ConvStep& c) {
  if (c.dtype != DType::Float32)
    fail(ErrorKind::NotImplemented, "not implemented: ", op_name(c.op()), " in ",
         dtype_name(c.dtype), " on cpu (oneDNN: float32 only)");
  const ConvParams& p = c.params;
  std::vector<int64_t> key = {static_cast<int64_t>(c.kind), c.bias >= 0, c.relu, c.channels_last};
  for (const Shape* s : {&c.x, &c.w, &c.y}) key.insert(key.end(), s->begin(), s->end());
  const IntList ints = p.ints();
  key.insert(key.end(), ints.begin(), ints.end());
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::shared_ptr<const Impl>> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = cache[key];
  if (!slot) {
    auto impl = std::make_shared<Impl>();
    impl->kind = c.kind;
    const auto x = data_desc(c.x, c.x_channels_last()), y = data_desc(c.y, c.y_channels_last());
    const auto w = weight_desc(c.w, p.groups, c.w_channels_last());
    const dnnl::memory::desc bias =
        c.bias >= 0 ? dnnl::memory::desc({c.w[0]}, kF32, tag::x) : dnnl::memory::desc();
    // oneDNN's dilation counts the gaps between taps (PyTorch's dilation - 1); right padding as
    // PyTorch's oneDNN path passes it, symmetric (the output size is the floor of the same
    // formula).
    dims strides = {p.stride[0], p.stride[1]};
    const dims dilates = {p.dilation[0] - 1, p.dilation[1] - 1}, pad = {p.padding[0], p.padding[1]};
    // Along a dim with one output the stride only has to step past the input; oneDNN refuses
    // strides beyond its size limits (PyTorch computes conv2d(stride=2**62)), so such a stride
    // becomes the smallest that still gives one output: same windows, same result.
    for (int i = 0; i < 2; ++i) {
      // Padded input minus the window's extent, plus one: the first stride that leaves no room
      // for a second window.
      const int64_t past = c.x[2 + i] + 2 * p.padding[i] - (c.w[2 + i] - 1) * p.dilation[i];
      if (c.y[2 + i] == 1) strides[i] = std::min<int64_t>(strides[i], std::max<int64_t>(1, past));
    }
    const auto algo = dnnl::algorithm::convolution_direct;
    try {
      const auto prop = c.kind == ConvStep::Kind::Forward ? dnnl::prop_kind::forward_inference
                                                          : dnnl::prop_kind::forward_training;
      dnnl::convolution_forward::desc fd(prop, algo, x, w, bias, y, strides, dilates, pad, pad);
      dnnl::primitive_attr attr;
      if (c.relu) {
        dnnl::post_ops ops;
        ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
        attr.set_post_ops(ops);
      }
      dnnl::convolution_forward::primitive_desc fpd(fd, attr, onednn_engine());
      switch (c.kind) {
        case ConvStep::Kind::Forward:
          impl->a = x, impl->b = w, impl->bias = bias, impl->out = y;
          impl->prim = dnnl::convolution_forward(fpd);
          break;
        case ConvStep::Kind::GradInput: {
          dnnl::convolution_backward_data::desc bd(algo, x, w, y, strides, dilates, pad, pad);
          impl->a = y, impl->b = w, impl->out = x;
          impl->prim = dnnl::convolution_backward_data(
              dnnl::convolution_backward_data::primitive_desc(bd, onednn_engine(), fpd));
          break;
        }
        case ConvStep::Kind::GradWeight: {
          dnnl::convolution_backward_weights::desc bd(algo, x, w, y, strides, dilates, pad, pad);
          impl->a = x, impl->b = y, impl->out = w;
          impl->prim = dnnl::convolution_backward_weights(
              dnnl::convolution_backward_weights::primitive_desc(bd, onednn_engine(), fpd));
          break;
        }
      }
    } catch (const dnnl::error& e) {
      fail(ErrorKind::NotImplemented, "not implemented: ", op_name(c.op()), " ", c.name, " (input ",
           shape_str(c.x), ", weight ", shape_str(c.w), ") on cpu: oneDNN: ", e.what());
    }
    slot = std::move(impl);
  }
  impl_ = slot;
}

void OnednnConv::run(const void* a, const void* b, const void* bias, void* out) const {
  dnnl::stream& stream = onednn_stream();
  const Impl& m = *impl_;
  auto mem = [](const dnnl::memory::desc& d, const void* p) {
    return dnnl::memory(d, onednn_engine(), const_cast<void*>(p));
  };
  std::unordered_map<int, dnnl::memory> args;
  switch (m.kind) {
    case ConvStep::Kind::Forward:
      args = {{DNNL_ARG_SRC, mem(m.a, a)},
              {DNNL_ARG_WEIGHTS, mem(m.b, b)},
              {DNNL_ARG_DST, mem(m.out, out)}};
      if (bias) args.emplace(DNNL_ARG_BIAS, mem(m.bias, bias));
      break;
    case ConvStep::Kind::GradInput:
      args = {{DNNL_ARG_DIFF_DST, mem(m.a, a)},
              {DNNL_ARG_WEIGHTS, mem(m.b, b)},
              {DNNL_ARG_DIFF_SRC, mem(m.out, out)}};
      break;
    case ConvStep::Kind::GradWeight:
      args = {{DNNL_ARG_SRC, mem(m.a, a)},
              {DNNL_ARG_DIFF_DST, mem(m.b, b)},
              {DNNL_ARG_DIFF_WEIGHTS, mem(m.out, out)}};
      break;
  }
  m.prim.execute(stream, args);
  stream.wait();
}

#else  // !LT_HAVE_ONEDNN

struct OnednnConv::Impl {};

bool onednn_conv_available() { return false; }

OnednnConv::OnednnConv(const ConvStep& c) {
  fail(ErrorKind::NotImplemented, "not implemented: ", op_name(c.op()), " ", c.name,
       " on cpu (built without oneDNN)");
}

void OnednnConv::run(const void*, const void*, const void*, void*) const {}

#endif

OnednnConv::~OnednnConv() = default;
OnednnConv::OnednnConv(OnednnConv&&) noexcept = default;

}  // namespace lt::cpu
