#include "ir/ops.h"

#include <iterator>

namespace lt {

const std::vector<OpInfo>& all_ops() {
  static const std::vector<OpInfo> table(std::begin(kOpTable), std::end(kOpTable));
  return table;
}

bool op_from_name(std::string_view name, Op* out) {
  for (const auto& i : all_ops())
    if (i.name == name) {
      *out = i.op;
      return true;
    }
  return false;
}

}  // namespace lt
