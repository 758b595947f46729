// The free functions of runtime/ops.h: creation, elementwise, composites. The Python layer
// (lazytensor/_creation.py, lazytensor/_functions.py) parses PyTorch-style arguments and calls
// these.
#include <optional>
#include <string>
#include <vector>

#include "autograd/autograd.h"
#include "bindings.h"
#include "nn/optim.h"
#include "nn/recurrent.h"
#include "runtime/attention.h"
#include "runtime/index_check.h"
#include "runtime/windows.h"

namespace lt::python {
namespace {

template <typename FT, typename FS>
void def_binary(py::module_& m, const char* name, FT tensor_fn, FS scalar_fn) {
  // The number overload first: see bind_binary in tensor_bindings.cc.
  m.def(name, scalar_fn, py::arg("input"), py::arg("other"));
  m.def(name, tensor_fn, py::arg("input"), py::arg("other"));
}

Tensor or_undefined(const std::optional<Tensor>& t) { return t ? *t : Tensor(); }

}  // namespace

void init_ops(py::module_& m) {
  // Creation. The Python layer always passes dtype and device explicitly.
  m.def("empty", &lt::empty, py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("zeros", &lt::zeros, py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("ones", &lt::ones, py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("full", &lt::full, py::arg("shape"), py::arg("fill_value"), py::arg("dtype"),
        py::arg("device"));
  m.def("scalar_tensor", &lt::scalar_tensor, py::arg("value"), py::arg("dtype"), py::arg("device"));
  // lazytensor.optim.Adam's update: the C++ optimizer's rule (nn/optim.h).
  m.def(
      "_adam_update",
      [](lt::Tensor& p, const lt::Tensor& grad, lt::Tensor& exp_avg, lt::Tensor& exp_avg_sq,
         std::optional<lt::Tensor> max_exp_avg_sq, lt::Tensor& step, double lr, double beta1,
         double beta2, double eps, double weight_decay, bool decoupled) {
        lt::NoGradGuard no_grad;
        lt::optim::adam_update(p, grad, exp_avg, exp_avg_sq,
                               max_exp_avg_sq ? &*max_exp_avg_sq : nullptr, step,
                               {lr, beta1, beta2, eps, weight_decay, decoupled});
      },
      py::arg("param"), py::arg("grad"), py::arg("exp_avg"), py::arg("exp_avg_sq"),
      py::arg("max_exp_avg_sq"), py::arg("step"), py::arg("lr"), py::arg("beta1"), py::arg("beta2"),
      py::arg("eps"), py::arg("weight_decay"), py::arg("decoupled"));
  // A parameter group's Adam updates in one call (nn/optim.h adam_update_many): lists in, the
  // tensors updated in place as _adam_update does.
  m.def(
      "_adam_update_many",
      [](std::vector<lt::Tensor> params, const std::vector<lt::Tensor>& grads,
         std::vector<lt::Tensor> exp_avgs, std::vector<lt::Tensor> exp_avg_sqs,
         std::vector<lt::Tensor> max_exp_avg_sqs, std::vector<lt::Tensor> steps, double lr,
         double beta1, double beta2, double eps, double weight_decay, bool decoupled) {
        lt::NoGradGuard no_grad;
        lt::optim::adam_update_many(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps,
                                    {lr, beta1, beta2, eps, weight_decay, decoupled});
      },
      py::arg("params"), py::arg("grads"), py::arg("exp_avgs"), py::arg("exp_avg_sqs"),
      py::arg("max_exp_avg_sqs"), py::arg("steps"), py::arg("lr"), py::arg("beta1"),
      py::arg("beta2"), py::arg("eps"), py::arg("weight_decay"), py::arg("decoupled"));
  m.def("arange", &lt::arange, py::arg("start"), py::arg("end"), py::arg("step"), py::arg("dtype"),
        py::arg("device"));
  m.def("linspace", &lt::linspace, py::arg("start"), py::arg("end"), py::arg("steps"),
        py::arg("dtype"), py::arg("device"));
  m.def("eye", &lt::eye, py::arg("n"), py::arg("m"), py::arg("dtype"), py::arg("device"));
  m.def("rand", &lt::rand, py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("randn", &lt::randn, py::arg("shape"), py::arg("dtype"), py::arg("device"));
  m.def("randint", &lt::randint, py::arg("low"), py::arg("high"), py::arg("shape"),
        py::arg("dtype"), py::arg("device"));
  m.def("zeros_like", &lt::zeros_like, py::arg("input"));
  m.def("ones_like", &lt::ones_like, py::arg("input"));
  m.def("full_like", &lt::full_like, py::arg("input"), py::arg("fill_value"));
  m.def("rand_like", &lt::rand_like, py::arg("input"));
  m.def("randn_like", &lt::randn_like, py::arg("input"));

  // Elementwise binary ops: a tensor or a Python number on the right.
  def_binary(
      m, "add", [](const Tensor& a, const Tensor& b) { return add(a, b); },
      [](const Tensor& a, Scalar b) { return add(a, b); });
  def_binary(
      m, "sub", [](const Tensor& a, const Tensor& b) { return sub(a, b); },
      [](const Tensor& a, Scalar b) { return sub(a, b); });
  def_binary(
      m, "mul", [](const Tensor& a, const Tensor& b) { return mul(a, b); },
      [](const Tensor& a, Scalar b) { return mul(a, b); });
  def_binary(
      m, "div", [](const Tensor& a, const Tensor& b) { return div(a, b); },
      [](const Tensor& a, Scalar b) { return div(a, b); });
  def_binary(
      m, "pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
      [](const Tensor& a, Scalar b) { return pow(a, b); });
  def_binary(
      m, "eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
      [](const Tensor& a, Scalar b) { return eq(a, b); });
  def_binary(
      m, "ne", [](const Tensor& a, const Tensor& b) { return ne(a, b); },
      [](const Tensor& a, Scalar b) { return ne(a, b); });
  def_binary(
      m, "lt", [](const Tensor& a, const Tensor& b) { return lt::lt(a, b); },
      [](const Tensor& a, Scalar b) { return lt::lt(a, b); });
  def_binary(
      m, "le", [](const Tensor& a, const Tensor& b) { return le(a, b); },
      [](const Tensor& a, Scalar b) { return le(a, b); });
  def_binary(
      m, "gt", [](const Tensor& a, const Tensor& b) { return gt(a, b); },
      [](const Tensor& a, Scalar b) { return gt(a, b); });
  def_binary(
      m, "ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
      [](const Tensor& a, Scalar b) { return ge(a, b); });
  def_binary(
      m, "floor_divide", [](const Tensor& a, const Tensor& b) { return floor_divide(a, b); },
      [](const Tensor& a, Scalar b) { return floor_divide(a, b); });
  def_binary(
      m, "remainder", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
      [](const Tensor& a, Scalar b) { return remainder(a, b); });
  def_binary(
      m, "fmod", [](const Tensor& a, const Tensor& b) { return fmod(a, b); },
      [](const Tensor& a, Scalar b) { return fmod(a, b); });
  def_binary(
      m, "bitwise_and", [](const Tensor& a, const Tensor& b) { return bitwise_and(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_and(a, b); });
  def_binary(
      m, "bitwise_or", [](const Tensor& a, const Tensor& b) { return bitwise_or(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_or(a, b); });
  def_binary(
      m, "bitwise_xor", [](const Tensor& a, const Tensor& b) { return bitwise_xor(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_xor(a, b); });
  def_binary(
      m, "bitwise_left_shift",
      [](const Tensor& a, const Tensor& b) { return bitwise_left_shift(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_left_shift(a, b); });
  def_binary(
      m, "bitwise_right_shift",
      [](const Tensor& a, const Tensor& b) { return bitwise_right_shift(a, b); },
      [](const Tensor& a, Scalar b) { return bitwise_right_shift(a, b); });
  m.def("bitwise_not", &lt::bitwise_not, py::arg("input"));
  // Reflected forms (a number on the left): rfloor_divide(x, n) is n // x, and so on.
  m.def("rfloor_divide", &lt::rfloor_divide, py::arg("input"), py::arg("other"));
  m.def("rremainder", &lt::rremainder, py::arg("input"), py::arg("other"));
  m.def("rbitwise_left_shift", &lt::rbitwise_left_shift, py::arg("input"), py::arg("other"));
  m.def("rbitwise_right_shift", &lt::rbitwise_right_shift, py::arg("input"), py::arg("other"));
  m.def("rsub", &lt::rsub, py::arg("input"), py::arg("other"));  // other - input
  m.def("rdiv", &lt::rdiv, py::arg("input"), py::arg("other"));  // other / input
  m.def("rpow", &lt::rpow, py::arg("input"), py::arg("other"));  // other ** input
  m.def("maximum", &lt::maximum, py::arg("input"), py::arg("other"));
  m.def("minimum", &lt::minimum, py::arg("input"), py::arg("other"));
  m.def("logical_and", &lt::logical_and, py::arg("input"), py::arg("other"));
  m.def("logical_or", &lt::logical_or, py::arg("input"), py::arg("other"));
  m.def("logical_not", &lt::logical_not, py::arg("input"));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&lt::where),
        py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, Scalar>(&lt::where),
        py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def("where", py::overload_cast<const Tensor&, Scalar, const Tensor&>(&lt::where),
        py::arg("condition"), py::arg("input"), py::arg("other"));
  m.def("cast", &lt::cast, py::arg("input"), py::arg("dtype"));
  m.def("matmul", &lt::matmul, py::arg("input"), py::arg("other"));

  // Slicing, concatenation and index-driven ops (runtime/indexing.h); the Python layer
  // (lazytensor/_indexing.py) builds tensor[...] and PyTorch's signatures from these.
  m.def("cat", &lt::cat, py::arg("tensors"), py::arg("dim"));
  m.def("stack", &lt::stack, py::arg("tensors"), py::arg("dim"));
  m.def("split", &lt::split, py::arg("input"), py::arg("split_size"), py::arg("dim"));
  m.def("chunk", &lt::chunk, py::arg("input"), py::arg("chunks"), py::arg("dim"));
  m.def("slice", &lt::slice, py::arg("input"), py::arg("dim"), py::arg("start"), py::arg("end"),
        py::arg("step") = 1);
  m.def("narrow", &lt::narrow, py::arg("input"), py::arg("dim"), py::arg("start"),
        py::arg("length"));
  m.def("select", &lt::select, py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("flip", &lt::flip, py::arg("input"), py::arg("dims"));
  m.def("slice_prim", &lt::slice_prim, py::arg("input"), py::arg("start_step_size"));
  m.def("pad_dim", &lt::pad_dim, py::arg("input"), py::arg("dim"), py::arg("before"),
        py::arg("after"), py::arg("value") = 0.0);
  m.def("pad", &lt::pad, py::arg("input"), py::arg("pads"), py::arg("value") = 0.0);
  m.def("positions", &lt::positions, py::arg("n"), py::arg("device"));

  // An LSTM direction's time loop (nn/recurrent.h) for lazytensor.nn.LSTM: (ys, h, c).
  m.def(
      "_lstm_direction",
      [](const Tensor& gis, const Tensor& h0, const Tensor& c0, const Tensor& w_hh,
         const std::optional<Tensor>& b_hh, bool reverse) {
        LstmRun r = lt::lstm_direction(gis, h0, c0, w_hh, or_undefined(b_hh), reverse);
        return py::make_tuple(r.ys, r.h, r.c);
      },
      py::arg("gis"), py::arg("h0"), py::arg("c0"), py::arg("w_hh"), py::arg("b_hh"),
      py::arg("reverse"));
  m.def("one_hot", &lt::one_hot, py::arg("input"), py::arg("num_classes") = -1);
  m.def("gather", &lt::gather, py::arg("input"), py::arg("dim"), py::arg("index"));
  // The primitive without the index range check (callers that make every index valid).
  m.def("_gather_prim", &lt::gather_node, py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("scatter_add", &lt::scatter_add, py::arg("input"), py::arg("dim"), py::arg("index"),
        py::arg("src"));
  m.def("index_select", &lt::index_select, py::arg("input"), py::arg("dim"), py::arg("index"));
  m.def("embedding", &lt::embedding, py::arg("weight"), py::arg("index"));
  // Python indexing's range check of an index tensor, deferred to the sync on lazy (index_check.h).
  m.def(
      "_check_index",
      [](const Tensor& index, int64_t lo, int64_t hi, const std::string& op, int64_t dim,
         const Shape& input_shape, const Tensor& anchor) {
        check_index_values({op, lo, hi, dim, input_shape}, index, anchor);
      },
      py::arg("index"), py::arg("lo"), py::arg("hi"), py::arg("op"), py::arg("dim"),
      py::arg("input_shape"), py::arg("anchor"),
      py::call_guard<py::gil_scoped_release>());  // eager: reads the values
  m.def(
      "_check_class_targets",
      [](const Tensor& target, int64_t classes, int64_t ignore_index, const std::string& fn,
         const Shape& input_shape) {
        check_class_targets(target, classes, ignore_index, fn.c_str(), input_shape);
      },
      py::arg("target"), py::arg("classes"), py::arg("ignore_index"), py::arg("fn"),
      py::arg("input_shape"), py::call_guard<py::gil_scoped_release>());
  m.def("masked_fill", &lt::masked_fill, py::arg("input"), py::arg("mask"), py::arg("value"));
  m.def("tril", &lt::tril, py::arg("input"), py::arg("diagonal") = 0);
  m.def("triu", &lt::triu, py::arg("input"), py::arg("diagonal") = 0);
  m.def("cumsum", &lt::cumsum, py::arg("input"), py::arg("dim"));
  m.def("argmax", &lt::argmax, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);
  m.def("argmin", &lt::argmin, py::arg("input"), py::arg("dim") = py::none(),
        py::arg("keepdim") = false);

  // Composites: one op in the trace, decomposed and fused by lowering.
  m.def("gelu", &lt::gelu, py::arg("input"), py::arg("approximate") = "none");
  m.def("silu", &lt::silu, py::arg("input"));
  m.def(
      "layer_norm",
      [](const Tensor& x, std::vector<int64_t> normalized_shape,
         const std::optional<Tensor>& weight, const std::optional<Tensor>& bias, double eps) {
        return layer_norm(x, std::move(normalized_shape), or_undefined(weight), or_undefined(bias),
                          eps);
      },
      py::arg("input"), py::arg("normalized_shape"), py::arg("weight") = py::none(),
      py::arg("bias") = py::none(), py::arg("eps") = 1e-5);

  // Attention as one autograd node with the flash-attention backward (runtime/attention.h).
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v, const std::optional<Tensor>& mask,
         double dropout_p, bool is_causal, std::optional<double> scale, bool enable_gqa) {
        return scaled_dot_product_attention(q, k, v, or_undefined(mask), dropout_p, is_causal,
                                            scale, enable_gqa);
      },
      py::arg("query"), py::arg("key"), py::arg("value"), py::arg("attn_mask") = py::none(),
      py::arg("dropout_p") = 0.0, py::arg("is_causal") = false, py::arg("scale") = py::none(),
      py::arg("enable_gqa") = false);

  // Convolution and pooling over sliding windows (runtime/windows.h).
  m.def("sliding_window", &lt::sliding_window, py::arg("input"), py::arg("dim"), py::arg("kernel"),
        py::arg("stride"), py::arg("dilation") = 1);
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b,
         std::vector<int64_t> stride, std::vector<int64_t> padding, std::vector<int64_t> dilation,
         int64_t groups) {
        return conv2d(x, w, or_undefined(b), std::move(stride), std::move(padding),
                      std::move(dilation), groups);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride"),
      py::arg("padding"), py::arg("dilation"), py::arg("groups") = 1);
  m.def(
      "conv1d",
      [](const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, int64_t stride,
         int64_t padding, int64_t dilation, int64_t groups) {
        return conv1d(x, w, or_undefined(b), stride, padding, dilation, groups);
      },
      py::arg("input"), py::arg("weight"), py::arg("bias") = py::none(), py::arg("stride"),
      py::arg("padding"), py::arg("dilation"), py::arg("groups") = 1);
  m.def("max_pool2d", &lt::max_pool2d, py::arg("input"), py::arg("kernel_size"), py::arg("stride"),
        py::arg("padding"), py::arg("dilation"), py::arg("ceil_mode") = false);
  m.def("avg_pool2d", &lt::avg_pool2d, py::arg("input"), py::arg("kernel_size"), py::arg("stride"),
        py::arg("padding"), py::arg("ceil_mode") = false, py::arg("count_include_pad") = true,
        py::arg("divisor_override") = py::none());
  m.def("adaptive_avg_pool2d", &lt::adaptive_avg_pool2d, py::arg("input"), py::arg("output_size"));
}

}  // namespace lt::python
