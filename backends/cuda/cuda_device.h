// One CUDA device as the backend uses it: its primary context, one stream, and the attributes
// that code generation and launches need.
//
// Work is asynchronous: runs launch their kernels on the stream and return; host copies and
// synchronize() wait. Everything the backend does goes through this one stream, so a block the
// caching allocator hands out again is only touched after the work that used it before.
#pragma once
#include <memory>
#include <string>

#include "backends/cuda/driver_api.h"

namespace lt {

class CudaDevice {
 public:
  // Opens device `ordinal`; throws lt::Error ("no CUDA device" when the driver has none).
  // high_priority: the stream gets the device's greatest priority (its kernels' blocks are
  // scheduled before those of normal streams waiting for SMs; an NCCL stream's option).
  static std::shared_ptr<CudaDevice> open(int ordinal = 0, bool high_priority = false);
  ~CudaDevice();
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  // Makes the context current on the calling thread; every entry point calls it first, because
  // the runtime may call from any thread.
  void bind() const;
  const CudaDriver& driver() const { return *drv_; }
  CUstream stream() const { return stream_; }
  // The stream's priority (0, the default, or the device's greatest: a negative number).
  int stream_priority() const { return stream_priority_; }
  // Waits for everything issued on the stream (binds the context first); throws on a device fault,
  // and after a collective on this GPU failed (collective_error).
  void synchronize() const;
  // LT_CUDA_SYNC=1: every run waits for its kernels, so a fault is reported by the run that caused
  // it (for debugging; read once).
  static bool synchronous_runs();
  int ordinal() const { return ordinal_; }
  int cc_major() const { return cc_major_; }
  int cc_minor() const { return cc_minor_; }
  int sm_count() const { return sm_count_; }
  const std::string& name() const { return name_; }

 private:
  CudaDevice() = default;
  const CudaDriver* drv_ = nullptr;
  int ordinal_ = 0;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  int stream_priority_ = 0;
  int cc_major_ = 0, cc_minor_ = 0, sm_count_ = 1;
  std::string name_;
};

// A collective on GPU `ordinal` that failed (nccl_communicator.h: a peer gone, a timeout): work
// queued after it read garbage, so every synchronize() of that GPU raises `message` from then on,
// until the failed communicator is destroyed (destroy_process_group) or a new one on it is made.
void set_collective_error(int ordinal, std::string message);
void clear_collective_error(int ordinal);
// Throws lt::Error with the message when one is set for `ordinal`.
void raise_collective_error(int ordinal);

}  // namespace lt
