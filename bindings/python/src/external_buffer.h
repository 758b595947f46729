// Host memory that Python objects own (a NumPy array, a DLPack producer's tensor), used as a
// tensor's storage without a copy. The owner is kept alive by `release`, which runs once, when the
// last tensor (or exported view) using the memory goes away.
#pragma once
#include <functional>
#include <utility>

#include "backends/backend.h"

namespace lt::python {

// Runs `release` (which touches Python objects) with the GIL: at once when this thread holds it,
// else queued for Python's main thread; skipped once the interpreter is finalizing. For buffers
// whose memory a Python object owns (ExternalHostBuffer, imported CUDA tensors).
void release_with_gil(std::function<void()> release);

class ExternalHostBuffer : public Buffer {
 public:
  // `release` touches Python objects, so it runs with the GIL held: at once when the last
  // reference drops on a thread holding the GIL, else queued for Python's main thread (taking the
  // GIL here could deadlock against a thread that holds it and waits for the runtime's lock).
  // Skipped once the interpreter is finalizing. `release` must capture no Python object by value.
  ExternalHostBuffer(void* data, size_t bytes, bool writable, std::function<void()> release)
      : writable_(writable), release_(std::move(release)) {
    data_ = data;
    bytes_ = bytes;
  }
  ~ExternalHostBuffer() override;
  ExternalHostBuffer(const ExternalHostBuffer&) = delete;
  ExternalHostBuffer& operator=(const ExternalHostBuffer&) = delete;

  bool on_host() const override { return true; }
  bool runtime_owned() const override { return false; }  // its owner may still read it
  // False for read-only producers (np.frombuffer over bytes, a read-only mmap): views handed out
  // again (Tensor.numpy()) stay read-only.
  bool writable() const { return writable_; }

 private:
  bool writable_;
  std::function<void()> release_;
};

}  // namespace lt::python
