// lt::nn::Module and the containers. Module holds state only (parameters, buffers, children,
// training mode), like torch::nn::Module in libtorch, and has no virtual forward: layers differ in
// their call shapes (a loss takes input and target, MultiheadAttention query, key, value and masks
// and returns two tensors), and one forced signature would make those either unusable or
// stringly typed. UnaryModule is the common one-tensor-in, one-tensor-out layer that Sequential
// chains; a loss is a Loss, MultiheadAttention has its own forward. ModuleList and ModuleDict hold
// any Module and only register them (as in PyTorch, they have no forward).
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace lt::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// The tensors of a named list, in order.
std::vector<Tensor> values(const NamedTensors& named);

// Raises lt::Error: a container's module `key` is not of the type asked for.
[[noreturn]] void wrong_type(const char* container, const std::string& key);

class Module {
 public:
  virtual ~Module() = default;

  // Own entries first, then each child's under "child.", recursively (PyTorch's order).
  NamedTensors named_parameters() const { return entries(true, false); }
  std::vector<Tensor> parameters() const { return values(named_parameters()); }
  NamedTensors named_buffers() const { return entries(false, true); }
  std::vector<Tensor> buffers() const { return values(named_buffers()); }
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const {
    return children_;
  }
  // Parameters then buffers, per module as PyTorch's state_dict orders them. The tensors are the
  // module's own (shared handles), not copies.
  NamedTensors state_dict() const { return entries(true, true); }
  // Copies each value into the tensor of the same name (so optimizers holding the parameters see
  // the new values); shapes must match, values are cast to the destination's dtype and moved to
  // its device. strict: a missing or unexpected key is an error, as in PyTorch.
  void load_state_dict(const NamedTensors& state, bool strict = true);

  void zero_grad();
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter and buffer to `d` (same values); returns this module. Parameters become
  // new leaves, so build optimizers after moving.
  Module& to(const Device& d);

 protected:
  // The returned reference stays valid for the module's lifetime (entries are heap-held).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor t);
  // A child of the same name is replaced in place (PyTorch's attribute assignment).
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }

 private:
  NamedTensors entries(bool params, bool buffers) const;
  void add_child(const std::string& name, std::shared_ptr<Module> m);
  std::vector<std::pair<std::string, std::shared_ptr<Tensor>>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// A layer mapping one tensor to one tensor.
class UnaryModule : public Module {
 public:
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }
};

class Sequential : public UnaryModule {
 public:
  Sequential() = default;
  Sequential& add(std::shared_ptr<UnaryModule> m);
  Tensor forward(const Tensor& x) override;
  size_t size() const { return layers_.size(); }
  const std::shared_ptr<UnaryModule>& operator[](size_t i) const;

 private:
  std::vector<std::shared_ptr<UnaryModule>> layers_;
};

// Modules registered under "0", "1", ...; any kind of Module.
class ModuleList : public Module {
 public:
  ModuleList& push_back(std::shared_ptr<Module> m);
  size_t size() const { return items_.size(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  // The i-th module as M (lt::Error when it is another kind).
  template <typename M>
  std::shared_ptr<M> at(size_t i) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[i]);
    if (!m) wrong_type("ModuleList", std::to_string(i));
    return m;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> items_;
};

// Modules by name, in insertion order; inserting an existing name replaces that module in place.
class ModuleDict : public Module {
 public:
  ModuleDict& insert(const std::string& name, std::shared_ptr<Module> m);
  bool contains(const std::string& name) const;
  size_t size() const { return named_children().size(); }
  std::shared_ptr<Module> operator[](const std::string& name) const;
  template <typename M>
  std::shared_ptr<M> at(const std::string& name) const {
    auto m = std::dynamic_pointer_cast<M>((*this)[name]);
    if (!m) wrong_type("ModuleDict", name);
    return m;
  }
  std::vector<std::string> keys() const;
};

// Materialized float32 tensors from lt's generator (runs under no_grad): U(-bound, bound) and
// N(0, std^2). Layers draw their initial parameters with these.
Tensor uniform(Shape shape, double bound, const Device& device);
Tensor normal(Shape shape, double std, const Device& device);
// A materialized tensor filled with `value` (zeros/ones initializations and buffers).
Tensor filled(Shape shape, double value, const Device& device, DType dtype = DType::Float32);

}  // namespace lt::nn
