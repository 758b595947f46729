// TensorImpl: what a Tensor handle points to (its data: runtime/storage.h). Internal to the
// runtime.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "ir/node.h"
#include "runtime/device.h"
#include "runtime/storage.h"
#include "runtime/views.h"

namespace lt {

struct AutogradMeta;  // runtime/tape.h

struct TensorImpl : std::enable_shared_from_this<TensorImpl> {
  Device device;
  DType dtype{};  // Bool until set, as the zero-filling value-initialization gave before
  Shape shape;
  std::shared_ptr<Storage> storage;  // set once materialized
  NodePtr pending;                   // lazy: IR not yet materialized (storage is null meanwhile)
  NodePtr leaf;                      // cached Param leaf over `storage`, made on first use
  std::unique_ptr<AutogradMeta> autograd;  // null until grad is involved
  std::shared_ptr<ViewLink> view;          // set when this tensor aliases a base (runtime/views.h)
  uint64_t version = 0;                    // bumped by every in-place write (views compare it)
  // Live views whose ViewLink::base is this tensor. Atomic: threads may take views of one shared
  // (read-only) tensor and drop them concurrently (tests/cpp/threads_stress_test.cc under TSan).
  std::atomic<int64_t> view_refs{0};

  // Intrusive links of the live pending-tensor registry (runtime/registry.cc), creation order.
  TensorImpl* prev = nullptr;
  TensorImpl* next = nullptr;
  bool registered = false;
  uint64_t birth = next_birth();
  std::thread::id owner;  // the thread that traced it: its mark_step() materializes it

  // Defaulted out of line (runtime/registry.cc), hence user-provided: a new impl is built member by
  // member instead of first zero-filled whole (a `rep stos` in the profile of every traced op).
  TensorImpl();
  ~TensorImpl();
};

// A view whose base was written since it was computed is recomputed before it is read.
inline void ensure_fresh(TensorImpl& t) {
  if (t.view && t.view->base && t.view->seen != t.view->base->version) refresh_view(t);
}

// Registry of live lazy tensors with pending IR.
void registry_add(TensorImpl* t);
void registry_remove(TensorImpl* t);
// Pending tensors in creation order; with this_thread_only, those the calling thread traced.
std::vector<std::shared_ptr<TensorImpl>> registry_snapshot(bool this_thread_only = false);
std::recursive_mutex& runtime_mutex();  // serializes tracing state changes and syncs

// Makes a tensor on `device` whose value is `node`: pending on a lazy device, executed at once
// (a one-op graph, compiled once per signature) on an eager device (but see EagerComposite).
std::shared_ptr<TensorImpl> make_tensor(NodePtr node, const Device& device);

// A runtime op built from other ops (cat of N pieces was ~11 N ops, each a kernel run on an eager
// device: 63 us for 8 small pieces against PyTorch's 1.5). Inside the outermost scope, eager
// ops are traced like lazy ones; finish() runs the op's result as one graph. Intermediates that
// autograd keeps are recomputed from their nodes when a VJP reads them (runtime/saved.h).
class EagerComposite {
 public:
  EagerComposite();
  ~EagerComposite();
  // The result, computed (one graph) when this is the outermost scope and it is pending on an
  // eager device.
  Tensor finish(Tensor result);
  // The same for several results at once: one graph for all of them.
  void finish(const std::vector<Tensor>& results);
  EagerComposite(const EagerComposite&) = delete;
  EagerComposite& operator=(const EagerComposite&) = delete;
};
// The same scope for Python (lazytensor.nn's recurrent layers): enter, then exit with the
// results to compute (exit finishes them when it closes the outermost scope).
void eager_composite_enter();
void eager_composite_exit(const std::vector<Tensor>& results);
std::shared_ptr<TensorImpl> make_data_tensor(std::shared_ptr<Storage> s, DType t, Shape shape,
                                             const Device& d);
// The node standing for a tensor: its pending IR or a leaf over its data.
NodePtr node_of(TensorImpl& t);

// t now holds v's value (data or pending IR). With `history`, also v's autograd state, as an
// in-place op's result continues the tensor's history; without, t's own autograd is kept (a write
// through a detached alias). Registry membership follows the pending IR.
void rebind(TensorImpl& t, const Tensor& v, bool history);

// `v` as a Scalar of t's kind, so a fill keeps the filled tensor's dtype (where(mask, x, fill) with
// a float scalar would promote an integer x to float32 and round values above 2^24): bool is
// v != 0; integral dtypes truncate, and a v that int64 cannot hold is PyTorch's "cannot be
// converted to type ... without overflow" error naming `op`.
Scalar fill_of(DType t, double v, const char* op);

}  // namespace lt
