#include "backends/cuda/cudnn_conv.h"

#include <dlfcn.h>

#include <climits>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "backends/cuda/cudnn_api.h"
#include "ir/error.h"

namespace lt {
namespace {

// cuDNN 9 is a shim (libcudnn.so.9) that opens its sub-libraries (graph, ops, cnn, engines) by
// name. Loaded from a directory not on the loader's path (the pip wheel's), those names would not
// resolve; loading the siblings first by path makes the later lookups find them (glibc matches
// an already loaded library by its soname).
void preload_siblings(const std::filesystem::path& shim) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(shim.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("libcudnn_", 0) == 0 && name.find(".so.9") != std::string::npos)
      dlopen(e.path().c_str(), RTLD_LAZY | RTLD_LOCAL);
  }
}

struct Loaded {
  cudnn::Api api{};
  std::string error;
  size_t version = 0;
};

const Loaded& load() {
  static Loaded l;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char* e = std::getenv("LT_CUDNN_LIBRARY"); e && *e) names.push_back(e);
    names.push_back("libcudnn.so.9");
#ifdef LT_CUDNN_DIR
    names.push_back(std::string(LT_CUDNN_DIR) + "/libcudnn.so.9");
#endif
    void* h = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      if (name.front() == '/' && std::filesystem::exists(name)) preload_siblings(name);
      if ((h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL))) break;
      tried += (tried.empty() ? "" : ", ") + name;
    }
    if (!h) {
      l.error = "cannot load cuDNN (tried " + tried + "; set LT_CUDNN_LIBRARY to libcudnn.so.9)";
      return;
    }
    std::string missing;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) missing += (missing.empty() ? "" : ", ") + std::string(name);
    };
    cudnn::Api& a = l.api;
    sym(a.create, "cudnnCreate");
    sym(a.destroy, "cudnnDestroy");
    sym(a.set_stream, "cudnnSetStream");
    sym(a.get_version, "cudnnGetVersion");
    sym(a.error_string, "cudnnGetErrorString");
    sym(a.create_tensor, "cudnnCreateTensorDescriptor");
    sym(a.set_tensor_4d, "cudnnSetTensor4dDescriptor");
    sym(a.destroy_tensor, "cudnnDestroyTensorDescriptor");
    sym(a.create_filter, "cudnnCreateFilterDescriptor");
    sym(a.set_filter_4d, "cudnnSetFilter4dDescriptor");
    sym(a.destroy_filter, "cudnnDestroyFilterDescriptor");
    sym(a.create_conv, "cudnnCreateConvolutionDescriptor");
    sym(a.set_conv_2d, "cudnnSetConvolution2dDescriptor");
    sym(a.set_conv_groups, "cudnnSetConvolutionGroupCount");
    sym(a.set_conv_math, "cudnnSetConvolutionMathType");
    sym(a.destroy_conv, "cudnnDestroyConvolutionDescriptor");
    sym(a.fwd_algos, "cudnnGetConvolutionForwardAlgorithm_v7");
    sym(a.fwd_workspace, "cudnnGetConvolutionForwardWorkspaceSize");
    sym(a.forward, "cudnnConvolutionForward");
    sym(a.bwd_data_algos, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    sym(a.bwd_data_workspace, "cudnnGetConvolutionBackwardDataWorkspaceSize");
    sym(a.backward_data, "cudnnConvolutionBackwardData");
    sym(a.bwd_filter_algos, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    sym(a.bwd_filter_workspace, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
    sym(a.backward_filter, "cudnnConvolutionBackwardFilter");
    sym(a.add_tensor, "cudnnAddTensor");
    sym(a.create_activation, "cudnnCreateActivationDescriptor");
    sym(a.set_activation, "cudnnSetActivationDescriptor");
    sym(a.destroy_activation, "cudnnDestroyActivationDescriptor");
    sym(a.activation_forward, "cudnnActivationForward");
    if (!missing.empty()) {
      l.error = "cuDNN lacks " + missing;
      return;
    }
    l.version = a.get_version();
    if (l.version < 8000) l.error = "cuDNN " + std::to_string(l.version) + " is older than 8.0";
  });
  return l;
}

const cudnn::Api& api() { return load().api; }

void check(cudnn::Status s, const char* call, const std::string& step = "") {
  if (s == cudnn::kSuccess) return;
  fail(ErrorKind::Runtime, "cuDNN error in ", call, step.empty() ? "" : " (conv " + step + ")",
       ": ", api().error_string ? api().error_string(s) : "", " (status ", s, ")");
}

int data_type(DType t) {
  switch (t) {
    case DType::Float32:
      return cudnn::kFloat;
    case DType::Float64:
      return cudnn::kDouble;
    case DType::Float16:
      return cudnn::kHalf;
    case DType::BFloat16:
      return cudnn::kBFloat16;
    default:
      fail(ErrorKind::NotImplemented, "not implemented: conv in ", dtype_name(t), " on cuda");
  }
}

// cuDNN's descriptors take int extents, and its legacy kernels index tensors with 32 bits.
int as_int(int64_t v, const ConvStep& s) {
  if (v < 0 || v > INT_MAX)
    fail(ErrorKind::NotImplemented, "not implemented: conv ", s.name, " with extent ", v,
         " beyond 32 bits on cuda");
  return static_cast<int>(v);
}

// Largest workspace an algorithm may ask for; cuDNN's heuristics order algorithms by expected
// speed, and the first one within this bound is taken.
constexpr size_t kMaxWorkspace = size_t{512} << 20;

}  // namespace

bool cudnn_available() { return load().error.empty(); }
std::string cudnn_error() { return load().error; }
size_t cudnn_version() { return load().error.empty() ? load().version : 0; }

CudnnHandle::CudnnHandle(CUstream stream) {
  if (!cudnn_available())
    fail(ErrorKind::NotImplemented, "not implemented: conv on cuda: ", cudnn_error());
  cudnn::Handle h = nullptr;
  check(api().create(&h), "cudnnCreate");
  handle_ = h;
  check(api().set_stream(h, stream), "cudnnSetStream");
}

CudnnHandle::~CudnnHandle() {
  if (handle_) api().destroy(static_cast<cudnn::Handle>(handle_));
}

CudnnConv::CudnnConv(std::shared_ptr<const CudnnHandle> handle, const ConvStep& step)
    : handle_(std::move(handle)), step_(step) {
  const cudnn::Api& a = api();
  const int dt = data_type(step.dtype);
  for (const Shape* s : {&step.x, &step.y, &step.w})
    if (s->size() != 4 || numel(*s) > INT_MAX)
      fail(ErrorKind::NotImplemented, "not implemented: conv ", step.name, " with operand ",
           shape_str(*s), " (over 2^31 elements) on cuda");
  // Dims are always N, C, H, W; a channels-last operand (lowering/channels_last.h) is NHWC memory.
  auto tensor = [&](void** out, const Shape& s, bool channels_last = false) {
    cudnn::TensorDesc d = nullptr;
    check(a.create_tensor(&d), "cudnnCreateTensorDescriptor", step.name);
    *out = d;
    check(a.set_tensor_4d(d, channels_last ? cudnn::kNHWC : cudnn::kNCHW, dt, as_int(s[0], step),
                          as_int(s[1], step), as_int(s[2], step), as_int(s[3], step)),
          "cudnnSetTensor4dDescriptor", step.name);
  };
  try {
    tensor(&x_, step.x, step.x_channels_last());
    tensor(&y_, step.y, step.y_channels_last());
    cudnn::FilterDesc f = nullptr;
    check(a.create_filter(&f), "cudnnCreateFilterDescriptor", step.name);
    w_ = f;
    check(a.set_filter_4d(f, dt, step.w_channels_last() ? cudnn::kNHWC : cudnn::kNCHW,
                          as_int(step.w[0], step), as_int(step.w[1], step), as_int(step.w[2], step),
                          as_int(step.w[3], step)),
          "cudnnSetFilter4dDescriptor", step.name);
    cudnn::ConvDesc c = nullptr;
    check(a.create_conv(&c), "cudnnCreateConvolutionDescriptor", step.name);
    conv_ = c;
    const ConvParams& p = step.params;
    check(a.set_conv_2d(c, as_int(p.padding[0], step), as_int(p.padding[1], step),
                        as_int(p.stride[0], step), as_int(p.stride[1], step),
                        as_int(p.dilation[0], step), as_int(p.dilation[1], step),
                        cudnn::kCrossCorrelation,
                        step.dtype == DType::Float64 ? cudnn::kDouble : cudnn::kFloat),
          "cudnnSetConvolution2dDescriptor", step.name);
    check(a.set_conv_groups(c, as_int(p.groups, step)), "cudnnSetConvolutionGroupCount", step.name);
    if (step.bias >= 0) tensor(&bias_, {1, step.w[0], 1, 1});
    if (step.relu) {
      cudnn::ActivationDesc r = nullptr;
      check(a.create_activation(&r), "cudnnCreateActivationDescriptor", step.name);
      relu_ = r;
      // NaN stays NaN, as PyTorch's relu (and our maximum(x, 0)) keeps it.
      check(a.set_activation(r, cudnn::kRelu, cudnn::kPropagateNan, 0.0),
            "cudnnSetActivationDescriptor", step.name);
    }
  } catch (...) {
    release();  // a throwing constructor runs no destructor
    throw;
  }
}

CudnnConv::~CudnnConv() { release(); }

void CudnnConv::release() {
  const cudnn::Api& a = api();
  if (x_) a.destroy_tensor(static_cast<cudnn::TensorDesc>(x_));
  if (y_) a.destroy_tensor(static_cast<cudnn::TensorDesc>(y_));
  if (bias_) a.destroy_tensor(static_cast<cudnn::TensorDesc>(bias_));
  if (w_) a.destroy_filter(static_cast<cudnn::FilterDesc>(w_));
  if (conv_) a.destroy_conv(static_cast<cudnn::ConvDesc>(conv_));
  if (relu_) a.destroy_activation(static_cast<cudnn::ActivationDesc>(relu_));
  x_ = y_ = bias_ = w_ = conv_ = relu_ = nullptr;
}

size_t CudnnConv::prepare(bool tf32) {
  tf32 = tf32 && step_.dtype == DType::Float32;  // only float32 has a TF32 choice
  Choice& ch = choice_[tf32];
  if (ch.chosen) return ch.workspace;
  const cudnn::Api& a = api();
  auto h = static_cast<cudnn::Handle>(handle_->get());
  auto x = static_cast<cudnn::TensorDesc>(x_), y = static_cast<cudnn::TensorDesc>(y_);
  auto w = static_cast<cudnn::FilterDesc>(w_);
  auto c = static_cast<cudnn::ConvDesc>(conv_);
  // What PyTorch asks of cuDNN: float32 in FMA math unless TF32 is allowed, 16-bit types on the
  // tensor cores, float64 in the default math.
  const bool low = step_.dtype == DType::Float16 || step_.dtype == DType::BFloat16;
  const bool fma_only = step_.dtype == DType::Float32 && !tf32;
  const int wanted = fma_only ? cudnn::kFmaMath : low ? cudnn::kTensorOpMath : cudnn::kDefaultMath;
  check(a.set_conv_math(c, wanted), "cudnnSetConvolutionMathType", step_.name);
  constexpr int kRequested = 16;  // more than any direction has algorithms
  cudnn::AlgoPerf perf[kRequested] = {};
  int returned = 0;
  switch (step_.kind) {
    case ConvStep::Kind::Forward:
      check(a.fwd_algos(h, x, w, c, y, kRequested, &returned, perf),
            "cudnnGetConvolutionForwardAlgorithm_v7", step_.name);
      break;
    case ConvStep::Kind::GradInput:
      check(a.bwd_data_algos(h, w, y, c, x, kRequested, &returned, perf),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7", step_.name);
      break;
    case ConvStep::Kind::GradWeight:
      check(a.bwd_filter_algos(h, x, y, c, w, kRequested, &returned, perf),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7", step_.name);
      break;
  }
  for (int i = 0; i < returned && !ch.chosen; ++i) {
    const cudnn::AlgoPerf& r = perf[i];
    if (r.status != cudnn::kSuccess || r.memory > kMaxWorkspace) continue;
    // Without TF32, no tensor-core algorithm for float32 (it would round the inputs).
    if (fma_only &&
        (r.math_type == cudnn::kTensorOpMath || r.math_type == cudnn::kTensorOpMathAllowConversion))
      continue;
    ch.chosen = true;
    ch.algo = r.algo;
    ch.math = fma_only ? cudnn::kFmaMath : r.math_type;
  }
  if (!ch.chosen)
    fail(ErrorKind::NotImplemented, "not implemented: conv ", step_.name, " (input ",
         shape_str(step_.x), ", weight ", shape_str(step_.w), ", ", dtype_name(step_.dtype),
         ") on cuda: cuDNN offers no algorithm (", returned, " considered)");
  // The size for the algorithm as it will run (its math type set on the descriptor).
  check(a.set_conv_math(c, ch.math), "cudnnSetConvolutionMathType", step_.name);
  switch (step_.kind) {
    case ConvStep::Kind::Forward:
      check(a.fwd_workspace(h, x, w, c, y, ch.algo, &ch.workspace),
            "cudnnGetConvolutionForwardWorkspaceSize", step_.name);
      break;
    case ConvStep::Kind::GradInput:
      check(a.bwd_data_workspace(h, w, y, c, x, ch.algo, &ch.workspace),
            "cudnnGetConvolutionBackwardDataWorkspaceSize", step_.name);
      break;
    case ConvStep::Kind::GradWeight:
      check(a.bwd_filter_workspace(h, x, y, c, w, ch.algo, &ch.workspace),
            "cudnnGetConvolutionBackwardFilterWorkspaceSize", step_.name);
      break;
  }
  return ch.workspace;
}

void CudnnConv::run(CUdeviceptr a_ptr, CUdeviceptr b_ptr, CUdeviceptr bias, CUdeviceptr out,
                    CUdeviceptr workspace, bool tf32) const {
  tf32 = tf32 && step_.dtype == DType::Float32;
  const Choice& ch = choice_[tf32];
  if (!ch.chosen) fail(ErrorKind::Runtime, "internal: conv ", step_.name, " run before prepare()");
  const cudnn::Api& a = api();
  auto h = static_cast<cudnn::Handle>(handle_->get());
  auto x = static_cast<cudnn::TensorDesc>(x_), y = static_cast<cudnn::TensorDesc>(y_);
  auto w = static_cast<cudnn::FilterDesc>(w_);
  auto c = static_cast<cudnn::ConvDesc>(conv_);
  // Scaling factors are double for float64 data and float otherwise (cuDNN's rule).
  const float one32 = 1, zero32 = 0;
  const double one64 = 1, zero64 = 0;
  const bool f64 = step_.dtype == DType::Float64;
  const void* one = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* zero = f64 ? static_cast<const void*>(&zero64) : &zero32;
  auto p = [](CUdeviceptr v) { return reinterpret_cast<void*>(v); };
  check(a.set_conv_math(c, ch.math), "cudnnSetConvolutionMathType", step_.name);
  switch (step_.kind) {
    case ConvStep::Kind::Forward:
      check(a.forward(h, one, x, p(a_ptr), w, p(b_ptr), c, ch.algo, p(workspace), ch.workspace,
                      zero, y, p(out)),
            "cudnnConvolutionForward", step_.name);
      if (bias_)
        check(a.add_tensor(h, one, static_cast<cudnn::TensorDesc>(bias_), p(bias), one, y, p(out)),
              "cudnnAddTensor", step_.name);
      if (relu_)
        check(a.activation_forward(h, static_cast<cudnn::ActivationDesc>(relu_), one, y, p(out),
                                   zero, y, p(out)),
              "cudnnActivationForward", step_.name);
      break;
    case ConvStep::Kind::GradInput:  // a = dy, b = w, out = dx
      check(a.backward_data(h, one, w, p(b_ptr), y, p(a_ptr), c, ch.algo, p(workspace),
                            ch.workspace, zero, x, p(out)),
            "cudnnConvolutionBackwardData", step_.name);
      break;
    case ConvStep::Kind::GradWeight:  // a = x, b = dy, out = dw
      check(a.backward_filter(h, one, x, p(a_ptr), y, p(b_ptr), c, ch.algo, p(workspace),
                              ch.workspace, zero, w, p(out)),
            "cudnnConvolutionBackwardFilter", step_.name);
      break;
  }
}

}  // namespace lt
