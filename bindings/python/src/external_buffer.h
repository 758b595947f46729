// Host memory that Python objects own (a NumPy array, a DLPack producer's tensor), used as a
// tensor's storage without a copy. The owner is kept alive by `release`, which runs once, when the
// last tensor (or exported view) using the memory goes away.
#pragma once
#include <Python.h>

#include <functional>
#include <utility>

#include "backends/backend.h"

namespace lt::python {

class ExternalHostBuffer : public Buffer {
 public:
  // `release` may touch Python objects: it runs with the GIL held (taken here when the last
  // reference drops on a thread without it), and is skipped once the interpreter is finalizing.
  ExternalHostBuffer(void* data, size_t bytes, bool writable, std::function<void()> release)
      : writable_(writable), release_(std::move(release)) {
    data_ = data;
    bytes_ = bytes;
  }
  ~ExternalHostBuffer() override {
    if (!release_ || !Py_IsInitialized() || _Py_IsFinalizing()) return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *type, *value, *trace;  // an exception in flight survives the owner's finalizers
    PyErr_Fetch(&type, &value, &trace);
    release_();
    PyErr_Restore(type, value, trace);
    PyGILState_Release(g);
  }
  ExternalHostBuffer(const ExternalHostBuffer&) = delete;
  ExternalHostBuffer& operator=(const ExternalHostBuffer&) = delete;

  bool on_host() const override { return true; }
  // False for read-only producers (np.frombuffer over bytes, a read-only mmap): views handed out
  // again (Tensor.numpy()) stay read-only.
  bool writable() const { return writable_; }

 private:
  bool writable_;
  std::function<void()> release_;
};

}  // namespace lt::python
