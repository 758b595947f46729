// lt.compile's capture and replay. A capture runs the user's step once under observation: it
// starts with nothing pending, records which tensors each graph leaf was made over (node_of), and
// at the end runs every pending tensor as one graph. The result is a Program: where each graph
// input comes from (argument i, a state tensor's current data, a constant, a runtime scalar, the
// generator), and where each output goes (re-pointing the same state tensors, the new .grad of a
// parameter, a fresh tensor for a return value). A replay binds new data and runs the cached
// executable without re-running Python, re-tracing or re-hashing.
//
// A capture is "broken", and its step not replayable, when the Python code depended on a value
// (a sync or a host read mid-capture) or ran an eager op: the step then simply ran as plain lazy
// code, and stays correct. A step that returns autograd history (a training forward) gets its
// backward compiled too (capture/capture_backward.cc).
//
// Index range checks (runtime/index_check.h) are replayed too: a check of an index whose host
// data is an argument's or a state tensor's is redone on the new values before each replay runs
// (one of a constant was done at capture, for good); the deferred checks of indices computed in
// the step are extra outputs of the captured graph, read after each replay runs. A bad index
// raises lt::Error(ErrorKind::Index) on the replay as it would on the plain step.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt::capture {

// Whether a capture is running. While one runs, the capture is the tensor core's trace observer
// (runtime/trace_observer.h): the core reports leaves read, host reads, graphs run, index checks
// of host data and Tensor::to transfers to it.
bool active();

struct Program;

// Starts a capture: materializes every pending tensor, then observes. `args` are the tensors
// among the call's arguments (argument i of a replay takes the place of args[i]).
void begin(const std::vector<Tensor>& args);
// Ends a capture: runs everything pending as one graph (the step's results are then computed) and
// returns the Program, or null with the reason the step cannot be replayed. `rets` are the
// tensors among the call's return value.
struct Captured {
  std::shared_ptr<Program> program;
  std::string why_not;
};
Captured end(const std::vector<Tensor>& args, const std::vector<Tensor>& rets);
// Ends a capture after an exception: pending tensors stay pending, nothing is recorded.
void abort();

// Replays `p` with new arguments (same count, dtypes and shapes as at capture). Returns the
// return-value tensors, or nullopt when the program went stale (a state tensor it reads died or
// changed shape/dtype/device, or the executable left the cache): the caller then re-captures.
std::optional<std::vector<Tensor>> replay(Program& p, const std::vector<Tensor>& args);
// For tests and lt.compile's stats: graph inputs and outputs of a program.
size_t program_inputs(const Program& p);
size_t program_outputs(const Program& p);

}  // namespace lt::capture
