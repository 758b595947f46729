#include "lowering/collective.h"

#include "ir/error.h"

namespace lt {

void validate_collective(const CollectiveStep& c, int64_t in_numel, int64_t out_numel,
                         const char* where) {
  if (c.op != Op::AllReduce && c.op != Op::Broadcast && c.op != Op::AllGather)
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " has op ", op_name(c.op));
  if (c.world < 1 || (c.op == Op::AllReduce && (c.reduce < 0 || c.reduce > 2)) ||
      (c.op == Op::Broadcast && (c.root < 0 || c.root >= c.world)))
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " has reduce ", c.reduce, ", root ",
         c.root, " in a group of ", c.world);
  const int64_t want_out = c.op == Op::AllGather ? c.count * c.world : c.count;
  if (c.count < 0 || in_numel != c.count || out_numel != want_out)
    fail(ErrorKind::Runtime, where, ": collective ", c.name, " of ", c.count,
         " elements a rank has buffers of ", in_numel, " and ", out_numel, " elements");
}

}  // namespace lt
