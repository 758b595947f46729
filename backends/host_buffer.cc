#include <cstdlib>
#include <new>

#include "backends/backend.h"

namespace lt {

HostBuffer::HostBuffer(size_t bytes) {
  bytes_ = bytes;
  size_t rounded = (bytes + 63) / 64 * 64;
  data_ = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!data_) throw std::bad_alloc();
}

HostBuffer::~HostBuffer() { std::free(data_); }

}  // namespace lt
