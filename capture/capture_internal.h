// Internals of lt.compile's capture shared by capture.cc (capture and replay) and
// capture_backward.cc (a training forward's compiled backward). Not part of the runtime's API.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "capture/capture.h"
#include "runtime/index_check.h"
#include "runtime/rng.h"
#include "runtime/tensor_impl.h"

namespace lt::capture {

enum class Src { Arg, ArgTo, State, StateTo, Const, Scalar, Seed, Offset };
struct InputSpec {
  Src kind = Src::Const;
  int arg = -1;
  std::weak_ptr<TensorImpl> state;
  Device device;                      // ArgTo/StateTo: the transfer's target
  std::shared_ptr<Storage> constant;  // Const
  DType dtype = DType::Float32;
  Shape shape;
  double scalar = 0;  // Scalar (Offset: relative to the generator's offset)
  int64_t scalar_i = 0;
};

// A range check of an index whose host data is bound anew on each replay (an argument's, a state
// tensor's): redone on the new values before the replay runs.
struct DataCheck {
  InputSpec data;  // Arg, ArgTo, State or StateTo (the transfer's source holds the same values)
  IndexCheckSpec spec;
};

// What a compiled backward reads of its forward call: result `index` of the forward graph (a root)
// or the forward call's argument `index`.
struct SavedRef {
  bool root = true;
  int index = -1;
};
// The forward call's data as a backward capture may read it (by the data's identity).
struct SavedSource {
  bool root = false;  // a forward root (SavedRef{true, index}); else `spec` says where it came from
  int index = -1;
  InputSpec spec;  // the forward's own input: Arg/ArgTo become saved arguments, the rest stay
};
using SavedMap = std::unordered_map<const LeafData*, SavedSource>;

// Where a tensor's data came from when a transfer (Tensor::to) made it during the capture.
struct TransferSource {
  std::weak_ptr<TensorImpl> src;
  uint64_t src_birth = 0;
  const TensorImpl* src_ptr = nullptr;
  Device device;
};

// What a running capture has observed.
struct Session {
  uint64_t start_birth = 0;
  RngState rng_start{};
  std::unordered_map<const TensorImpl*, int> arg_of;     // argument tensor -> its index
  std::unordered_map<const LeafData*, int> arg_storage;  // argument data at the start -> index
  std::unordered_map<const LeafData*, std::weak_ptr<TensorImpl>>
      leaf_owner;  // data -> a tensor over it
  std::unordered_map<const TensorImpl*, std::weak_ptr<TensorImpl>> seen;  // tensors read as leaves
  std::unordered_map<const LeafData*, TransferSource> transfers;          // data made by to()
  int transfer_depth = 0;
  std::vector<DataCheck> data_checks;
  std::string broken;  // why the step cannot be replayed (first reason)
  // Autograd nodes made before the step have a smaller seq (GradNode::seq).
  uint64_t start_seq = 0;
  size_t arg_count = 0;
  // A backward capture (capture_backward.cc) reads the forward call's data through `saved`:
  // the data that becomes an argument of the backward program (saved_used, after the grad
  // output) or that keeps its forward source. Tensors born since `window_birth` (the forward's
  // start) are the forward call's own and may be read only through `saved`.
  std::shared_ptr<const SavedMap> saved;
  std::vector<SavedRef> saved_used;
  std::unordered_map<const LeafData*, int> saved_slot;
  uint64_t window_birth = 0;
};

// ---- the program ------------------------------------------------------------------------------

// Saved: a result a compiled backward reads (a training forward's activation): fresh on each
// replay and held by that call's backward node, never re-pointed (an earlier call's backward may
// still need its own value).
enum class Dst { Arg, State, GradOfArg, GradOfState, Fresh, Saved };
struct OutputSpec {
  Dst kind = Dst::Fresh;
  int arg = -1;
  std::weak_ptr<TensorImpl> target;
};

enum class Ret { Arg, State, Root, Data };
struct ReturnSpec {
  Ret kind = Ret::Root;
  int arg = -1;
  std::weak_ptr<TensorImpl> state;
  int root = -1;
  InputSpec data;  // Data: a materialized tensor made during the step, its data's source
};

// A tensor a compiled backward differentiates against: the call's argument `arg`, or state.
struct DiffInput {
  int arg = -1;
  std::weak_ptr<TensorImpl> state;
};

struct Program;
// The backward of one returned tensor of a training forward: its program takes the gradient of
// that return, then the saved tensors; it returns gradients for diff_inputs[grad_of[m]].
struct BackwardProgram {
  std::shared_ptr<Program> program;
  int ret = -1;  // index in the forward's return values
  std::vector<SavedRef> saved;
  std::vector<int> grad_of;
};

struct Program {
  bool has_graph = false;
  Hash128 key;
  std::string backend;
  Device device;  // of the graph's roots
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<DType> root_dtypes;
  std::vector<Shape> root_shapes;
  std::vector<Device> root_devices;
  std::vector<ReturnSpec> rets;
  std::vector<DType> arg_dtypes;
  std::vector<Shape> arg_shapes;
  std::vector<Device> arg_devices;
  int64_t rng_advance = 0;
  std::vector<DataCheck> data_checks;
  // Deferred checks of indices computed in the step (without their IR): their stats are the
  // graph's outputs after `outputs`.
  std::vector<index_checks::Taken> graph_checks;
  // A training forward (capture/capture_backward.cc): replays give the returned tensors requiring
  // grad a node that runs their compiled backward.
  std::vector<DiffInput> diff_inputs;
  std::vector<BackwardProgram> backward;
};

// Starts a capture session (begin() is this without `saved`; see Session::window_birth).
void begin_session(const std::vector<Tensor>& args, std::shared_ptr<const SavedMap> saved,
                   uint64_t window_birth);
// Ends the running session (end() is this without `saved_used`); a backward capture also gets the
// saved data its program reads, in argument order after the gradient.
Captured end_session(const std::vector<Tensor>& args, const std::vector<Tensor>& rets,
                     std::vector<SavedRef>* saved_used);

// capture_backward.cc. Compiles the backward of a training forward whose graph just ran (`roots`
// are its pending tensors, now over their results; `input_of` the forward graph's inputs by data):
// fills fwd.diff_inputs and fwd.backward and gives `rets` their compiled backward. Returns why it
// cannot, or "".
std::string attach_backward(Program& fwd, const Session& s, const std::vector<Tensor>& args,
                            const std::vector<Tensor>& rets,
                            const std::vector<std::shared_ptr<TensorImpl>>& roots,
                            const std::unordered_map<const LeafData*, InputSpec>& input_of);
// On a replay of a training forward: gives the returned tensors their backward node; `root(j)` is
// the fresh tensor of the forward graph's result j.
void link_backward(const Program& p, const std::vector<Tensor>& rets,
                   const std::function<Tensor(int)>& root, const std::vector<Tensor>& args);

}  // namespace lt::capture
