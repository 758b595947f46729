#include "ir/ops.h"

namespace lt {

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table = {
#define LT_OP(N, name, arity, cls, prim) {Op::N, name, arity, OpClass::cls, prim},
#include "ir/ops.def"
#undef LT_OP
  };
  return table;
}

const OpInfo& op_info(Op op) { return all_ops()[static_cast<size_t>(op)]; }

bool op_from_name(std::string_view name, Op* out) {
  for (const auto& i : all_ops())
    if (i.name == name) {
      *out = i.op;
      return true;
    }
  return false;
}

}  // namespace lt
