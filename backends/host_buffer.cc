#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "backends/backend.h"
#include "ir/error.h"

namespace lt {

HostBuffer::HostBuffer(size_t bytes) {
  bytes_ = bytes;
  // A size near SIZE_MAX would wrap when rounded up; either way it is PyTorch's CPU out-of-memory
  // error, an lt::Error naming the size rather than a bare std::bad_alloc.
  data_ = bytes > SIZE_MAX - 63
              ? nullptr
              : std::aligned_alloc(64, std::max<size_t>((bytes + 63) / 64 * 64, 64));
  if (!data_)
    fail(ErrorKind::Runtime, "cpu: not enough memory: tried to allocate ", bytes, " bytes");
}

HostBuffer::~HostBuffer() { std::free(data_); }

HostSubBuffer::HostSubBuffer(BufferPtr parent, size_t offset, size_t bytes)
    : parent_(std::move(parent)), offset_(offset) {
  if (!parent_ || !parent_->on_host() || offset > parent_->bytes() ||
      bytes > parent_->bytes() - offset)
    fail(ErrorKind::Runtime, "internal: a host sub-buffer of ", bytes, " bytes at ", offset,
         " does not lie inside its parent");
  data_ = static_cast<unsigned char*>(parent_->data()) + offset;
  bytes_ = bytes;
}

BufferPtr Backend::sub_buffer(const BufferPtr& parent, size_t offset, size_t bytes) {
  if (!parent || !parent->on_host())
    fail(ErrorKind::NotImplemented, "not implemented: a view of a device buffer on backend ",
         name());
  return std::make_shared<HostSubBuffer>(parent, offset, bytes);
}

}  // namespace lt
