// The NCCL engine of a process group (init_process_group("nccl")): one NCCL communicator on this
// rank's GPU (LOCAL_RANK, else rank modulo the visible GPUs), joined through the group's store
// (rank 0 makes NCCL's unique id and publishes it there).
//
// Device collectives are stream-ordered: a plan's collective step (cuda_executable.h) waits for
// the work the executable issued so far, runs on this communicator's own stream, and hands back
// an event that the executable's stream waits on before any later step touches the step's memory,
// so a gradient bucket's all-reduce overlaps the rest of the backward pass (issue 31).
//
// Failures never hang: the communicator is nonblocking (NCCL's config.blocking = 0), joining is
// polled against LT_DIST_TIMEOUT, and a watchdog thread polls every collective in flight; one that
// has not finished within the timeout, or an error NCCL reports (a peer gone), aborts the
// communicator (ncclCommAbort ends its kernels, so waiting streams drain) and records the error.
// From then on every collective throws it at once, and so does every host wait on the device
// (CudaDevice::synchronize: a tensor's values, an explicit synchronize), naming the collective,
// this rank, the group's size and the timeout. Destroy the group and start a new one.
//
// The host-memory calls of dist::Communicator (barrier, the collectives of CPU tensors, the
// executables' check that every rank runs the same collectives) are staged through device memory.
#pragma once
#include <cuda.h>

#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "distributed/process_group.h"
#include "lowering/collective.h"

namespace lt {

class CudaDevice;
class CudaGraphReplay;

// One NCCL call of a plan: collective step `step` from device memory `in` to `out` (distinct).
struct CollectiveCall {
  const CollectiveStep* step = nullptr;
  CUdeviceptr in = 0, out = 0;
};

class NcclCommunicator : public dist::Communicator {
 public:
  // Joins the group on this rank's GPU (collective); throws lt::Error (NCCL missing, no such GPU,
  // a rank that did not join in time).
  static std::shared_ptr<NcclCommunicator> join(const dist::EngineRendezvous& group);

  std::string_view engine() const override { return "nccl"; }
  // The GPU this rank's communicator runs on.
  virtual int device_ordinal() const = 0;
  // The priority its calls run at: 0, or the device's greatest (LT_NCCL_STREAM_PRIORITY=high,
  // read when the group is made): its stream's, and that of the kernels a CUDA graph captures
  // from its calls (cuda_graph.cc).
  virtual int stream_priority() const = 0;
  // Enqueues `calls` (several: one NCCL group call, ncclGroupStart/End, as a call group of
  // all_reduces runs) after the work issued on `after` so far; returns the event that marks their
  // end (the caller's stream waits on it before touching their memory; the caller keeps it until
  // then). Throws lt::Error once the communicator has failed.
  virtual std::shared_ptr<CUevent_st> enqueue(std::span<const CollectiveCall> calls,
                                              CUstream after) = 0;
  // The NCCL calls alone on `stream`, which is capturing a CUDA graph (cuda_graph.h): no events,
  // no watchdog; watch() the graph's launch instead. Throws once the communicator failed.
  virtual void enqueue_captured(std::span<const CollectiveCall> calls, CUstream stream) = 0;
  // The watchdog bounds the work issued on `stream` so far (a graph launch holding collectives)
  // by the timeout, as it does each enqueue's collective; `what` names it in the error.
  virtual void watch(CUstream stream, const std::string& what) = 0;

  // The CUDA graphs holding this communicator's calls. NCCL frees a communicator (destroy or
  // abort) only once every graph that captured its calls is gone: it waits for them, so a graph
  // still cached by an executable would hang destroy_process_group and the watchdog's abort. A
  // graph registers before it captures (throws once the communicator is closing: the caller
  // launches plainly and raises the communicator's error); drop_graphs() resets each (its next
  // launch builds afresh, on whatever communicator the plan then uses).
  void hold_graph(const std::shared_ptr<CudaGraphReplay>& graph);
  void release_graph(const CudaGraphReplay* graph);

 protected:
  // Resets the held graphs and refuses new ones. Call before ncclCommFinalize/Destroy/Abort,
  // holding no lock a graph's launch takes (CudaGraphReplay's own, call_mu_).
  void drop_graphs();

 private:
  std::mutex graphs_mu_;
  std::vector<std::pair<const CudaGraphReplay*, std::weak_ptr<CudaGraphReplay>>> graphs_;
  bool graphs_closed_ = false;
};

// Registers the "nccl" engine with distributed/ (runtime/distributed.cc calls it once).
void register_nccl_engine();

}  // namespace lt
