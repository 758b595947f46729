#include "external_buffer.h"

#include <Python.h>

#include <mutex>
#include <vector>

namespace lt::python {
namespace {

std::mutex g_mu;
std::vector<std::function<void()>>& queued() {
  static auto* q = new std::vector<std::function<void()>>();  // never destroyed: used at exit
  return *q;
}

void run_with_gil(const std::function<void()>& release) {
  PyObject *type, *value, *trace;  // an exception in flight survives the owners' finalizers
  PyErr_Fetch(&type, &value, &trace);
  release();
  PyErr_Restore(type, value, trace);
}

// Py_AddPendingCall's callback: Python's main thread, GIL held.
int drain(void*) {
  std::vector<std::function<void()>> todo;
  {
    std::lock_guard<std::mutex> g(g_mu);
    todo.swap(queued());
  }
  for (const auto& r : todo) run_with_gil(r);
  return 0;
}

}  // namespace

ExternalHostBuffer::~ExternalHostBuffer() { release_with_gil(std::move(release_)); }

void release_with_gil(std::function<void()> release) {
  if (!release || !Py_IsInitialized() || _Py_IsFinalizing()) return;
  if (PyGILState_Check()) {
    run_with_gil(release);
    return;
  }
  {
    std::lock_guard<std::mutex> g(g_mu);
    queued().push_back(std::move(release));
  }
  // Thread-safe without the GIL; if Python's queue is full, the next drain takes this one too.
  Py_AddPendingCall(&drain, nullptr);
}

}  // namespace lt::python
