#include "lowering/size_fields.h"

namespace lt {

void validate_kernel_params(const loop::Kernel& k, size_t nparams) {
  auto check = [&](int p, const char* what) {
    LT_CHECK(p >= -1 && p < static_cast<int64_t>(nparams), ErrorKind::Runtime, "internal: ", what,
             " of kernel ", k.name, " names size parameter ", p, " of ", nparams);
  };
  LT_CHECK(k.outer_params.empty() || k.outer_params.size() == k.outer.size(), ErrorKind::Runtime,
           "internal: kernel ", k.name, " has ", k.outer_params.size(),
           " outer size parameters for ", k.outer.size(), " dims");
  LT_CHECK(k.inner_params.empty() || k.inner_params.size() == k.inner.size(), ErrorKind::Runtime,
           "internal: kernel ", k.name, " has ", k.inner_params.size(),
           " inner size parameters for ", k.inner.size(), " dims");
  for (int p : k.outer_params) check(p, "an outer extent");
  for (int p : k.inner_params) check(p, "an inner extent");
  for (const auto& a : k.args) check(a.numel_param, "an argument's size");
  for (const auto& e : k.iexprs) check(e.param, "an index constant");
  auto check_index = [&](const loop::Index& ix) {
    check(ix.offset_param, "an index offset");
    LT_CHECK(ix.stride_params.empty() || ix.stride_params.size() == ix.strides.size(),
             ErrorKind::Runtime, "internal: an index of kernel ", k.name, " has ",
             ix.stride_params.size(), " stride parameters for ", ix.strides.size(), " strides");
    for (int p : ix.stride_params) check(p, "an index stride");
  };
  for (const auto& st : k.stages) {
    for (const auto& in : st.body) {
      check(in.param, "a constant");
      LT_CHECK(in.param < 0 || in.kind == loop::IKind::Const, ErrorKind::Runtime,
               "internal: kernel ", k.name,
               " names a size parameter on an instruction that is not a constant");
      if (loop::has_index(in)) check_index(in.index);
    }
    for (const auto& s : st.stores) check_index(s.index);
  }
}

void validate_size_params(const Plan& plan) {
  const auto np = static_cast<int64_t>(plan.sym.params.size());
  const std::vector<StepSizeParams>* const tables[] = {&plan.sym.gemms, &plan.sym.convs,
                                                       &plan.sym.attentions};
  if (!plan.sym.symbolic()) {
    LT_CHECK(np == 0, ErrorKind::Runtime,
             "internal: a plan without size symbols has size parameters");
    for (const auto& b : plan.buffers)
      LT_CHECK(b.numel_param < 0, ErrorKind::Runtime,
               "internal: a plan without size symbols has a symbolic buffer");
    for (const auto& k : plan.kernels)
      LT_CHECK(!k.symbolic(), ErrorKind::Runtime, "internal: kernel ", k.name,
               " of a plan without size symbols names size parameters");
    for (const auto* table : tables)
      for (const StepSizeParams& sizes : *table)
        LT_CHECK(sizes.empty(), ErrorKind::Runtime,
                 "internal: a library step of a plan without size symbols names size parameters");
    return;
  }
  for (const auto& b : plan.buffers)
    LT_CHECK(b.numel_param >= -1 && b.numel_param < np, ErrorKind::Runtime,
             "internal: a buffer names size parameter ", b.numel_param, " of ", np);
  for (const auto& k : plan.kernels) validate_kernel_params(k, static_cast<size_t>(np));
  LT_CHECK(plan.sym.gemms.size() == plan.gemms.size() &&
               plan.sym.convs.size() == plan.convs.size() &&
               plan.sym.attentions.size() == plan.attentions.size(),
           ErrorKind::Runtime, "internal: a plan's symbolic step tables do not match its steps");
  for (const auto* table : tables)
    for (const StepSizeParams& sizes : *table)
      for (auto [field, p] : sizes)
        LT_CHECK(field >= 0 && p >= 0 && p < np, ErrorKind::Runtime,
                 "internal: a library step names size parameter ", p, " of ", np);
}

}  // namespace lt
