#include "nn/nn_module.h"

#include <algorithm>
#include <map>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "runtime/ops.h"
#include "runtime/sync.h"

namespace lt::nn {

namespace {
using Entries = std::vector<std::pair<std::string, std::shared_ptr<Tensor>>>;

void append(NamedTensors& out, const std::string& prefix, const Entries& own) {
  for (auto& [n, t] : own) out.emplace_back(prefix + n, *t);
}

// Own entries of every module, depth first, each under its dotted path.
template <typename Own>
void collect(const Module& m, const std::string& prefix, NamedTensors& out, Own own) {
  own(m, prefix, out);
  for (auto& [cn, c] : m.named_children()) collect(*c, prefix + cn + ".", out, own);
}

Tensor materialized(Tensor t) {
  sync({t}, SyncReason::Sync);
  return t.detach();
}
}  // namespace

// The lambda is in a member function, so it may read each module's private lists.
NamedTensors Module::entries(bool params, bool buffers) const {
  NamedTensors r;
  collect(*this, "", r, [&](const Module& m, const std::string& p, NamedTensors& o) {
    if (params) append(o, p, m.params_);
    if (buffers) append(o, p, m.buffers_);
  });
  return r;
}

std::vector<Tensor> values(const NamedTensors& named) {
  std::vector<Tensor> r;
  for (auto& [n, t] : named) r.push_back(t);
  return r;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
  std::map<std::string, Tensor> dst;
  for (auto& [n, t] : state_dict()) dst.emplace(n, t);
  std::map<std::string, const Tensor*> src;
  for (auto& [n, t] : state) src.emplace(n, &t);
  if (strict) {
    for (auto& [n, t] : dst)
      if (!src.count(n))
        fail(ErrorKind::Runtime, "load_state_dict: missing key \"", n, "\" in state_dict");
    for (auto& [n, t] : src)
      if (!dst.count(n))
        fail(ErrorKind::Runtime, "load_state_dict: unexpected key \"", n, "\" in state_dict");
  }
  // Every shape is checked before anything is written, so a bad state_dict changes nothing.
  for (auto& [n, t] : src) {
    auto it = dst.find(n);
    if (it != dst.end() && (!t->defined() || t->shape() != it->second.shape()))
      fail(ErrorKind::Runtime, "load_state_dict: size mismatch for ", n,
           ": copying a param with shape ", t->defined() ? shape_str(t->shape()) : "(undefined)",
           ", the shape in current model is ", shape_str(it->second.shape()));
  }
  NoGradGuard ng;
  for (auto& [n, t] : src) {
    auto it = dst.find(n);
    if (it == dst.end()) continue;
    // assign keeps the destination's TensorImpl: optimizers holding it see the loaded value.
    it->second.assign(t->detach().to(it->second.device()).to(it->second.dtype()));
  }
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.set_grad(Tensor());
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

Module& Module::to(const Device& d) {
  for (auto& [n, p] : params_) {
    bool rg = p->requires_grad();
    *p = p->to(d);  // a new leaf on d with the same values
    if (rg) p->requires_grad_();
  }
  for (auto& [n, b] : buffers_) *b = b->to(d);
  for (auto& [n, c] : children_) c->to(d);
  return *this;
}

Tensor& Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
  if (requires_grad) t.requires_grad_();
  params_.emplace_back(name, std::make_shared<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor& Module::register_buffer(const std::string& name, Tensor t) {
  buffers_.emplace_back(name, std::make_shared<Tensor>(std::move(t)));
  return *buffers_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  if (!m) fail(ErrorKind::Type, "register_module: module \"", name, "\" is null");
  auto it =
      std::find_if(children_.begin(), children_.end(), [&](auto& c) { return c.first == name; });
  if (it != children_.end())
    it->second = std::move(m);
  else
    children_.emplace_back(name, std::move(m));
}

Sequential& Sequential::add(std::shared_ptr<UnaryModule> m) {
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(m)));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}

const std::shared_ptr<UnaryModule>& Sequential::operator[](size_t i) const {
  if (i >= layers_.size())
    fail(ErrorKind::Index, "Sequential: index ", i, " is out of range (", layers_.size(),
         " layers)");
  return layers_[i];
}

ModuleList& ModuleList::push_back(std::shared_ptr<Module> m) {
  items_.push_back(register_module(std::to_string(items_.size()), std::move(m)));
  return *this;
}

const std::shared_ptr<Module>& ModuleList::operator[](size_t i) const {
  if (i >= items_.size())
    fail(ErrorKind::Index, "ModuleList: index ", i, " is out of range (", items_.size(),
         " modules)");
  return items_[i];
}

ModuleDict& ModuleDict::insert(const std::string& name, std::shared_ptr<Module> m) {
  if (name.empty() || name.find('.') != std::string::npos)
    fail(ErrorKind::Value, "ModuleDict: key \"", name, "\" must be non-empty and contain no \".\"");
  register_module(name, std::move(m));
  return *this;
}

bool ModuleDict::contains(const std::string& name) const {
  for (auto& [n, c] : named_children())
    if (n == name) return true;
  return false;
}

std::shared_ptr<Module> ModuleDict::operator[](const std::string& name) const {
  for (auto& [n, c] : named_children())
    if (n == name) return c;
  fail(ErrorKind::Index, "ModuleDict: no module named \"", name, "\"");
}

std::vector<std::string> ModuleDict::keys() const {
  std::vector<std::string> r;
  for (auto& [n, c] : named_children()) r.push_back(n);
  return r;
}

void wrong_type(const char* container, const std::string& key) {
  fail(ErrorKind::Type, container, ": module \"", key, "\" is not of the requested type");
}

Tensor uniform(Shape shape, double bound, const Device& device) {
  NoGradGuard ng;
  return materialized(rand(std::move(shape), DType::Float32, device) * (2 * bound) - bound);
}

Tensor normal(Shape shape, double std, const Device& device) {
  NoGradGuard ng;
  return materialized(randn(std::move(shape), DType::Float32, device) * std);
}

Tensor filled(Shape shape, double value, const Device& device, DType dtype) {
  NoGradGuard ng;
  return materialized(full(std::move(shape), Scalar(value), dtype, device));
}

}  // namespace lt::nn
