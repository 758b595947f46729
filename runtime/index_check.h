// Range checks of index values for gather/scatter_add/index_select/embedding/one_hot and Python's
// integer-tensor indexing. In compiled code an out-of-range index reads 0 (gather: the address is
// clamped, the value masked) or adds nothing (scatter_add), and one_hot's comparison selects
// nothing; these checks turn that into an IndexError.
//
// - Index data already in host memory: checked at once, at the op (no graph, no kernel). Under
//   lt.compile's capture, when that data is an argument's or a state tensor's, the program also
//   redoes the check on the new values before each replay (capture/capture.h).
// - Eager device (data in device memory): the index's max and min are computed and read at once.
// - Lazy device, index pending or in device memory: the op records a deferred check (one [2] int64
//   reduction: the index's max and ~min, one kernel). The sync that computes the op's result adds
//   them to the same graph as extra outputs (no extra sync, no extra compile per step), then raises
//   lt::Error(ErrorKind::Index) naming the op, the bad value, the shapes and the op's source
//   location. The sync's results are assigned before the error is raised (positions read through
//   a bad index hold 0), so nothing stays half-done and the next step runs normally; a check whose
//   result is never computed (the result tensor died pending) is dropped without raising. A
//   captured step's graph computes them the same way, and each replay reads them again. On a
//   device backend (CUDA) the sync does not wait for them: they are read, and raised, by the next
//   sync, host read or synchronize (index_checks::defer_reads), as CUDA reports its own device
//   asserts late; waiting made every step's tracing wait for the previous step's GPU work.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

struct Storage;

// What an index check needs to describe a failure.
struct IndexCheckSpec {
  std::string op;  // "gather", "index_select", ...
  int64_t lo = 0;  // valid values are lo <= v < hi (lo = -hi where negatives wrap)
  int64_t hi = 0;
  int64_t dim = 0;    // the indexed dimension of the input
  Shape input_shape;  // of the tensor being indexed
};

// Whether the index's values are in host memory now (checked at the op, before any work).
bool index_values_known(const Tensor& index);

// Checks `index` against spec: raises now when the values are known (host data, eager device),
// else records a deferred check that runs with the sync computing `anchor` (the op's result; the
// index itself where no result exists yet). Empty indices pass.
void check_index_values(const IndexCheckSpec& spec, const Tensor& index, const Tensor& anchor);

// Class-index targets of a loss (cross_entropy, nll_loss): each value is in [0, classes) or equals
// ignore_index. Checked only when the values are in host memory now (eager cpu, uploaded data),
// where it costs a loop over the targets and no kernel; targets computed in a lazy graph or held
// in device memory are not checked (a deferred check would add a kernel to every step): an
// out-of-range one picks class 0 there, as the generated code clamps; nor are steps under
// lt.compile's capture.
void check_class_targets(const Tensor& target, int64_t classes, int64_t ignore_index,
                         const char* fn, const Shape& input_shape);

namespace index_checks {

// One deferred check taken for a sync: its extra graph root ([max, ~min] of the index).
struct Taken {
  NodePtr stats;
  IndexCheckSpec spec;
  Shape index_shape;
  int32_t source = -1;
};

// Removes and returns the pending checks of `backend` whose anchor is reachable from `roots`
// (so the sync computes the op they guard), and appends their stats to `roots`: the graph
// computes them as extra outputs after the original roots. Cheap when none are pending. Caller
// holds runtime_mutex().
std::vector<Taken> take_into(const std::string& backend, std::vector<const Node*>& roots);
// The first failed check among `taken`, given the storages of their stats outputs in order;
// an empty string when every index was in range.
std::string first_failure(const std::vector<Taken>& taken,
                          const std::vector<std::shared_ptr<Storage>>& outs, size_t first);
// After a graph with `checks` (whose stats are outs[first...]) has been launched: the first
// failure of earlier device syncs' checks (read now that this graph is queued behind them), else
// of these when the backend's buffers are host memory ("" when none). On a device backend these
// are not waited for: defer_reads starts copying their stats to the host behind the graph, and
// the next after_run, host read of tensor data or synchronize reads them (check_unread raises
// their first failure), so tracing the next step overlaps this one's GPU work.
std::string after_run(const std::string& backend, std::vector<Taken> checks,
                      const std::vector<std::shared_ptr<Storage>>& outs, size_t first);
void defer_reads(const std::string& backend, std::vector<Taken> taken,
                 const std::vector<std::shared_ptr<Storage>>& outs, size_t first);
std::string first_unread_failure();
void check_unread();
// Checks the values of a materialized index (its data in host or device memory) against spec
// now, raising lt::Error(ErrorKind::Index) at the first bad one. Reads the storage directly: no
// sync, and no host read that a capture would take for a data-dependent step.
void check_stored(const IndexCheckSpec& spec, const TensorImpl& index);
// Pending deferred checks (tests).
size_t pending_count();
// Forgets the checks whose results died pending (their work will never be done).
void drop_dead();

}  // namespace index_checks
}  // namespace lt
