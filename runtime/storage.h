// Storage: a tensor's materialized data (TensorImpl::storage, runtime/tensor_impl.h), and the leaf
// data of a graph input that reads it. Apart from TensorImpl so that code reading a graph's inputs
// (donation, the executor's bindings, index checks) needs nothing of tensors.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "backends/backend.h"
#include "ir/node.h"

namespace lt {

// A process-wide creation stamp: lt.compile's capture (capture/capture.h) tells tensors and data
// that existed before a traced call (state it must re-read on replay) from those made during it.
inline uint64_t next_birth() {
  static std::atomic<uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

// Materialized data: a backend buffer plus the name of the backend that owns its memory.
struct Storage : LeafData {
  BufferPtr buffer;
  std::string backend;
  uint64_t birth = next_birth();
  // Bit d: dim d was marked dynamic (lt.mark_dynamic, runtime/dynamic_shapes.h).
  uint64_t dynamic_dims = 0;
};

}  // namespace lt
