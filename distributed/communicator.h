// lt::dist::Communicator: the collectives one process group runs between its processes, on host
// memory. Engine-neutral on purpose: Gloo implements it today (gloo_communicator.h); an NCCL
// implementation for device memory will implement the same interface, so the all-reduce IR op and
// its lowering name only this header.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ir/dtype.h"

namespace lt::dist {

// Avg is Sum followed by a division by the group's size, for floating dtypes only.
enum class ReduceOp { Sum, Avg, Max };
std::string_view reduce_op_name(ReduceOp op);

// Every call is collective: each rank of the group makes the same calls in the same order with the
// same sizes (and the same root). A call that fails (a peer gone, a timeout) throws lt::Error
// naming the collective, this rank, the group's size and the timeout; the communicator is then
// unusable (each later call throws at once), as a group that lost a peer cannot agree on what was
// sent. Calls from several threads are serialized, never interleaved.
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Name of the engine ("gloo"), for messages.
  virtual std::string_view engine() const = 0;

  // In place over `count` elements of `dtype`: float32, float64, float16, bfloat16 (reduced in
  // float32 and rounded once), int32, int64 (Sum wraps around). Every rank ends with the same
  // bytes.
  virtual void all_reduce(void* data, int64_t count, DType dtype, ReduceOp op) = 0;
  // `bytes` of `data` on rank `root` are copied into `data` on every other rank.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // `out` (size() * bytes_per_rank bytes) gets rank 0's `in`, then rank 1's, and so on. `in` may be
  // `out`'s own slot of this rank (in place).
  virtual void all_gather(const void* in, void* out, size_t bytes_per_rank) = 0;
  // Returns once every rank of the group has called it.
  virtual void barrier() = 0;
};

}  // namespace lt::dist
