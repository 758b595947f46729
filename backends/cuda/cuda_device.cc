#include "backends/cuda/cuda_device.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>

#include "ir/error.h"

namespace lt {

std::shared_ptr<CudaDevice> CudaDevice::open(int ordinal, bool high_priority) {
  const CudaDriver& d = cuda_driver();
  if (!d.ok || d.device_count == 0)
    fail(ErrorKind::Runtime,
         "no CUDA device: ", d.error.empty() ? "the driver reports none" : d.error);
  if (ordinal < 0 || ordinal >= d.device_count)
    fail(ErrorKind::Runtime, "no CUDA device ", ordinal, ": ", d.device_count,
         " device(s) visible");
  std::shared_ptr<CudaDevice> dev(new CudaDevice());
  dev->drv_ = &d;
  dev->ordinal_ = ordinal;
  d.check(d.cuDeviceGet(&dev->dev_, ordinal), "cuDeviceGet");
  d.check(d.cuDeviceGetAttribute(&dev->cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                 dev->dev_),
          "cuDeviceGetAttribute");
  d.check(d.cuDeviceGetAttribute(&dev->cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                 dev->dev_),
          "cuDeviceGetAttribute");
  d.check(
      d.cuDeviceGetAttribute(&dev->sm_count_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev->dev_),
      "cuDeviceGetAttribute");
  char name[256] = {0};
  if (d.cuDeviceGetName(name, sizeof name - 1, dev->dev_) == CUDA_SUCCESS) dev->name_ = name;
  d.check(d.cuDevicePrimaryCtxRetain(&dev->ctx_, dev->dev_), "cuDevicePrimaryCtxRetain");
  dev->bind();
  if (high_priority) {
    int least = 0, greatest = 0;
    d.check(d.cuCtxGetStreamPriorityRange(&least, &greatest), "cuCtxGetStreamPriorityRange");
    dev->stream_priority_ = greatest;
  }
  d.check(d.cuStreamCreateWithPriority(&dev->stream_, CU_STREAM_DEFAULT, dev->stream_priority_),
          "cuStreamCreateWithPriority");
  return dev;
}

CudaDevice::~CudaDevice() {
  // Errors are ignored: at process exit the driver may already be shutting down.
  if (!drv_) return;
  if (ctx_) drv_->cuCtxSetCurrent(ctx_);
  if (stream_) drv_->cuStreamDestroy_v2(stream_);
  if (ctx_) drv_->cuDevicePrimaryCtxRelease_v2(dev_);
}

void CudaDevice::bind() const { drv_->check(drv_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"); }

void CudaDevice::synchronize() const {
  bind();
  drv_->check(drv_->cuStreamSynchronize(stream_), "cuStreamSynchronize");
  raise_collective_error(ordinal_);
}

namespace {
std::mutex collective_errors_mu;
std::map<int, std::string> collective_errors;   // by GPU
std::atomic<bool> any_collective_error{false};  // read without the lock on every synchronize
}  // namespace

void set_collective_error(int ordinal, std::string message) {
  std::lock_guard<std::mutex> lock(collective_errors_mu);
  collective_errors[ordinal] = std::move(message);
  any_collective_error = true;
}

void clear_collective_error(int ordinal) {
  std::lock_guard<std::mutex> lock(collective_errors_mu);
  collective_errors.erase(ordinal);
  any_collective_error = !collective_errors.empty();
}

void raise_collective_error(int ordinal) {
  if (!any_collective_error) return;
  std::lock_guard<std::mutex> lock(collective_errors_mu);
  auto it = collective_errors.find(ordinal);
  if (it != collective_errors.end()) fail(ErrorKind::Runtime, it->second);
}

bool CudaDevice::synchronous_runs() {
  static const bool on = [] {
    const char* e = std::getenv("LT_CUDA_SYNC");
    return e && *e && *e != '0';
  }();
  return on;
}

}  // namespace lt
