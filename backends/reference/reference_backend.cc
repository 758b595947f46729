// The "reference" backend: host memory, and executables that interpret the plan's prim graph node
// by node (plan.kernels are ignored, so it checks lowering's decompositions but not fusion).
#include "backends/reference/reference_backend.h"

#include <cstring>

#include "backends/reference/interpreter.h"

namespace lt {
namespace {

void check_copy(const Buffer& b, size_t bytes, const char* what) {
  if (!b.on_host()) fail(ErrorKind::Runtime, "reference: ", what, ": buffer is not host memory");
  if (bytes > b.bytes())
    fail(ErrorKind::Runtime, "reference: ", what, ": ", bytes, " bytes do not fit a buffer of ",
         b.bytes(), " bytes");
}

class ReferenceExecutable : public Executable {
 public:
  explicit ReferenceExecutable(const Plan& plan)
      : prims_(plan.prims),
        num_buffers_(plan.buffers.size()),
        buffers_(plan.buffers),
        donations_(plan.donations),
        output_buffers_(plan.output_buffers) {
    ref::validate_graph(prims_);
    if (output_buffers_.size() != prims_.outputs.size())
      fail(ErrorKind::Runtime, "reference: plan has ", output_buffers_.size(),
           " output buffers for ", prims_.outputs.size(), " graph outputs");
    for (int b : output_buffers_)
      if (b < 0 || static_cast<size_t>(b) >= num_buffers_)
        fail(ErrorKind::Runtime, "reference: output buffer ", b, " is out of range (plan has ",
             num_buffers_, " buffers)");
    keep_.assign(prims_.nodes.size(), false);
    for (int o : prims_.outputs) keep_[static_cast<size_t>(o)] = true;
  }

  // Every output gets a fresh buffer (never an input's), so callers may update outputs in place;
  // a donated output is written into its input's memory once every value is computed (the
  // interpreter reads its inputs first, so any donation is safe here).
  std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) override {
    const std::vector<int> donated = donated_outputs(buffers_, donations_, inputs, "reference");
    auto vals = ref::evaluate(prims_, inputs, keep_, nullptr);
    std::vector<BufferPtr> out(num_buffers_);
    std::vector<bool> written(num_buffers_, false);
    for (size_t i = 0; i < output_buffers_.size(); ++i) {
      auto b = static_cast<size_t>(output_buffers_[i]);
      if (written[b]) continue;
      written[b] = true;
      const ref::Value& v = *vals[static_cast<size_t>(prims_.outputs[i])];
      if (b < donated.size() && donated[b] >= 0)
        ref::value_to_memory(v, inputs[static_cast<size_t>(donated[b])].buffer->data());
      else
        out[b] = ref::value_to_buffer(v);
    }
    return out;  // stats->kernel_launches stays 0: the interpreter launches no kernels
  }

  int num_kernels() const override { return 0; }

 private:
  PrimGraph prims_;
  size_t num_buffers_;
  std::vector<BufferSpec> buffers_;
  std::vector<Donation> donations_;
  std::vector<int> output_buffers_;
  std::vector<bool> keep_;
};

class ReferenceBackend : public Backend {
 public:
  std::string name() const override { return "reference"; }
  bool host_memory() const override { return true; }
  BufferPtr allocate(size_t bytes) override { return std::make_shared<HostBuffer>(bytes); }
  void copy_from_host(Buffer& dst, const void* src, size_t bytes) override {
    check_copy(dst, bytes, "copy_from_host");
    if (bytes) std::memcpy(dst.data(), src, bytes);
  }
  void copy_to_host(void* dst, const Buffer& src, size_t bytes) override {
    check_copy(src, bytes, "copy_to_host");
    if (bytes) std::memcpy(dst, src.data(), bytes);
  }
  std::unique_ptr<Executable> compile(const Plan& plan) override {
    return std::make_unique<ReferenceExecutable>(plan);
  }
  // Conv and attention prims run as themselves (the interpreter's direct loops, the oracle), in
  // every float dtype.
  LowerOptions lower_options() const override {
    LowerOptions o;
    o.conv_dtypes = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
    o.attention_dtypes = o.conv_dtypes;
    return o;
  }
};

}  // namespace

std::unique_ptr<Backend> make_reference_backend() { return std::make_unique<ReferenceBackend>(); }

std::vector<BufferPtr> interpret_all(const PrimGraph& g, const std::vector<RunInput>& inputs) {
  ref::validate_graph(g);
  std::vector<BufferPtr> out(g.nodes.size());
  ref::evaluate(
      g, inputs, std::vector<bool>(g.nodes.size(), false),
      [&](int i, const ref::Value& v) { out[static_cast<size_t>(i)] = ref::value_to_buffer(v); });
  return out;
}

}  // namespace lt
