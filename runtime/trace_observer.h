// One listener on the tensor core's trace: the core calls it at the points where a recording of
// the trace for later replay (lt.compile's capture, capture/capture.h) must look, and knows nothing
// else of what listens. At most one observer is set at a time; while none is, each point costs one
// relaxed atomic load.
//
// While an observer is set the trace is being recorded for replay, so the core also computes only
// what it was asked for: a sync does not widen to live tensors sharing its work
// (runtime/shared_work.h), and host-side checks that a replay would not redo (a loss's class
// targets, runtime/index_check.h) are skipped.
#pragma once
#include "runtime/tensor.h"

namespace lt {

struct TensorImpl;
struct IndexCheckSpec;

class TraceObserver {
 public:
  virtual ~TraceObserver() = default;
  // node_of returned t's Param leaf (a graph input over t's data).
  virtual void on_leaf(TensorImpl& t) = 0;
  // A host read of tensor data (item, numpy, ...): the caller now depends on a value.
  virtual void on_host_read(SyncReason reason) = 0;
  // A graph ran (a sync, or an eager op).
  virtual void on_execution(SyncReason reason) = 0;
  // An index range check of host data, done at the op.
  virtual void on_index_check(const IndexCheckSpec& spec, const Tensor& index) = 0;
  // Tensor::to across devices from `src`: begins (returns whether to report its end), then ends
  // with the copy `result` (undefined when the copy threw). Host reads inside it are the copy's.
  virtual bool on_transfer_begin(const TensorImpl& src) = 0;
  virtual void on_transfer_end(const TensorImpl& src, const Tensor* result) = 0;
};

// The observer now, or null. Not an inline variable: the Python extension is a separate shared
// object with hidden symbols and would get its own copy.
TraceObserver* trace_observer();
// Sets (or, with null, clears) the observer; the caller keeps it alive while it is set.
void set_trace_observer(TraceObserver* observer);

// Tensor::to's report to the observer: begun at construction, ended by done() or, when the copy
// throws, by the destructor.
class ObservedTransfer {
 public:
  explicit ObservedTransfer(const TensorImpl& src) : src_(src), observer_(trace_observer()) {
    if (observer_ && !observer_->on_transfer_begin(src_)) observer_ = nullptr;
  }
  ~ObservedTransfer() {
    if (observer_) observer_->on_transfer_end(src_, nullptr);
  }
  Tensor done(Tensor result) {  // returns result
    if (observer_) observer_->on_transfer_end(src_, &result);
    observer_ = nullptr;
    return result;
  }
  ObservedTransfer(const ObservedTransfer&) = delete;
  ObservedTransfer& operator=(const ObservedTransfer&) = delete;

 private:
  const TensorImpl& src_;
  TraceObserver* observer_;
};

}  // namespace lt
